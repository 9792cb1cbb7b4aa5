//! `convert`: any supported checkpoint to a BF16 (or float16) safetensors checkpoint.
//!
//! Streams with bounded memory (two write buffers: one dequantized while the
//! other is written, crate::overlapped_write), shards above
//! a size limit, and writes under a temporary name that is renamed into place
//! only when everything succeeded: a failed or cancelled convert leaves no
//! half-written output under the final name.

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::{json, Map, Value as Json};
use weightstream_format::{Catalog, Format, Metadata};

use weightstream_dequant::OutDtype;

use crate::access::JobKernel;
use crate::control::{Control, Tracker};
use crate::convert_output::{write_output, ConvertOptions, ConvertReport};
use crate::cpu::{alloc_output, CpuExecutor};
use crate::error::{Error, Result};
use crate::overlapped_write::{overlapped, Failure};
use crate::plan::{Job, Plan, PlanOptions};
use crate::tensor::LoadStats;
use weightstream_format::safetensors::writer::{header, Entry};

/// Hugging Face's default shard size.
pub const DEFAULT_MAX_SHARD: u64 = 5_000_000_000;
/// BF16 elements per write buffer (two of them): 2 MiB. Small enough that
/// dequantizing and writing overlap well even for one tensor; measured in
/// docs/PERFORMANCE.md (convert against `dd conv=fsync`).
const WRITE_GROUP_ELEMS: u64 = 1 << 20;
const INDEX_FILE: &str = "model.safetensors.index.json";

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io { path: path.to_path_buf(), source }
}

/// Shards: consecutive jobs, each shard at most `max` bytes unless one
/// tensor alone is larger.
fn shard(jobs: &[Job], max: u64) -> Vec<Vec<&Job>> {
    let mut shards: Vec<Vec<&Job>> = vec![];
    let mut size = 0;
    for j in jobs {
        if shards.is_empty() || (size + j.out_bytes() > max && size > 0) {
            shards.push(vec![]);
            size = 0;
        }
        shards.last_mut().expect("pushed above").push(j);
        size += j.out_bytes();
    }
    if shards.is_empty() {
        shards.push(vec![]);
    }
    shards
}

fn out_metadata(cat: &Catalog) -> Map<String, Json> {
    let mut m = Map::new();
    if let Metadata::Safetensors(src) = &cat.metadata {
        for (k, v) in src {
            m.insert(k.clone(), json!(v));
        }
    }
    m.insert("format".into(), json!("pt"));
    let src_name = cat.root.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    m.insert("weightstream.source".into(), json!(src_name));
    m.insert("weightstream.version".into(), json!(env!("CARGO_PKG_VERSION")));
    m
}

/// config.json for the output checkpoint: no quantization, weights of the
/// output dtype (BF16 or float16).
fn out_config(config: &Json, out: OutDtype) -> Json {
    let mut c = config.clone();
    if let Some(o) = c.as_object_mut() {
        // compression_config: compressed-tensors' name before 0.7.
        o.remove("quantization_config");
        o.remove("compression_config");
        o.insert("torch_dtype".into(), json!(if out == OutDtype::F16 { "float16" } else { "bfloat16" }));
    }
    c
}

/// Files that declare a quantization beside config.json: vLLM reads
/// ModelOpt's `hf_quant_config.json` when config.json has no
/// `quantization_config` and would serve the BF16 output as NVFP4 (issue
/// 27); `quantize_config.json` is AutoGPTQ's. Never copied to a BF16 output.
const QUANT_CONFIG_FILES: &[&str] = &["hf_quant_config.json", "quantize_config.json"];

