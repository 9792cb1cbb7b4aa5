//! x86-64 kernels (AVX2 + F16C), chosen at run time by `Isa::detect`.
pub mod avx2;
mod blocks;
mod lookup;
