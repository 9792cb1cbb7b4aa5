//! Block-format and float cases.

use weightstream_blocks::block::{E8M0_EDGES, UE4M3_EDGES};
use weightstream_blocks::{BlockFormat, Encoding};

use super::{Case, Draw, Size, F16_EDGES, F32_EDGES};

/// Every block format: edge f16 values in every f16 field followed by
/// random blocks, a single block and three, edge bytes in the scales that
/// are not f16 fields, and enough random blocks that every grid entry is
/// looked up (the largest grid, IQ1_S/IQ1_M's 2048 entries at 32 draws a
/// block, misses one in 1500 blocks with probability about 1e-6).
pub(super) fn cases(size: Size, draw: &mut Draw) -> Vec<Case> {
    let mut cases = Vec::new();
    for &f in BlockFormat::ALL {
        let l = f.layout();
        let e = Encoding::Block(f);
        let mut counts = vec![0usize, 1, 5, 131];
        if size == Size::Device {
            counts.push(100_003);
        }
        for random in counts {
            let mut src = l.edge_blocks(F16_EDGES);
            src.extend(draw.bytes(random * l.bytes));
            cases.push(Case::plain(format!("{} edges +{random} random blocks", l.name), e, src));
        }
        for blocks in [1usize, 3] {
            cases.push(Case::plain(format!("{} {blocks} block(s)", l.name), e, draw.bytes(blocks * l.bytes)));
        }
        let blocks = 3 * F16_EDGES.len().max(E8M0_EDGES.len()).max(UE4M3_EDGES.len()) + 1;
        let mut src = draw.bytes(blocks * l.bytes);
        if src.chunks_exact_mut(l.bytes).enumerate().all(|(i, b)| f.set_edge_scales(b, i, F16_EDGES)) {
            cases.push(Case::plain(format!("{} scale bytes at their edges", l.name), e, src));
        }
        cases.push(Case::plain(format!("{} x1500 random blocks", l.name), e, draw.bytes(1500 * l.bytes)));
    }
    cases
}

/// F32 and F16: edge values then random ones at every tail length around
/// the vector widths, every F16 value, and one F32 special (subnormal, NaN)
/// at every lane of a vector among ordinary values (`vcvtne2ps2bf16`
/// flushes subnormals, which is why AVX-512 F32 rounds with the integers).
pub(super) fn float_cases(draw: &mut Draw) -> Vec<Case> {
    let mut cases = Vec::new();
    let mut f32src: Vec<u8> = F32_EDGES.iter().flat_map(|b| b.to_le_bytes()).collect();
    f32src.extend(draw.bytes(4 * 1001));
    for n in [0usize, 1, 7, 8, 9, 13, 15, 16, 17, 31, 32, 33, 63, 64, 65, F32_EDGES.len() + 1001] {
        cases.push(Case::plain(format!("F32 n={n}"), Encoding::F32, f32src[..4 * n].to_vec()));
    }
    let mut f16src: Vec<u8> = (0..=u16::MAX).flat_map(|h| h.to_le_bytes()).collect();
    f16src.extend(draw.bytes(2 * 37));
    for n in [0usize, 1, 5, 15, 16, 17, 31, 32, 33, 65536 + 37] {
        cases.push(Case::plain(format!("F16 n={n}"), Encoding::F16, f16src[..2 * n].to_vec()));
    }
    let mut bf16src: Vec<u8> = (0..=u16::MAX).flat_map(|h| h.to_le_bytes()).collect();
    bf16src.extend(draw.bytes(2 * 37));
    for n in [1usize, 7, 9, 17, 65536 + 37] {
        cases.push(Case::plain(format!("BF16 n={n}"), Encoding::BF16, bf16src[..2 * n].to_vec()));
    }
    cases.push(Case::plain("F32 on float16 rounding edges".into(), Encoding::F32, f16_edges_f32()));
    let ordinary = 0x3F80_1234u32;
    for special in [0x0000_0001u32, 0x8040_0000, 0x007F_FFFF, 0x0001_8000, 0x7FC0_0001, 0xFF80_0001] {
        for lane in 0..64 {
            let src: Vec<u8> = (0..64 + 5).flat_map(|i| if i == lane { special } else { ordinary + i as u32 }.to_le_bytes()).collect();
            cases.push(Case::plain(format!("F32 {special:#x} at lane {lane}"), Encoding::F32, src));
        }
    }
    cases
}

/// f32 values where rounding to float16 decides something (every 5th f16
/// value of either sign): the value, the midpoint to the next (a tie) and
/// the f32 values either side of it; around the largest finite (65504, the
/// tie 65520 that rounds to infinity), the subnormal quantum 2^-24 and half
/// of it (2^-25, the tie to zero).
fn f16_edges_f32() -> Vec<u8> {
    let mut v: Vec<u32> = Vec::new();
    for h in (0u16..0x7BFF).step_by(5).chain([0x03FF, 0x0400, 0x7BFE]) {
        let (a, b) = (crate::numerics::f16_to_f32(h), crate::numerics::f16_to_f32(h + 1));
        let mid = ((a as f64 + b as f64) / 2.0) as f32; // exact: 12 significant bits
        for x in [a.to_bits(), mid.to_bits(), mid.to_bits() - 1, mid.to_bits() + 1] {
            v.extend([x, x | 0x8000_0000]);
        }
    }
    for x in [65504.0f32, 65519.996, 65520.0, 65536.0, 5.960_464_5e-8, 2.980_232_2e-8, 8.940_697e-8] {
        for b in [x.to_bits() - 1, x.to_bits(), x.to_bits() + 1] {
            v.extend([b, b | 0x8000_0000]);
        }
    }
    v.iter().flat_map(|b| b.to_le_bytes()).collect()
}
