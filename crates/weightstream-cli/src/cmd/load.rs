//! `weightstream load`: a checkpoint to BF16 in memory, timed.

use std::path::PathBuf;

use serde_json::json;
use weightstream::dequant::Isa;
use weightstream::{Control, Device, DeviceChoice, LoadStats, Loader, Plan, PlanOptions, Staging};

use crate::human;
use crate::progress::Bar;
use crate::report::{CmdResult, Failure, OrFail};

#[derive(clap::Args)]
#[command(
    about = "Load a checkpoint as BF16 (GPU if there is one, else CPU) and report the speed",
    long_about = "Reads the checkpoint's quantized bytes, dequantizes every tensor to BF16 on the chosen \
device, and reports bytes read, time, and throughput both of file bytes and of BF16 produced; \
from object storage, also the bytes and ranged GETs fetched from the store (`fetched` in --json). \
--verify recomputes every tensor with the portable scalar CPU kernels and compares the bits.",
    after_help = "Examples:\n  \
weightstream load model-q4_0.gguf                   GPU if present, else CPU\n  \
weightstream load ./DeepSeek-FP8 --device cuda:1 --json\n  \
weightstream load model.gguf --device cpu --threads 2 --verify\n  \
weightstream load model.gguf --source direct --readers 8    cold file: O_DIRECT, 8 reads in flight\n  \
weightstream load s3://models/qwen3-q4_k_m.gguf --device cpu   ranged GETs, AWS credentials from the environment\n  \
weightstream load s3://models/Qwen3-8B-FP8/ --readers 8        a prefix of shards; 8 reads of 2 MiB parts in flight"
)]
pub struct Args {
    /// A .gguf or .safetensors file, a checkpoint directory, or a URL: s3://bucket/key, s3://bucket/prefix/ (a directory of shards), the same with gs:// or az:// (abfs://, abfss://, https://ACCOUNT.blob.core.windows.net/container/...), http(s)://host/file
    pub path: PathBuf,
    /// auto (GPU 0 if there is one, else CPU), cpu, cuda or cuda:N
    #[arg(long, default_value = "auto")]
    pub device: String,
    /// Recompute on the CPU with the scalar kernels and compare bits
    #[arg(long)]
    pub verify: bool,
    /// Hand each tensor back as it completes instead of keeping them all (bounded memory)
    #[arg(long)]
    pub discard: bool,
    /// Read the tensor bytes through the source as a load does, but do not dequantize (CPU): the storage path alone, for benchmarks
    #[arg(long, conflicts_with = "verify")]
    pub read_only: bool,
    /// Leave out tensors that cannot become BF16 instead of failing
    #[arg(long)]
    pub skip_unsupported: bool,
    /// Load a GGUF file whose metadata declares a transform of the weights
    /// (a Hadamard rotation, permutation, codebook) weightstream does not
    /// apply, ignoring it: the weights come out as stored, untransformed
    #[arg(long)]
    pub ignore_transform: bool,
    /// CPU threads (default: every core)
    #[arg(long)]
    pub threads: Option<usize>,
    #[arg(long, default_value = "auto", value_parser = crate::source_arg::parse, help = crate::source_arg::HELP)]
    pub source: weightstream::SourceKind,
    /// Threads reading the file ahead (CPU: for the read and direct sources; GPU: into the staging ring) [default: 4]
    #[arg(long)]
    pub readers: Option<usize>,
    /// Buffers read ahead [default: CPU twice the readers, GPU 8]
    #[arg(long)]
    pub staging_slots: Option<usize>,
    /// MiB per read and per buffer [default: CPU 4 (16 from object storage), GPU 4]
    #[arg(long)]
    pub staging_mib: Option<usize>,
    /// GPU: pin the staging ring write-combined (host writes, DMA reads; measured by the GPU round)
    #[arg(long)]
    pub write_combined: bool,
    #[arg(long, default_value = "bf16", value_parser = crate::dtype_arg::parse, help = crate::dtype_arg::HELP)]
    pub dtype: crate::dtype_arg::OutDtype,
    /// Print a JSON report
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub cache: crate::cache_arg::CacheArg,
}

