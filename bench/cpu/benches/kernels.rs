//! Criterion benchmarks of every CPU kernel and ISA on a 4096x11008 matrix
//! (a Llama-7B MLP weight), single thread, hot output buffer; throughput in
//! BF16 bytes written. `weightstream bench` reports the same with a memcpy
//! baseline beside each kernel.
//!
//!     cargo bench -p weightstream-bench

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use weightstream_bench::{block_scales, bytes, fp8_codes, quant_blocks};
use weightstream_dequant::{dequantize, Isa, Kernel, OutDtype, ScaleGrid};
use weightstream_format::{BlockFormat, Fp8Format};

const ROWS: u64 = 4096;
const COLS: u64 = 11008;

fn kernels(c: &mut Criterion) {
    let n = (ROWS * COLS) as usize;
    let blocks: Vec<(BlockFormat, Vec<u8>)> = BlockFormat::ALL.iter().map(|&f| (f, quant_blocks(n, f))).collect();
    let f8 = fp8_codes(n);
    let f16: Vec<u8> = bytes(2 * n, 3).chunks_exact(2).flat_map(|c| [c[0], c[1] & 0x3B]).collect();
    let (layout, scales) = block_scales(ROWS, COLS);
    let grid = ScaleGrid::new(&scales, &layout, ROWS, COLS).unwrap();
    let mut cases: Vec<(&str, Kernel, &[u8])> =
        blocks.iter().map(|(f, src)| (f.layout().module, Kernel::Block(*f), src.as_slice())).collect();
    cases.extend::<[(&str, Kernel, &[u8]); 3]>([
        ("fp8_e4m3_block", Kernel::Fp8 { format: Fp8Format::E4M3, rows: ROWS, cols: COLS, scales: Some(grid) }, f8.as_slice()),
        ("fp8_e5m2_block", Kernel::Fp8 { format: Fp8Format::E5M2, rows: ROWS, cols: COLS, scales: Some(grid) }, f8.as_slice()),
        ("f16", Kernel::F16, f16.as_slice()),
    ]);
    let mut out = vec![0u16; n];
    let mut g = c.benchmark_group("dequant_4096x11008");
    g.throughput(Throughput::Bytes(2 * n as u64)).sample_size(10);
    for (name, kernel, src) in &cases {
        for isa in Isa::all_supported() {
            g.bench_with_input(BenchmarkId::new(*name, isa.name()), src, |b, src| {
                b.iter(|| dequantize(kernel, OutDtype::BF16, 0, src, &mut out, isa).unwrap())
            });
        }
    }
    let baseline = vec![0x3F80u16; n];
    g.bench_function("memcpy", |b| b.iter(|| out.copy_from_slice(&baseline)));
    g.finish();
}

criterion_group!(benches, kernels);
criterion_main!(benches);