/// Files beside the weights that a runtime needs (tokenizer, generation
/// config): everything in the source directory that is not a weight file.
fn side_files(cat: &Catalog) -> Vec<PathBuf> {
    if cat.format != Format::Safetensors || !cat.root.is_dir() {
        return vec![];
    }
    let Ok(rd) = fs::read_dir(&cat.root) else { return vec![] };
    let mut v: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .filter(|p| {
            let n = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            !(n.starts_with('.')
                || n.ends_with(".safetensors")
                || n == INDEX_FILE
                || n == "config.json"
                || QUANT_CONFIG_FILES.contains(&n.as_str())
                || [".gguf", ".bin", ".pt", ".pth", ".partial"].iter().any(|s| n.ends_with(s)))
        })
        .collect();
    v.sort();
    v
}

/// Convert the checkpoint at `input` (opened with `opts.source`).
pub fn convert(input: &Path, output: &Path, opts: &ConvertOptions, control: Control) -> Result<ConvertReport> {
    let cat = crate::open_cancellable(input, opts.source, opts.open, opts.cache.as_deref(), opts.cancel.clone())?;
    convert_catalog(&cat, output, opts, control)
}

/// Convert an opened checkpoint (any byte source).
/// The one name a safetensors header cannot hold as a tensor.
pub const RESERVED_NAME: &str = "__metadata__";

pub fn convert_catalog(cat: &Catalog, output: &Path, opts: &ConvertOptions, control: Control) -> Result<ConvertReport> {
    if opts.to_gguf || output.extension().is_some_and(|e| e == "gguf") {
        return crate::convert_gguf::convert_to_gguf(cat, output, opts, control);
    }
    let t0 = Instant::now();
    let plan = Plan::new(cat, &PlanOptions { names: None, skip_unsupported: opts.skip_unsupported, out: opts.out })?;
    // safetensors reserves the header key `__metadata__`: a tensor of that
    // name (possible in a GGUF) would make an output no reader can open.
    if let Some(job) = plan.jobs.iter().find(|j| j.name == RESERVED_NAME) {
        let t = &cat.tensors[job.tensor];
        return Err(Error::ReservedName {
            file: cat.files[t.file].path.clone(),
            tensor: job.name.clone(),
            offset: t.offset,
            reason: format!("the safetensors format reserves the name '{RESERVED_NAME}' for its metadata; nothing was written"),
        });
    }
    let single_file = output.extension().is_some_and(|e| e == "safetensors");
    if single_file && opts.max_shard_bytes.is_some_and(|m| plan.out_bytes() > m) {
        return Err(Error::OutputTooLarge { path: output.to_path_buf(), bytes: plan.out_bytes(), max: opts.max_shard_bytes.unwrap_or(0) });
    }
    let files = write_output(output, opts.force, |tmp| write_all(cat, &plan, tmp, single_file, opts, control))?;
    let files = files
        .into_iter()
        .map(|f| if single_file { output.to_path_buf() } else { output.join(f.file_name().unwrap_or_default()) })
        .collect();
    Ok(ConvertReport {
        output: output.to_path_buf(),
        files,
        skipped: plan.skipped.clone(),
        stats: LoadStats {
            tensors: plan.jobs.len() as u64,
            src_bytes: plan.read_bytes(),
            out_bytes: plan.out_bytes(),
            seconds: t0.elapsed().as_secs_f64(),
            ..Default::default()
        },
    })
}

