//! Which instruction set the kernels use: the best the CPU has, unless
//! `WEIGHTSTREAM_ISA` (scalar | avx2 | avx512-int | avx512 | neon) or the caller says otherwise.

use std::sync::OnceLock;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Isa {
    /// Portable Rust (the reference; LLVM vectorises it for the baseline ISA).
    Scalar,
    /// x86-64 AVX2 + F16C.
    Avx2,
    /// x86-64 AVX-512 (F, BW, VL) + F16C, with AVX2 for the formats that have
    /// no AVX-512 kernel; BF16 rounding by `vcvtne2ps2bf16` where the CPU
    /// also has AVX512_BF16. AVX-512 kernels: F32, F16, FP8, Q4_0, Q8_0,
    /// Q4_1, Q5_0, Q5_1, Q2_K ... Q6_K, the IQ2/IQ3/IQ1 grids, the E2M1 and
    /// integer packs; AVX2 ones for IQ4_NL, IQ4_XS, MXFP4, NVFP4, TQ1_0,
    /// TQ2_0, which look every output up in a table (list: x86/mod.rs `avx512_block_kernel`).
    Avx512,
    /// `Avx512` with the integer BF16 rounding, never `vcvtne2ps2bf16`:
    /// what `Avx512` runs on CPUs without AVX512_BF16, selectable on those
    /// with it so that one machine tests and measures both.
    Avx512Int,
    /// aarch64 NEON (every aarch64 CPU has it): a kernel for every format
    /// (arm/).
    Neon,
}

pub const ENV_VAR: &str = "WEIGHTSTREAM_ISA";

impl Isa {
    /// Every ISA, worst to best within each architecture: `detect` picks
    /// the last one supported (a CPU supports one architecture's only).
    pub const ALL: [Isa; 5] = [Isa::Scalar, Isa::Avx2, Isa::Avx512Int, Isa::Avx512, Isa::Neon];

    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
            Isa::Avx512Int => "avx512-int",
            Isa::Neon => "neon",
        }
    }

    pub fn parse(s: &str) -> Option<Isa> {
        Isa::ALL.into_iter().find(|i| i.name() == s)
    }

    /// Whether this CPU can run it.
    pub fn supported(self) -> bool {
        match self {
            Isa::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => is_x86_feature_detected!("avx2") && is_x86_feature_detected!("f16c"),
            // AVX2 too: formats without an AVX-512 kernel run their AVX2 one.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 | Isa::Avx512Int => {
                is_x86_feature_detected!("avx512f")
                    && is_x86_feature_detected!("avx512bw")
                    && is_x86_feature_detected!("avx512vl")
                    && is_x86_feature_detected!("f16c")
                    && is_x86_feature_detected!("avx2")
            }
            #[cfg(not(target_arch = "x86_64"))]
            Isa::Avx2 | Isa::Avx512 | Isa::Avx512Int => false,
            #[cfg(target_arch = "aarch64")]
            Isa::Neon => std::arch::is_aarch64_feature_detected!("neon"),
            #[cfg(not(target_arch = "aarch64"))]
            Isa::Neon => false,
        }
    }

    pub fn all_supported() -> Vec<Isa> {
        Isa::ALL.into_iter().filter(|i| i.supported()).collect()
    }

    /// The best supported ISA, or the one `WEIGHTSTREAM_ISA` names (if this
    /// CPU supports it). Decided once per process.
    pub fn detect() -> Isa {
        static CHOSEN: OnceLock<Isa> = OnceLock::new();
        *CHOSEN.get_or_init(|| {
            if let Some(forced) = std::env::var(ENV_VAR).ok().as_deref().and_then(Isa::parse) {
                if forced.supported() {
                    return forced;
                }
            }
            Isa::ALL.into_iter().rev().find(|i| i.supported()).unwrap_or(Isa::Scalar)
        })
    }
}
