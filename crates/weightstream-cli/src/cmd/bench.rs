//! `weightstream bench`: how fast this machine's CPU dequantizes.

use std::hint::black_box;

use rayon::prelude::*;
use serde_json::json;
use weightstream::dequant::{dequantize_par, runs_on, Isa, Kernel, OutDtype, ScaleGrid, DEFAULT_PIECE};
use weightstream::format::{BlockFormat, Fp8Format, ScaleKind, ScaleLayout};

use crate::human::Table;
use crate::report::{CmdResult, OrFail};
use crate::stats::Timing;

#[derive(clap::Args)]
#[command(
    about = "Measure the CPU dequant kernels against memcpy on this machine",
    long_about = "For each kernel, dequantizes a 4096x11008 matrix (a Llama-7B MLP weight) to BF16 \
repeatedly after warm-up and reports output GB/s (median, fastest, slowest) beside a memcpy of the \
same output size measured in the same run, and their ratio. Hot: the output buffer is reused \
(what a loader's ring of buffers sees). Fresh: a newly allocated buffer each run, so page faults \
are part of the cost. PATH: whose kernel ran, the chosen ISA's or the one it falls back to for that \
format (AVX2 for the table-lookup formats under AVX-512; bf16 is a copy). With --dtype f16, each kernel writes float16, measured hot in the same rounds as its BF16 path and memcpy (run by run in turn), and the table gives float16's GB/s beside BF16's and their ratio.",
    after_help = "Examples:\n  \
weightstream bench                       every kernel, all cores\n  \
weightstream bench --format q4_0 --threads 1\n  \
weightstream bench --dtype f16 --threads 1    float16 output against BF16 and memcpy, per kernel\n  \
python3 bench/cpu/paths.py               every path in interleaved rounds, one table\n  \
WEIGHTSTREAM_ISA=scalar weightstream bench --json   the portable kernels\n  \
WEIGHTSTREAM_ISA=avx2 weightstream bench --format q4_0   one path: scalar, avx2, avx512-int (AVX-512 without vcvtne2ps2bf16), avx512 or neon (default: the best the CPU has)"
)]
pub struct Args {
    /// Kernels to run (repeatable): every block format by name (`weightstream formats` lists
    /// them: q4_0 ... q6_k, iq4_xs, mxfp4, iq2_xxs, tq1_0, ...), fp8-tensor, fp8-channel,
    /// fp8-block, e5m2-block, the safetensors packs nvfp4-st (E2M1, groups of 16), mxfp4-st
    /// (groups of 32), int4-g128, int4-g128-zp (with zero points), int8-channel-f16 (F16 scales),
    /// f16, f32, bf16
    #[arg(long = "format", value_name = "F")]
    pub formats: Vec<String>,
    /// Threads (default: all cores)
    #[arg(long)]
    pub threads: Option<usize>,
    /// Timed runs per measurement
    #[arg(long, default_value_t = 15)]
    pub reps: usize,
    /// Matrix shape ROWSxCOLS
    #[arg(long, default_value = "4096x11008")]
    pub shape: String,
    /// Output: bf16 (the default), or f16: float16 measured against the BF16 path and memcpy
    /// in the same rounds (hot buffers)
    #[arg(long, default_value = "bf16", value_parser = crate::dtype_arg::parse)]
    pub dtype: crate::dtype_arg::OutDtype,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
}

/// Bounds on `--shape`'s element count (see `run`) and on `--threads`.
const MIN_ELEMS: u64 = 1 << 16;
const MAX_ELEMS: u64 = 1 << 31;
const MAX_THREADS: usize = 1024;

/// Every kernel's name: the block formats (lower-case), then the others.
fn all_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = BlockFormat::ALL.iter().map(|f| f.layout().module).collect();
    names.extend([
        "fp8-tensor",
        "fp8-channel",
        "fp8-block",
        "e5m2-block",
        "nvfp4-st",
        "mxfp4-st",
        "int4-g128",
        "int4-g128-zp",
        "int8-channel-f16",
        "f16",
        "f32",
        "bf16",
    ]);
    names
}