pub fn run(args: &Args) -> CmdResult {
    let choice: DeviceChoice = args.device.parse().or_fail(args.json)?;
    let device = choice.resolve().or_fail(args.json)?;
    if args.read_only && device != Device::Cpu {
        return Err(Failure {
            error: weightstream::Error::InvalidArgument("--read-only measures the CPU read path: add --device cpu".into()),
            json: args.json,
        });
    }
    if args.write_combined && device == Device::Cpu {
        return Err(Failure {
            error: weightstream::Error::InvalidArgument("--write-combined pins the GPU's staging ring: it needs --device cuda".into()),
            json: args.json,
        });
    }
    crate::interrupt::install();
    let staging = Staging {
        threads: args.threads,
        readers: args.readers,
        slots: args.staging_slots,
        slot_bytes: args.staging_mib.map(|m| m << 20),
        isa: None,
        write_combined: args.write_combined.then_some(true),
    };
    let opts = weightstream::format::OpenOptions { ignore_transforms: args.ignore_transform };
    // Ctrl-C/SIGTERM stops the open too (a listing or HEAD that never ends).
    let cancel = Some(crate::interrupt::shared());
    let cat = weightstream::open_cancellable(&args.path, args.source, opts, args.cache.cache.as_deref(), cancel).or_fail(args.json)?;
    let loader = Loader::new(std::sync::Arc::new(cat), staging);
    let cat = loader.catalog().as_ref();
    let plan = loader.plan(&PlanOptions { names: None, skip_unsupported: args.skip_unsupported, out: args.dtype }).or_fail(args.json)?;
    let bar = Bar::new("load", args.json);
    let update = |p| bar.update(p);
    let control = Control { progress: Some(&update), cancel: Some(crate::interrupt::flag()) };
    let keep = !args.discard || args.verify;
    let (stats, produced, where_) = match device {
        Device::Cpu => {
            let cpu = loader.cpu().or_fail(args.json)?;
            let mut kept = Vec::new();
            let stats = if args.read_only {
                cpu.read_only(cat, &plan, control)
            } else {
                cpu.stream(cat, &plan, control, |t| {
                    if keep {
                        kept.push((t.name, t.data));
                    }
                    Ok(())
                })
            };
            bar.finish();
            let w = Where::Cpu { isa: cpu.isa().name(), threads: cpu.threads(), readers: cpu.readers() };
            (stats.or_fail(args.json)?, kept, w)
        }
        Device::Cuda(n) => {
            let gpu = loader.gpu(n).or_fail(args.json)?;
            let mut kept = Vec::new();
            let stats = gpu.stream(cat, &plan, control, |t| {
                if keep {
                    kept.push(t);
                }
                Ok(())
            });
            bar.finish();
            let stats = stats.or_fail(args.json)?;
            // Copied back only to verify (after the timed load).
            let host = if args.verify {
                kept.iter().map(|t| Ok((t.name.clone(), t.to_host()?))).collect::<weightstream::Result<Vec<_>>>().or_fail(args.json)?
            } else {
                vec![]
            };
            let w = Where::Cuda {
                ordinal: n,
                name: gpu.info().name.clone(),
                slots: gpu.slots(),
                slot_bytes: gpu.slot_bytes(),
                readers: gpu.readers(),
                notes: gpu.notes().into_iter().map(|n| n.text).collect(),
            };
            (stats, host, w)
        }
    };
    let verified = if args.verify { Some(verify(cat, &plan, &produced).or_fail(args.json)?) } else { None };
    report(args, cat, &stats, &where_, &plan, verified.as_ref());
    match verified {
        Some(v) if !v.mismatches.is_empty() => {
            Err(Failure { error: weightstream::Error::VerifyMismatch { tensors: v.mismatches.len() }, json: args.json })
        }
        _ => Ok(()),
    }
}

