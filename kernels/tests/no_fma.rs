//! No kernel can be compiled into a fused multiply-add: gguf-py rounds
//! after every f32 operation, and an FMA would change the last bit of some
//! outputs. nvcc emits a plain `*` or `-` as `mul.f32`/`sub.f32`, which
//! ptxas contracts into FFMA when fmad is on (the default); `__fmul_rn` and
//! friends emit `mul.rn.f32`, which it never contracts. So the PTX of every
//! kernel, built with nvcc's default settings (build.rs adds --fmad=false
//! besides), must have no `fma` and no f32 add, subtract or multiply
//! without an explicit rounding mode: a plain operator creeping into a
//! kernel fails here. Runs where nvcc is (WEIGHTSTREAM_NVCC: scripts/env.sh
//! sets it; CI always has it).

use std::path::Path;
use std::process::Command;

#[test]
fn no_kernel_ptx_has_a_fused_multiply_add() {
    let Some(nvcc) = std::env::var_os("WEIGHTSTREAM_NVCC") else {
        assert!(std::env::var_os("WEIGHTSTREAM_REQUIRE_GPU_KERNELS").is_none(), "nvcc is required here but WEIGHTSTREAM_NVCC is unset");
        eprintln!("skipped: no WEIGHTSTREAM_NVCC");
        return;
    };
    let kernels = Path::new(env!("CARGO_MANIFEST_DIR")).join("cuda");
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("no_fma");
    std::fs::create_dir_all(&out).unwrap();
    let mut checked = 0;
    for entry in std::fs::read_dir(&kernels).unwrap().flatten() {
        let p = entry.path();
        if p.extension().and_then(|e| e.to_str()) != Some("cu") {
            continue;
        }
        let ptx = out.join(p.file_stem().unwrap()).with_extension("ptx");
        let r = Command::new(&nvcc)
            .args(["-ptx", "-std=c++17", "-O3", "-arch=compute_90", "-I", env!("WS_KERNELS_GENERATED"), "-o"])
            .arg(&ptx)
            .arg(&p)
            .output()
            .expect("run nvcc");
        assert!(r.status.success(), "nvcc -ptx {}: {}", p.display(), String::from_utf8_lossy(&r.stderr));
        let text = std::fs::read_to_string(&ptx).unwrap();
        let contractible = |l: &&str| {
            let op = l.split_whitespace().next().unwrap_or("");
            let f32_arith = ["add.", "sub.", "mul.", "fma.", "mad."].iter().any(|p| op.starts_with(p)) && op.ends_with(".f32");
            op.starts_with("fma.") || op.starts_with("mad.") || (f32_arith && !op.contains(".rn"))
        };
        let bad: Vec<&str> = text.lines().filter(contractible).collect();
        assert!(bad.is_empty(), "{}: {} f32 operations an FMA may fuse, e.g. {}", p.display(), bad.len(), bad[0].trim());
        checked += 1;
    }
    assert!(checked >= 8, "only {checked} kernel sources found");
}
