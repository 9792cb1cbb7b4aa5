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
//!
//! Only floating-point contraction is forbidden: PTX `mad` also multiplies
//! and adds integers (`mad.lo.s32`, `mad.wide.u32`: one exact integer
//! operation, which SWAR code and index arithmetic produce, DESK-CHECK §2.3),
//! and those are no FMA. `fma` exists only for floating types.

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
        let bad: Vec<&str> = text.lines().filter(|l| contractible(l)).collect();
        assert!(bad.is_empty(), "{}: {} f32 operations an FMA may fuse, e.g. {}", p.display(), bad.len(), bad[0].trim());
        checked += 1;
    }
    assert!(checked >= 8, "only {checked} kernel sources found");
}

/// Whether a PTX line is a floating-point operation ptxas may fuse into an
/// FMA, or is one: any `fma`, a floating `mad` (`mad.rn.f32`, `mad.f64`:
/// the old spelling of fma), or an f32 add, subtract or multiply without an
/// explicit rounding mode. Integer `mad.lo`/`mad.hi`/`mad.wide` are not.
fn contractible(line: &str) -> bool {
    let op = line.split_whitespace().next().unwrap_or("");
    let float = [".f16", ".f16x2", ".bf16", ".bf16x2", ".f32", ".f64"].iter().any(|t| op.ends_with(t));
    let f32_arith = ["add.", "sub.", "mul."].iter().any(|p| op.starts_with(p)) && op.ends_with(".f32");
    op.starts_with("fma.") || (op.starts_with("mad.") && float) || (f32_arith && !op.contains(".rn"))
}

#[test]
fn only_floating_point_contraction_is_rejected() {
    for l in [
        "\tfma.rn.f32 \t%f3, %f1, %f2, %f0;",
        "mad.rn.f32 %f1, %f2, %f3, %f4;",
        "mad.f64 %fd1, %fd2, %fd3, %fd4;",
        "fma.rn.f16x2 %r1, %r2, %r3, %r4;",
        "fma.rn.bf16x2 %r1, %r2, %r3, %r4;",
        "mul.f32 %f1, %f2, %f3;",
        "add.ftz.f32 %f1, %f2, %f3;",
        "sub.f32 %f1, %f2, %f3;",
    ] {
        assert!(contractible(l), "{l}");
    }
    for l in [
        "mad.lo.s32 %r1, %r2, %r3, %r4;",
        "mad.lo.u32 %r1, %r2, 3, %r4;",
        "mad.wide.u32 %rd1, %r2, 18, %rd4;",
        "mad.hi.u64 %rd1, %rd2, %rd3, %rd4;",
        "mul.rn.f32 %f1, %f2, %f3;",
        "add.rn.f32 %f1, %f2, %f3;",
        "mul.lo.s32 %r1, %r2, %r3;",
        "mul.wide.u32 %rd1, %r2, 18;",
        "ld.global.nc.u16 %rs1, [%rd1];",
    ] {
        assert!(!contractible(l), "{l}");
    }
}
