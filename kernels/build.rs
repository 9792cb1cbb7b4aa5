//! Builds cuda/*.cu (this crate's CUDA sources) twice:
//! - for the host with the system C++ compiler (feature `host-grid`, which
//!   the crate's own tests enable): the host-grid library the CI parity
//!   tests run;
//! - for the GPU with nvcc into one fatbin per file (SASS for each supported
//!   architecture plus PTX for newer ones), when nvcc is found: embedded in
//!   the crate. Without nvcc the crate builds CPU-only and says so.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "build/mirror.rs"]
mod mirror;
#[path = "build/nvcc.rs"]
mod nvcc;

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let kernels = manifest.join("cuda");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    for entry in std::fs::read_dir(&kernels).expect("read kernels/").flatten() {
        println!("cargo:rerun-if-changed={}", entry.path().display());
    }
    for var in ["WEIGHTSTREAM_NVCC", "CUDA_HOME", "CUDA_PATH", "PATH"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    println!("cargo:rerun-if-changed=build/mirror.rs");
    println!("cargo:rerun-if-changed=build/nvcc.rs");
    // Written from the block table and the sources (build/mirror.rs); the
    // kernel sources include formats.cuh from here (-I OUT_DIR).
    let sources = kernel_sources(&kernels);
    std::fs::write(out.join("formats.cuh"), mirror::formats_cuh()).unwrap();
    std::fs::write(out.join("host_kernels.inc"), mirror::host_kernels_inc(&kernels, &sources)).unwrap();
    std::fs::write(out.join("kernel_modules.rs"), mirror::kernel_modules_rs(&kernels, &sources)).unwrap();
    // For tests that compile the sources themselves (tests/no_fma.rs).
    println!("cargo:rustc-env=WS_KERNELS_GENERATED={}", out.display());

    if env::var_os("CARGO_FEATURE_HOST_GRID").is_some() {
        cc::Build::new()
            .cpp(true)
            .std("c++17")
            .file(kernels.join("host_grid.cpp"))
            .include(&out)
            // Same numerics as the GPU: no contraction into FMAs, no fast math.
            .flag_if_supported("-ffp-contract=off")
            .flag_if_supported("-fno-fast-math")
            .warnings(true)
            .compile("ws_kernels_host");
    }

    let mut entries = Vec::new();
    let mut version = String::new();
    match find_nvcc() {
        Some(nvcc) => {
            version = nvcc_version(&nvcc);
            nvcc::compile_all(&nvcc, &version, &kernels, &out, &sources);
            for k in &sources {
                let fatbin = out.join(format!("{k}.fatbin"));
                entries.push(format!("(\"{k}\", include_bytes!({:?}))", fatbin.display().to_string()));
            }
        }
        None => println!("cargo:warning=nvcc not found (set WEIGHTSTREAM_NVCC or run scripts/setup.sh): building without GPU kernels"),
    }
    std::fs::write(out.join("fatbins.rs"), format!("&[{}]", entries.join(", "))).unwrap();
    println!("cargo:rustc-env=WS_NVCC_VERSION={version}");
}

/// Kernel sources, one per format family: every `cuda/*.cu` (a new
/// family is picked up by adding its file), sorted for stable output.
fn kernel_sources(dir: &Path) -> Vec<String> {
    let mut stems: Vec<String> = std::fs::read_dir(dir)
        .expect("read kernels/")
        .flatten()
        .filter_map(|e| {
            let p = e.path();
            (p.extension().and_then(|x| x.to_str()) == Some("cu")).then(|| p.file_stem()?.to_str().map(str::to_string)).flatten()
        })
        .collect();
    stems.sort();
    stems
}

/// nvcc: `WEIGHTSTREAM_NVCC` (scripts/env.sh points it at the pinned PyPI
/// toolchain that scripts/setup.sh installs), else a CUDA installation.
fn find_nvcc() -> Option<PathBuf> {
    if let Some(p) = env::var_os("WEIGHTSTREAM_NVCC").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(h) = env::var_os(var) {
            let n = PathBuf::from(h).join("bin/nvcc");
            if n.is_file() {
                return Some(n);
            }
        }
    }
    env::var_os("PATH").and_then(|paths| env::split_paths(&paths).map(|d| d.join("nvcc")).find(|p| p.is_file()))
}

fn nvcc_version(nvcc: &Path) -> String {
    Command::new(nvcc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().find(|l| l.contains("release")).map(|l| l.trim().to_string()))
        .unwrap_or_default()
}