struct Input {
    src: Vec<u8>,
    kind: InputKind,
}

enum InputKind {
    Plain(Kernel<'static>),
    /// Kernels with scale grids borrow them: built where `scales` lives.
    Grid {
        element: GridElement,
        layout: ScaleLayout,
        scales: Vec<f32>,
        zeros: Option<Vec<f32>>,
    },
}

#[derive(Clone, Copy)]
enum GridElement {
    Fp8(Fp8Format),
    E2m1,
    Int { bits: u8, round_f16: bool },
}

/// Deterministic pseudo-random bytes (xorshift), fast enough for 100 MB.
fn bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut v = Vec::with_capacity(n + 8);
    while v.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(n);
    v
}

fn input(name: &'static str, rows: u64, cols: u64) -> Option<Input> {
    let n = (rows * cols) as usize;
    // Random blocks with ordinary scales (0.1 and the like): no NaN,
    // infinity or subnormal taking a different path.
    let quant = |f: BlockFormat| {
        let l = f.layout();
        let mut src = bytes(n / l.elems * l.bytes, 7);
        for b in src.chunks_exact_mut(l.bytes) {
            f.set_ordinary_scales(b);
        }
        src
    };
    let ordinary = |layout: ScaleLayout| (0..layout.grid_rows * layout.grid_cols).map(|i| 1.0 + i as f32 / 1024.0).collect();
    let fp8 = |format: Fp8Format, layout: ScaleLayout| Input {
        // No NaN codes: they would take no different path, but keep outputs ordinary.
        src: bytes(n, 11).into_iter().map(|b| if b & 0x7F == 0x7F { b ^ 1 } else { b }).collect(),
        kind: InputKind::Grid { element: GridElement::Fp8(format), layout, scales: ordinary(layout), zeros: None },
    };
    let packed = |element: GridElement, bits: usize, layout: ScaleLayout, zeros: bool| Input {
        src: bytes(n * bits / 8, 13),
        kind: InputKind::Grid {
            element,
            layout,
            scales: ordinary(layout),
            zeros: zeros.then(|| (0..layout.grid_rows * layout.grid_cols).map(|i| (i % 16) as f32 - 8.0).collect()),
        },
    };
    let block = |br: u64, bc: u64, kind| ScaleLayout {
        kind,
        block_rows: br,
        block_cols: bc,
        grid_rows: rows.div_ceil(br),
        grid_cols: cols.div_ceil(bc),
    };
    let plain = |kernel, src| Input { src, kind: InputKind::Plain(kernel) };
    if let Some(f) = BlockFormat::from_name(name) {
        return Some(plain(Kernel::Block(f), quant(f)));
    }
    Some(match name {
        "f16" => plain(Kernel::F16, bytes(n * 2, 3).chunks_exact(2).flat_map(|c| [c[0], c[1] & 0x3B]).collect()),
        "f32" => plain(Kernel::F32, bytes(n * 4, 5).chunks_exact(4).flat_map(|c| [c[0], c[1], c[2], c[3] & 0x3F]).collect()),
        "bf16" => plain(Kernel::BF16, bytes(n * 2, 9)),
        "fp8-tensor" => fp8(Fp8Format::E4M3, block(rows, cols, ScaleKind::PerTensor)),
        "fp8-channel" => fp8(Fp8Format::E4M3, block(1, cols, ScaleKind::PerChannel)),
        "fp8-block" => fp8(Fp8Format::E4M3, block(128, 128, ScaleKind::Block)),
        "e5m2-block" => fp8(Fp8Format::E5M2, block(128, 128, ScaleKind::Block)),
        "nvfp4-st" => packed(GridElement::E2m1, 4, block(1, 16, ScaleKind::Group), false),
        "mxfp4-st" => packed(GridElement::E2m1, 4, block(1, 32, ScaleKind::Group), false),
        "int4-g128" => packed(GridElement::Int { bits: 4, round_f16: false }, 4, block(1, 128, ScaleKind::Group), false),
        "int4-g128-zp" => packed(GridElement::Int { bits: 4, round_f16: false }, 4, block(1, 128, ScaleKind::Group), true),
        "int8-channel-f16" => packed(GridElement::Int { bits: 8, round_f16: true }, 8, block(1, cols, ScaleKind::PerChannel), false),
        _ => return None,
    })
}

