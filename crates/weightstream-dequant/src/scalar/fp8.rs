//! Portable FP8 (E4M3, E5M2) runs of one scale -> BF16.

use crate::numerics::Fp8Table;
use crate::output::Output;
use weightstream_blocks::Fp8Format;

/// A run of FP8 values sharing one scale.
pub fn fp8_run<O: Output>(format: Fp8Format, scale: f32, src: &[u8], dst: &mut [u16]) {
    let table = match format {
        Fp8Format::E4M3 => Fp8Table::e4m3(),
        Fp8Format::E5M2 => Fp8Table::e5m2(),
    };
    for (&v, o) in src.iter().zip(dst.iter_mut()) {
        *o = O::from_f32(table.0[v as usize] * scale);
    }
}
