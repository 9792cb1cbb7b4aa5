//! The repack kernels' `__global__` parameter lists (cuda/gptq.cu,
//! cuda/fp4.cu) are exactly `Launch::args`, name for name and in order
//! (the destination excepted: the kernels name it), and every parameter is
//! 64 bits wide, as the executor packs them: a mismatch would otherwise
//! show only on a GPU. (The dequant kernels' lists come from shared
//! macros, exercised by every launch of the GPU round.)

use weightstream_blocks::BlockFormat;
use weightstream_kernels::{Fp4Args, GptqArgs, Launch};

/// The parameter names of `function` in `source`, each with its type
/// checked to be a pointer or a `uint64_t`.
fn params(source: &str, function: &str) -> Vec<String> {
    let start = source.find(&format!("__global__ void {function}(")).unwrap_or_else(|| panic!("{function} not defined"));
    let list = &source[start..];
    let list = &list[list.find('(').unwrap() + 1..list.find(')').unwrap()];
    list.split(',')
        .map(|p| {
            let p = p.split_whitespace().collect::<Vec<_>>();
            let (name, ty) = p.split_last().expect("a parameter");
            assert!(ty.iter().any(|t| t.ends_with('*')) || ty == ["uint64_t"], "{function}: {p:?} is not 64 bits wide");
            name.to_string()
        })
        .collect()
}

#[test]
fn repack_kernels_take_exactly_launch_args() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/cuda");
    let launches = [
        Launch::Gptq(GptqArgs { format: BlockFormat::Q4_0, scales: 0, rows: 1, width: 32, col_start: 0, bits: 4, group: 32 }),
        Launch::Fp4(Fp4Args { format: BlockFormat::NVFP4, scales: 0, rows: 1, width: 64, col_start: 0, group: 16 }),
    ];
    for launch in launches {
        let (module, function) = launch.function();
        let source = std::fs::read_to_string(format!("{dir}/{module}.cu")).unwrap();
        let got = params(&source, function);
        let want: Vec<_> = launch.args(0, 0, 0).into_iter().map(|(n, _)| n.to_string()).collect();
        assert_eq!(got.len(), want.len(), "{function}: {got:?} against {want:?}");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(g == w || (i == 1 && w == "dst"), "{function} parameter {i}: {g} where Launch::args has {w}");
        }
    }
}