/// A kernel's memory traffic (source bytes read + BF16 written per second)
/// as a share of memcpy's (output bytes read + written), from the two
/// timings' ratio: both move their bytes in the time each took.
fn traffic_share(ratio_to_memcpy: f64, source_bytes: usize, out_bytes: u64) -> f64 {
    ratio_to_memcpy * (source_bytes as f64 + out_bytes as f64) / (2.0 * out_bytes as f64)
}

/// The baseline: one memcpy per thread over a contiguous share of the output.
fn memcpy_par(src: &[u16], dst: &mut [u16]) {
    let share = dst.len().div_ceil(rayon::current_num_threads()).max(1);
    dst.par_chunks_mut(share).zip(src.par_chunks(share)).for_each(|(d, s)| d.copy_from_slice(s));
}

/// One kernel's hot and fresh timings, each beside the memcpy measured
/// alternately with it.
struct Measured {
    name: &'static str,
    /// The kernel that ran: `isa`'s, or its fallback's (`runs_on`).
    path: Isa,
    source_bytes: usize,
    hot: (Timing, Timing),
    fresh: (Timing, Timing),
}

/// `--dtype f16`: one kernel's float16 path, its BF16 path and memcpy,
/// measured in turn in the same rounds (hot buffers).
struct F16Measured {
    name: &'static str,
    /// The float16 kernel that ran (`runs_on`).
    path: Isa,
    f16: Timing,
    bf16: Timing,
    copy: Timing,
}

/// The `--dtype f16` table (or JSON): float16 GB/s beside BF16's and
/// memcpy's, and the ratios.
fn report_f16(results: &[F16Measured], (rows, cols): (u64, u64), threads: usize, isa: Isa, reps: usize, json: bool) {
    let out_bytes = rows * cols * 2;
    if json {
        let entry = |t: &Timing| {
            let (med, fast, slow) = t.gbps(out_bytes);
            json!({"gbps_median": med, "gbps_fastest": fast, "gbps_slowest": slow, "seconds": t.runs})
        };
        let out = json!({
            "shape": [rows, cols], "threads": threads, "isa": isa.name(), "reps": reps, "output_bytes": out_bytes, "dtype": "f16",
            "kernels": results.iter().map(|r| json!({
                "kernel": r.name, "path": r.path.name(), "f16": entry(&r.f16), "bf16": entry(&r.bf16), "memcpy": entry(&r.copy),
                "f16_over_bf16": r.bf16.median() / r.f16.median(), "f16_over_memcpy": r.copy.median() / r.f16.median(),
            })).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&out).expect("JSON of owned values"));
        return;
    }
    println!(
        "{rows}x{cols} -> float16 and BF16 ({:.1} MB out each), {threads} thread(s), {} kernels, median of {reps} rounds after warm-up",
        out_bytes as f64 / 1e6,
        isa.name()
    );
    println!("each round runs the float16 path, the BF16 path and memcpy in turn (hot buffers); GB/s written (fastest..slowest)\n");
    let mut t = Table::new(
        &["KERNEL", "PATH", "F16 GB/s", "", "BF16 GB/s", "", "MEMCPY", "F16/BF16", "F16/MEMCPY"],
        &[false, false, true, false, true, false, true, true, true],
    );
    for r in results {
        let (f, f0, f1) = r.f16.gbps(out_bytes);
        let (b, b0, b1) = r.bf16.gbps(out_bytes);
        let (c, _, _) = r.copy.gbps(out_bytes);
        t.row(vec![
            r.name.to_string(),
            r.path.name().to_string(),
            format!("{f:.2}"),
            format!("({f0:.2}..{f1:.2})"),
            format!("{b:.2}"),
            format!("({b0:.2}..{b1:.2})"),
            format!("{c:.2}"),
            format!("{:.2}", f / b),
            format!("{:.2}", f / c),
        ]);
    }
    print!("{}", t.render());
}