/// Write everything under `tmp` (a file, or a directory for sharded
/// output); returns the weight files written.
fn write_all(cat: &Catalog, plan: &Plan, tmp: &Path, single_file: bool, opts: &ConvertOptions, control: Control) -> Result<Vec<PathBuf>> {
    let cpu = CpuExecutor::new(&opts.staging)?;
    let tracker = Tracker::new(control, plan.jobs.len() as u64, plan.src_bytes());
    let metadata = out_metadata(cat);
    if single_file {
        write_shard(cat, &cpu, &plan.jobs.iter().collect::<Vec<_>>(), tmp, &metadata, &tracker)?;
        return Ok(vec![tmp.to_path_buf()]);
    }
    fs::create_dir_all(tmp).map_err(io_err(tmp))?;
    let shards = shard(&plan.jobs, opts.max_shard_bytes.unwrap_or(DEFAULT_MAX_SHARD));
    let n = shards.len();
    let mut files = vec![];
    let mut weight_map = Map::new();
    for (i, jobs) in shards.iter().enumerate() {
        let name = if n == 1 { "model.safetensors".to_string() } else { format!("model-{:05}-of-{n:05}.safetensors", i + 1) };
        let path = tmp.join(&name);
        write_shard(cat, &cpu, jobs, &path, &metadata, &tracker)?;
        for j in jobs {
            weight_map.insert(j.name.clone(), json!(name));
        }
        files.push(path);
    }
    if n > 1 {
        let index = json!({"metadata": {"total_size": plan.out_bytes()}, "weight_map": weight_map});
        write_json(&tmp.join(INDEX_FILE), &index)?;
    }
    if let Some(config) = &cat.config {
        write_json(&tmp.join("config.json"), &out_config(config, plan.out()))?;
    }
    for f in side_files(cat) {
        let dst = tmp.join(f.file_name().unwrap_or_default());
        fs::copy(&f, &dst).map_err(io_err(&f))?;
    }
    Ok(files)
}

fn write_json(path: &Path, value: &Json) -> Result<()> {
    let text = serde_json::to_string_pretty(value).expect("JSON of owned values");
    fs::write(path, text).map_err(io_err(path))
}

/// Start writing the file's dirty pages to disk without waiting for them,
/// so that the final sync overlaps with dequantizing instead of following
/// it (Linux `sync_file_range`; elsewhere nothing). Only a hint: a write
/// error still surfaces at the final `sync_all`, so its own result is
/// ignored (some filesystems refuse the call).
fn start_writeback(f: &File) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: a valid open descriptor for the call's duration; offset 0
        // and length 0 mean the whole file; no memory is passed.
        let _ = unsafe { libc::sync_file_range(f.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE) };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = f;
}

fn write_shard(
    cat: &Catalog,
    cpu: &CpuExecutor,
    jobs: &[&Job],
    path: &Path,
    metadata: &Map<String, Json>,
    tracker: &Tracker,
) -> Result<()> {
    let entries: Vec<Entry> =
        jobs.iter().map(|j| Entry { name: &j.name, dtype: j.out.name(), shape: &j.shape, nbytes: j.out_bytes() }).collect();
    let file = File::create(path).map_err(io_err(path))?;
    let mut w = BufWriter::with_capacity(4 << 20, file);
    w.write_all(&header(&entries, metadata)).map_err(io_err(path))?;
    let group = WRITE_GROUP_ELEMS.min(jobs.iter().map(|j| j.n_elems).max().unwrap_or(0)).max(1);
    let bufs = [alloc_output("(convert write buffer)", group)?, alloc_output("(convert write buffer)", group)?];
    let kernels = jobs.iter().map(|j| JobKernel::new(cat, j)).collect::<Result<Vec<_>>>()?;
    // Pieces of at most `group` values, tensor by tensor: one is dequantized
    // while the writer thread writes the one before.
    // An empty tensor is one empty piece, so that it too is counted done.
    let pieces = jobs.iter().enumerate().flat_map(|(i, j)| {
        let starts = (0..j.n_elems.max(1)).step_by(group as usize);
        starts.map(move |at| (i, j.first + at, group.min(j.n_elems - at.min(j.n_elems)), at + group >= j.n_elems))
    });
    let (w, _) = overlapped(
        w,
        pieces,
        |p| p.2 as usize,
        bufs,
        |&(i, first, _, last), out| {
            cpu.fill_elems(cat, &kernels[i], first, out, Some(tracker))?;
            if last {
                tracker.tensor_done();
            }
            Ok(())
        },
        |w| {
            w.flush()?;
            start_writeback(w.get_ref());
            Ok(())
        },
    )
    .map_err(|f| match f {
        Failure::Fill(e) => e,
        Failure::Write(source) => Error::Io { path: path.to_path_buf(), source },
    })?;
    w.into_inner().map_err(|e| Error::Io { path: path.to_path_buf(), source: e.into_error() })?.sync_all().map_err(io_err(path))
}
