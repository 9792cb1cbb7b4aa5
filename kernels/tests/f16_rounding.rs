//! The kernels' f32 -> float16 rounding (cuda/common.cuh `f32_to_f16`,
//! integer code on the host and the device alike) is the CPU kernels'
//! (weightstream-dequant `f32_to_f16`) on every one of the 2^32 f32 bit
//! patterns: round to nearest even, infinity from 65520, f16 subnormals,
//! signed zeros, every NaN 0x7E00. The parity cases then only need to reach
//! each kernel's arithmetic, not every rounding edge.

use weightstream_kernels::host_grid;

#[test]
fn f32_to_f16_matches_the_cpu_on_every_f32() {
    const CHUNK: u32 = 1 << 22;
    let mut bits = vec![0u32; CHUNK as usize];
    let mut got = vec![0u16; CHUNK as usize];
    let mut checked = 0u64;
    for start in (0..=u32::MAX - (CHUNK - 1)).step_by(CHUNK as usize) {
        for (i, b) in bits.iter_mut().enumerate() {
            *b = start + i as u32;
        }
        host_grid::f32_to_f16(&bits, &mut got);
        for (&b, &h) in bits.iter().zip(&got) {
            let want = weightstream_dequant::f32_to_f16(f32::from_bits(b));
            assert_eq!(h, want, "f32 {b:#010x}: kernels {h:#06x}, CPU {want:#06x}");
        }
        checked += CHUNK as u64;
    }
    assert_eq!(checked, 1 << 32);
}