pub fn run(args: &Args) -> CmdResult {
    let fail = |m: String| Err(weightstream::Error::InvalidArgument(m)).or_fail(args.json);
    let Some((rows, cols)) = args.shape.split_once('x').and_then(|(r, c)| Some((r.parse::<u64>().ok()?, c.parse::<u64>().ok()?))) else {
        return fail(format!("--shape {} is not ROWSxCOLS", args.shape));
    };
    let all = all_names();
    let mut names = Vec::new();
    for f in if args.formats.is_empty() { all.iter().map(|s| s.to_string()).collect() } else { args.formats.clone() } {
        match all.iter().find(|a| a.eq_ignore_ascii_case(&f)) {
            Some(n) => names.push(*n),
            None => return fail(format!("unknown --format {f}; choose from {}", all.join(", "))),
        }
    }
    // Block formats need whole blocks per row (256 elements for K-quants).
    let granule = names.iter().filter_map(|n| BlockFormat::from_name(n)).map(|f| f.layout().elems as u64).max().unwrap_or(1);
    if rows == 0 || cols % granule.max(32) != 0 {
        return fail(format!(
            "--shape needs rows > 0 and columns a multiple of {} (the largest block among the chosen formats)",
            granule.max(32)
        ));
    }
    // The bench holds about five buffers of the output's size: keep it to
    // what a machine has, and large enough that one run can be timed.
    match rows.checked_mul(cols) {
        Some(n) if (MIN_ELEMS..=MAX_ELEMS).contains(&n) => {}
        _ => {
            return fail(format!(
                "--shape {rows}x{cols}: the matrix must hold {MIN_ELEMS} to {MAX_ELEMS} elements (a run shorter than that cannot be timed; a larger one needs about 5 x 2 bytes per element of memory)"
            ))
        }
    }
    if args.reps == 0 {
        return fail("--reps must be at least 1".into());
    }
    if args.threads.is_some_and(|t| t == 0 || t > MAX_THREADS) {
        return fail(format!("--threads must be 1 to {MAX_THREADS}"));
    }
    let threads = args.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| weightstream::Error::Threads(e.to_string()))
        .or_fail(args.json)?;
    let isa = Isa::detect();
    let n = (rows * cols) as usize;
    let out_bytes = n as u64 * 2;
    let reps = args.reps;
    let baseline_src = vec![0x3F80u16; n];
    let mut hot = vec![0u16; n];
    let mut hot_copy = vec![0u16; n];

    let mut results = Vec::new();
    let mut f16_results = Vec::new();
    for name in names {
        let inp = input(name, rows, cols).expect("every name in all_names() has an input");
        let kernel = match &inp.kind {
            InputKind::Grid { element, layout, scales, zeros } => {
                let grid = |v| {
                    ScaleGrid::new(v, layout, rows, cols)
                        .map_err(|e| weightstream::Error::InvalidArgument(e.to_string()))
                        .or_fail(args.json)
                };
                let scales = grid(scales)?;
                match *element {
                    GridElement::Fp8(format) => Kernel::Fp8 { format, rows, cols, scales: Some(scales) },
                    GridElement::E2m1 => Kernel::E2m1 { rows, cols, scales },
                    GridElement::Int { bits, round_f16 } => {
                        let zeros = match zeros {
                            Some(z) => Some(grid(z)?),
                            None => None,
                        };
                        Kernel::Int { bits, rows, cols, scales, zeros, round_f16 }
                    }
                }
            }
            InputKind::Plain(k) => *k,
        };
        if args.dtype == OutDtype::F16 {
            let go = |out: OutDtype, d: &mut [u16]| dequantize_par(&kernel, out, 0, &inp.src, d, isa, DEFAULT_PIECE);
            let mut hot16 = vec![0u16; n];
            let mut err = None;
            let [f16, bf16, copy] = pool.install(|| {
                let mut f = || {
                    if let Err(e) = go(OutDtype::F16, black_box(&mut hot16)) {
                        err = Some(e);
                    }
                };
                let mut b = || {
                    go(OutDtype::BF16, black_box(&mut hot)).expect("the BF16 path takes what the F16 path takes");
                };
                let mut c = || memcpy_par(&baseline_src, black_box(&mut hot_copy));
                Timing::measure_interleaved(2, reps, [&mut f, &mut b, &mut c])
            });
            if let Some(e) = err {
                return fail(format!("{name}: {e}"));
            }
            f16_results.push(F16Measured { name, path: runs_on(&kernel, OutDtype::F16, isa), f16, bf16, copy });
            continue;
        }
        let mut err = None;
        let m = pool.install(|| {
            let mut go = |d: &mut [u16]| {
                if let Err(e) = dequantize_par(&kernel, OutDtype::BF16, 0, &inp.src, d, isa, DEFAULT_PIECE) {
                    err = Some(e);
                }
            };
            let hot = Timing::measure_pair(2, reps, || go(black_box(&mut hot)), || memcpy_par(&baseline_src, black_box(&mut hot_copy)));
            let fresh = Timing::measure_pair(
                1,
                reps,
                || {
                    let mut d = vec![0u16; n];
                    go(&mut d);
                    black_box(d);
                },
                || {
                    let mut d = vec![0u16; n];
                    memcpy_par(&baseline_src, &mut d);
                    black_box(d);
                },
            );
            Measured { name, path: runs_on(&kernel, OutDtype::BF16, isa), source_bytes: inp.src.len(), hot, fresh }
        });
        if let Some(e) = err {
            return fail(format!("{name}: {e}"));
        }
        results.push(m);
    }

    if args.dtype == OutDtype::F16 {
        report_f16(&f16_results, (rows, cols), threads, isa, reps, args.json);
        return Ok(());
    }
    if args.json {
        let entry = |(k, m): &(Timing, Timing), source_bytes: usize| {
            let (med, fast, slow) = k.gbps(out_bytes);
            let (mmed, _, _) = m.gbps(out_bytes);
            json!({"gbps_median": med, "gbps_fastest": fast, "gbps_slowest": slow, "memcpy_gbps_median": mmed,
                   "ratio_to_memcpy": med / mmed, "traffic_share_of_memcpy": traffic_share(med / mmed, source_bytes, out_bytes),
                   "seconds": k.runs, "memcpy_seconds": m.runs})
        };
        let out = json!({
            "shape": [rows, cols], "threads": threads, "isa": isa.name(), "reps": reps, "output_bytes": out_bytes,
            "kernels": results.iter().map(|r| json!({
                "kernel": r.name, "path": r.path.name(), "source_bytes": r.source_bytes,
                "hot": entry(&r.hot, r.source_bytes), "fresh": entry(&r.fresh, r.source_bytes),
            })).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&out).expect("JSON of owned values"));
        return Ok(());
    }
    println!(
        "{rows}x{cols} -> BF16 ({:.1} MB out), {threads} thread(s), {} kernels, median of {reps} runs after warm-up",
        out_bytes as f64 / 1e6,
        isa.name()
    );
    println!("GB/s of BF16 written (fastest..slowest); memcpy of the same size measured alternately with each kernel;");
    println!("TRAFFIC: bytes read + written per second as a share of memcpy's (the one-core limit of a kernel)\n");
    let mut t = Table::new(
        &["KERNEL", "PATH", "HOT GB/s", "", "MEMCPY", "RATIO", "TRAFFIC", "FRESH GB/s", "", "MEMCPY", "RATIO", "TRAFFIC"],
        &[false, false, true, false, true, true, true, true, false, true, true, true],
    );
    for r in &results {
        let mut row = vec![r.name.to_string(), r.path.name().to_string()];
        for (k, m) in [&r.hot, &r.fresh] {
            let (a, a0, a1) = k.gbps(out_bytes);
            let (b, _, _) = m.gbps(out_bytes);
            let share = traffic_share(a / b, r.source_bytes, out_bytes);
            row.extend([
                format!("{a:.2}"),
                format!("({a0:.2}..{a1:.2})"),
                format!("{b:.2}"),
                format!("{:.2}", a / b),
                format!("{share:.2}"),
            ]);
        }
        t.row(row);
    }
    print!("{}", t.render());
    Ok(())
}
