//! Test data: a seeded generator (seed printed, `WEIGHTSTREAM_SEED`
//! reproduces) and edge-case blocks.

#![allow(dead_code)]

pub use weightstream_io::testing::SeededRng as Rng;

/// f16 scale bit patterns worth testing: zero, both signs, subnormals, the
/// largest finite, infinity, NaN, ordinary values.
pub const F16_EDGES: &[u16] = &[
    0x0000, 0x8000, 0x0001, 0x03FF, 0x8001, 0x0400, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFFFF, 0x3C00, 0x2E66, 0xB800, 0x1400,
];

/// f32 bit patterns worth testing.
pub const F32_EDGES: &[u32] = &[
    0x0000_0000,
    0x8000_0000,
    0x0000_0001,
    0x007F_FFFF,
    0x0080_0000,
    0x7F7F_FFFF,
    0xFF7F_FFFF,
    0x7F80_0000,
    0xFF80_0000,
    0x7FC0_0000,
    0xFFC0_0001,
    0x7F80_0001,
    0x3F80_8000,
    0x3F81_8000,
    0x3F80_7FFF,
    0x7F7F_8000,
    0x3F80_0000,
];

/// Blocks of format `f`: every f16 edge value in all of its f16 fields
/// (`BlockLayout::edge_blocks`), then `random` blocks of random bytes.
pub fn block_source(rng: &mut Rng, f: weightstream_blocks::BlockFormat, random: usize) -> Vec<u8> {
    let l = f.layout();
    let mut src = l.edge_blocks(F16_EDGES);
    for _ in 0..random {
        src.extend(rng.bytes(l.bytes));
    }
    src
}