/// Where the load ran, for the report.
enum Where {
    Cpu { isa: &'static str, threads: usize, readers: usize },
    Cuda { ordinal: usize, name: String, slots: usize, slot_bytes: usize, readers: usize, notes: Vec<String> },
}

struct Verification {
    tensors: usize,
    /// (tensor, first differing element, got, expected)
    mismatches: Vec<(String, usize, u16, u16)>,
}

/// Recompute with the scalar kernels on one thread: an independent path.
/// `got` holds the tensors in the order they completed (an empty tensor
/// completes before any other on the GPU), so they are matched by name; a
/// tensor never produced counts as differing at element 0.
fn verify(cat: &weightstream::Catalog, plan: &Plan, got: &[(String, Vec<u16>)]) -> weightstream::Result<Verification> {
    let reference = weightstream::CpuExecutor::new(&Staging { threads: Some(1), isa: Some(Isa::Scalar), ..Default::default() })?;
    let by_name: std::collections::HashMap<&str, &[u16]> = got.iter().map(|(n, d)| (n.as_str(), d.as_slice())).collect();
    let mut mismatches = vec![];
    for job in &plan.jobs {
        let want = reference.run_job(cat, job, None)?;
        let data = by_name.get(job.name.as_str()).copied().unwrap_or(&[]);
        if let Some(i) = (0..want.data.len().max(data.len())).find(|&i| data.get(i) != want.data.get(i)) {
            mismatches.push((job.name.clone(), i, data.get(i).copied().unwrap_or(0), want.data.get(i).copied().unwrap_or(0)));
        }
    }
    Ok(Verification { tensors: plan.jobs.len(), mismatches })
}

fn report(args: &Args, cat: &weightstream::Catalog, s: &LoadStats, where_: &Where, plan: &Plan, v: Option<&Verification>) {
    let (device, detail) = match where_ {
        Where::Cpu { isa, threads, readers } => ("cpu".to_string(), json!({"isa": isa, "threads": threads, "readers": readers})),
        Where::Cuda { ordinal, name, slots, slot_bytes, readers, notes } => (
            format!("cuda:{ordinal}"),
            json!({"gpu": name, "staging_slots": slots, "staging_bytes": slot_bytes, "readers": readers, "storage_notes": notes}),
        ),
    };
    if args.json {
        let out = json!({
            "path": weightstream::source_name(&args.path), "device": device, "source": args.source.name(), "sources": crate::source_arg::json(cat), "detail": detail,
            "read_only": args.read_only, "dtype": args.dtype.name(),
            "tensors": s.tensors, "src_bytes": s.src_bytes, "out_bytes": if args.read_only { 0 } else { s.out_bytes }, "seconds": s.seconds,
            "src_gbps": s.src_gbps(), "out_gbps": s.out_gbps(), "phases": phases_json(&s.phases),
            "fetched": cat.fetched().map(|f| json!({"bytes": f.bytes, "requests": f.requests})),
            "skipped": plan.skipped.iter().map(|k| json!({"name": k.name, "reason": k.reason})).collect::<Vec<_>>(),
            "verify": v.map(|v| json!({"tensors": v.tensors, "identical": v.mismatches.is_empty(),
                "mismatches": v.mismatches.iter().map(|(n, i, g, w)| json!({"tensor": n, "element": i, "got": g, "expected": w})).collect::<Vec<_>>()})),
        });
        println!("{}", serde_json::to_string_pretty(&out).expect("JSON of owned values"));
        return;
    }
    let how = match where_ {
        Where::Cpu { isa, threads, .. } => format!("{isa} kernels, {threads} threads"),
        Where::Cuda { name, slots, slot_bytes, readers, .. } => {
            format!("{name}, {slots} x {} staging, {readers} readers", human::bytes(*slot_bytes as u64))
        }
    };
    let verb = if args.read_only { "read" } else { "loaded" };
    println!("{verb} {} tensors from {} on {device} ({how}) in {:.3} s", s.tensors, weightstream::source_name(&args.path), s.seconds);
    println!("  file bytes read  {:>10}  {:>7.2} GB/s", human::bytes(s.src_bytes), s.src_gbps());
    if args.read_only {
        println!("  (read only: nothing dequantized)");
    } else {
        println!("  {:<4} produced    {:>10}  {:>7.2} GB/s", args.dtype.name(), human::bytes(s.out_bytes), s.out_gbps());
    }
    if let Some(line) = phases_line(&s.phases) {
        println!("  {line}");
    }
    if let Some(f) = cat.fetched() {
        println!("  fetched from the store {} in {} ranged GETs (headers included)", human::bytes(f.bytes), f.requests);
    }
    for line in crate::source_arg::lines(cat) {
        println!("  {line}");
    }
    if let Where::Cuda { notes, .. } = where_ {
        for n in notes {
            println!("  {n}");
        }
    }
    for k in &plan.skipped {
        println!("  skipped {}: {}", k.name, k.reason);
    }
    if let Some(v) = v {
        if v.mismatches.is_empty() {
            println!("verify: all {} tensors bit-identical to the scalar CPU reference", v.tensors);
        } else {
            for (n, i, g, w) in &v.mismatches {
                println!("verify: {n}: element {i} is {g:#06x}, expected {w:#06x}");
            }
        }
    }
}

/// Where the load's seconds went (`weightstream::Phases`), for `--json`.
fn phases_json(p: &weightstream::Phases) -> serde_json::Value {
    json!({"alloc": p.alloc, "ring": p.ring, "first_byte": p.first_byte, "pipeline": p.pipeline, "drain": p.drain,
        "readers_busy": p.readers_busy})
}

/// The phases a load had, in milliseconds, on one line; none for a load
/// without any (a mapped CPU load is all pipeline).
fn phases_line(p: &weightstream::Phases) -> Option<String> {
    if p.readers_busy.is_empty() && p.alloc == 0.0 && p.drain == 0.0 {
        return None;
    }
    let ms = |s: f64| format!("{:.1}", s * 1e3);
    let mut parts = vec![];
    for (name, v) in [("alloc", p.alloc), ("ring", p.ring), ("first byte", p.first_byte), ("pipeline", p.pipeline), ("drain", p.drain)] {
        if v > 0.0 {
            parts.push(format!("{name} {}", ms(v)));
        }
    }
    if !p.readers_busy.is_empty() {
        let busy: Vec<String> = p.readers_busy.iter().map(|&b| ms(b)).collect();
        parts.push(format!("readers busy {}", busy.join("/")));
    }
    Some(format!("phases (ms): {}", parts.join(", ")))
}
