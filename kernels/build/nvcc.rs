//! nvcc for build.rs: every kernel source compiled at once (one nvcc per
//! file, as many at a time as cargo gives this build jobs), each fatbin
//! taken from a cache when an earlier build compiled exactly the same
//! inputs.
//!
//! The cache (`WEIGHTSTREAM_FATBIN_CACHE`, which scripts/env.sh points
//! into the machine's weightstream cache; unset: no cache) matters because
//! the fatbins are the slowest part of the build (about 1.5 minutes of one
//! core for kquant.cu alone on the 2-core CI machine) and are made again
//! for every fresh clone and for every feature set of this crate (the
//! release build and the tests' `host-grid` build each run this script).
//! An entry is used only if the inputs it was made from (nvcc's version,
//! the architectures, the file's name, every source and header of
//! kernels/cuda and the generated formats.cuh) are byte for byte the
//! current ones: the hash only names the folder, the stored inputs decide.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Real architectures to ship SASS for; PTX of the last one for the rest.
const ARCHS: &[u32] = &[75, 80, 86, 89, 90];

/// Compile `kernels/STEM.cu` for each stem into `out/STEM.fatbin`.
pub fn compile_all(nvcc: &Path, version: &str, kernels: &Path, out: &Path, stems: &[String]) {
    println!("cargo:rerun-if-env-changed=WEIGHTSTREAM_FATBIN_CACHE");
    let cache = std::env::var_os("WEIGHTSTREAM_FATBIN_CACHE").filter(|c| !c.is_empty()).map(PathBuf::from);
    let shared = shared_inputs(version, kernels, out);
    let jobs = std::env::var("NUM_JOBS").ok().and_then(|j| j.parse().ok()).unwrap_or(1usize).max(1);
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..jobs.min(stems.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(stem) = stems.get(i) else { break };
                let fatbin = out.join(format!("{stem}.fatbin"));
                let inputs = format!("{stem}\n{shared}");
                if cache.as_deref().is_some_and(|c| take(c, stem, &inputs, &fatbin)) {
                    continue;
                }
                compile(nvcc, &kernels.join(format!("{stem}.cu")), out, &fatbin);
                if let Some(c) = &cache {
                    keep(c, stem, &inputs, &fatbin);
                }
            });
        }
    });
}

/// What every fatbin depends on besides its own name.
fn shared_inputs(version: &str, kernels: &Path, out: &Path) -> String {
    let mut files: Vec<PathBuf> = std::fs::read_dir(kernels).expect("read kernels/").flatten().map(|e| e.path()).collect();
    files.push(out.join("formats.cuh"));
    files.sort();
    let mut s = format!("{version}\n{ARCHS:?}\n");
    for f in files {
        let text = std::fs::read(&f).unwrap_or_else(|e| panic!("read {}: {e}", f.display()));
        s += &format!("== {} {}\n", f.file_name().unwrap().to_string_lossy(), text.len());
        s += &String::from_utf8_lossy(&text);
    }
    s
}

/// FNV-1a: names the entry's folder only (the stored inputs are compared).
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

fn entry(cache: &Path, stem: &str, inputs: &str) -> PathBuf {
    cache.join(format!("{stem}-{:016x}", fnv(inputs)))
}

/// The cached fatbin copied to `fatbin` if its inputs are these.
fn take(cache: &Path, stem: &str, inputs: &str, fatbin: &Path) -> bool {
    let dir = entry(cache, stem, inputs);
    std::fs::read(dir.join("inputs")).is_ok_and(|stored| stored == inputs.as_bytes()) && std::fs::copy(dir.join("fatbin"), fatbin).is_ok()
}

/// Store a fatbin: written to a temporary folder, then renamed into place,
/// so a concurrent build sees a whole entry or none. Failing to store only
/// costs the next build the compile.
fn keep(cache: &Path, stem: &str, inputs: &str, fatbin: &Path) {
    let dir = entry(cache, stem, inputs);
    let tmp = cache.join(format!(".tmp-{stem}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let stored = std::fs::create_dir_all(&tmp)
        .and_then(|()| std::fs::copy(fatbin, tmp.join("fatbin")))
        .and_then(|_| std::fs::write(tmp.join("inputs"), inputs))
        .and_then(|()| std::fs::rename(&tmp, &dir));
    if stored.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
}

fn compile(nvcc: &Path, src: &Path, include: &Path, fatbin: &Path) {
    let mut cmd = Command::new(nvcc);
    cmd.arg("-fatbin").arg("-std=c++17").arg("-O3").arg("--fmad=false").arg("-I").arg(include);
    for a in ARCHS {
        cmd.arg("-gencode").arg(format!("arch=compute_{a},code=sm_{a}"));
    }
    let newest = ARCHS.last().unwrap();
    cmd.arg("-gencode").arg(format!("arch=compute_{newest},code=compute_{newest}"));
    cmd.arg("-o").arg(fatbin).arg(src);
    let output = cmd.output().unwrap_or_else(|e| panic!("cannot run {}: {e}", nvcc.display()));
    if !output.status.success() {
        panic!("nvcc failed on {}:\n{}{}", src.display(), String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    }
}
