//! x86-64 kernels (AVX2 + F16C; AVX-512 for the formats listed in
//! avx512.rs), chosen at run time by `Isa::detect`.

/// Each kernel body three times: `$avx2` for AVX2 + F16C with the
/// module's `Avx2`, `$avx512_int` for AVX-512 with its `Avx512Int` (the
/// integer BF16 rounding), `$avx512` for AVX-512 + AVX512_BF16 with its
/// `Avx512Bf16` (blocks.rs, lookup.rs).
macro_rules! kernels {
    ($($avx2:ident, $avx512_int:ident, $avx512:ident => $body:ident;)*) => {$(
        #[target_feature(enable = "avx2,f16c")]
        pub unsafe fn $avx2(src: &[u8], dst: &mut [u16]) {
            // SAFETY: the caller confirmed these features (Isa::Avx2) and
            // the lengths (Kernel::check).
            unsafe { $body::<Avx2>(src, dst) }
        }

        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,f16c")]
        pub unsafe fn $avx512_int(src: &[u8], dst: &mut [u16]) {
            // SAFETY: the caller confirmed these features (Isa::Avx512 or
            // Isa::Avx512Int) and the lengths (Kernel::check).
            unsafe { $body::<Avx512Int>(src, dst) }
        }

        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,f16c,avx512bf16")]
        pub unsafe fn $avx512(src: &[u8], dst: &mut [u16]) {
            // SAFETY: the caller confirmed these features (Isa::Avx512 and
            // avx512::has_bf16) and the lengths (Kernel::check).
            unsafe { $body::<Avx512Bf16>(src, dst) }
        }
    )*};
}

pub mod avx2;
pub mod avx512;
mod blocks;
mod lookup;
pub mod packed256;
pub mod packed512;
