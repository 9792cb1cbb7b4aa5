//! x86-64 kernels (AVX2 + F16C; AVX-512 for the commonest formats), chosen
//! at run time by `Isa::detect`.
pub mod avx2;
pub mod avx512;
mod blocks;
mod lookup;
pub mod packed256;
pub mod packed512;
