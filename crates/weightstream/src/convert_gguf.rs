//! `convert --to gguf`: a Hugging Face checkpoint directory (any format
//! weightstream reads: BF16, FP8, NVFP4, INT4 safetensors) to the BF16 GGUF
//! that convert_hf_to_gguf.py `--outtype bf16` writes from it: the metadata
//! and tensor map of weightstream-hf2gguf, the tensors dequantized by the
//! CPU kernels. One tensor in memory at a time; written under a temporary
//! name and renamed into place only when complete.

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use weightstream_format::gguf::writer::{data_offsets, header, TensorDecl};
use weightstream_format::safetensors::StDtype;
use weightstream_format::{Catalog, Dtype, Format};
use weightstream_hf2gguf::{HfInput, MappedTensor, Metadata, TensorIn, TensorType, FILES};

use crate::access::{bytes, JobKernel};
use crate::control::{Control, Tracker};
use crate::convert_output::{write_output, ConvertOptions, ConvertReport};
use crate::cpu::CpuExecutor;
use crate::error::{Error, Result};
use crate::plan::{Job, Plan, PlanOptions};
use crate::tensor::LoadStats;

/// The most a checkpoint's side file (tokenizer.json, README.md, ...) may
/// hold: far above any real tokenizer, and what the converter reads whole.
const MAX_SIDE_FILE: u64 = 1 << 30;

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io { path: path.to_path_buf(), source }
}

/// The side files [`FILES`] of the directory `root`, read (None: absent).
fn side_files(root: &Path) -> Result<Vec<Option<Vec<u8>>>> {
    FILES
        .iter()
        .map(|f| {
            let p = root.join(f);
            match fs::metadata(&p) {
                Err(_) => Ok(None),
                Ok(m) if m.len() > MAX_SIDE_FILE => {
                    Err(Error::InvalidArgument(format!("{}: {} bytes, more than a checkpoint's side file holds", p.display(), m.len())))
                }
                Ok(_) => fs::read(&p).map(Some).map_err(io_err(&p)),
            }
        })
        .collect()
}

fn check_hf_dir(cat: &Catalog) -> Result<()> {
    if cat.format != Format::Safetensors || !cat.root.is_dir() {
        return Err(Error::InvalidArgument(format!(
            "{}: llama.cpp's metadata is made from a Hugging Face checkpoint directory (config.json, tokenizer, safetensors)",
            cat.root.display()
        )));
    }
    Ok(())
}

/// llama.cpp's metadata and tensor map of `cat` (a Hugging Face checkpoint
/// directory) over the tensor list `tensors` (what the map's sources
/// index): its side files read, weightstream-hf2gguf's checks applied.
pub fn hf_metadata(cat: &Catalog, tensors: &[TensorIn]) -> Result<Metadata> {
    check_hf_dir(cat)?;
    let files = side_files(&cat.root)?;
    let f = |name: &str| files[FILES.iter().position(|x| *x == name).expect("one of FILES")].as_deref();
    let config = f("config.json").ok_or_else(|| Error::Io {
        path: cat.root.join("config.json"),
        source: std::io::Error::new(std::io::ErrorKind::NotFound, "a Hugging Face checkpoint has a config.json"),
    })?;
    // The directory's name as given (convert's `dir_model.name`), or its
    // real name for a path such as `.` that has none.
    let name_of = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
    let dir_name = name_of(&cat.root).or_else(|| cat.root.canonicalize().ok().as_deref().and_then(name_of)).unwrap_or_default();
    let input = HfInput {
        dir_name: &dir_name,
        config,
        tokenizer_json: f("tokenizer.json"),
        tokenizer_config: f("tokenizer_config.json"),
        tokenizer_model: f("tokenizer.model"),
        added_tokens: f("added_tokens.json"),
        chat_template_jinja: f("chat_template.jinja"),
        readme: f("README.md"),
        has_modules_json: cat.root.join("modules.json").exists(),
        tensors,
    };
    weightstream_hf2gguf::build(&input).map_err(|source| Error::HfMetadata { dir: cat.root.clone(), source })
}

/// The metadata and tensor map of `cat`, with the plan whose jobs the
/// map's sources index.
pub fn gguf_metadata(cat: &Catalog) -> Result<(Metadata, Plan)> {
    check_hf_dir(cat)?;
    let plan = Plan::new(cat, &PlanOptions { names: None, skip_unsupported: false })?;
    let tensors: Vec<TensorIn> = plan.jobs.iter().map(|j| TensorIn { name: j.name.clone(), shape: j.shape.clone() }).collect();
    Ok((hf_metadata(cat, &tensors)?, plan))
}

fn decl(t: &MappedTensor) -> TensorDecl {
    let (ggml_type, width) = match t.ty {
        TensorType::F32 => (0, 4),   // GGML_TYPE_F32
        TensorType::BF16 => (30, 2), // GGML_TYPE_BF16
    };
    TensorDecl { name: t.name.clone(), shape: t.shape.clone(), ggml_type, nbytes: t.shape.iter().product::<u64>() * width }
}

/// Convert the checkpoint directory `cat` to a BF16 GGUF at `output`.
pub fn convert_to_gguf(cat: &Catalog, output: &Path, opts: &ConvertOptions, control: Control) -> Result<ConvertReport> {
    let t0 = Instant::now();
    let (meta, plan) = gguf_metadata(cat)?;
    let decls: Vec<TensorDecl> = meta.tensors.iter().map(decl).collect();
    let head = header(&meta.kv, &decls).map_err(|why| Error::InvalidArgument(format!("{}: {why}", output.display())))?;
    let out_bytes = head.len() as u64 + data_offsets(&decls).last().copied().unwrap_or(0) + decls.last().map_or(0, |d| d.nbytes);
    let src_bytes: u64 = meta.tensors.iter().flat_map(|t| &t.sources).map(|&i| plan.jobs[i].src_bytes()).sum();
    write_output(output, opts.force, |tmp| {
        let cpu = CpuExecutor::new(&opts.staging)?;
        let tracker = Tracker::new(control, meta.tensors.len() as u64, src_bytes);
        let file = File::create(tmp).map_err(io_err(tmp))?;
        let mut w = BufWriter::with_capacity(4 << 20, file);
        w.write_all(&head).map_err(io_err(tmp))?;
        let mut at = 0u64;
        for (t, d) in meta.tensors.iter().zip(&decls) {
            let data = tensor_bytes(cat, &cpu, &plan, t, &tracker)?;
            debug_assert_eq!(data.len() as u64, d.nbytes);
            w.write_all(&data).map_err(io_err(tmp))?;
            at += d.nbytes;
            let pad = at.next_multiple_of(32) - at;
            w.write_all(&vec![0u8; pad as usize]).map_err(io_err(tmp))?;
            at += pad;
            tracker.tensor_done();
        }
        w.into_inner().map_err(|e| Error::Io { path: tmp.to_path_buf(), source: e.into_error() })?.sync_all().map_err(io_err(tmp))
    })?;
    Ok(ConvertReport {
        output: output.to_path_buf(),
        files: vec![PathBuf::from(output)],
        skipped: vec![],
        stats: LoadStats { tensors: meta.tensors.len() as u64, src_bytes, out_bytes, seconds: t0.elapsed().as_secs_f64() },
    })
}

/// One GGUF tensor's data: its sources (one, or one per expert, stacked)
/// as BF16, or as F32 for the norms and the router, with llama's q/k rows
/// in convert's order.
fn tensor_bytes(cat: &Catalog, cpu: &CpuExecutor, plan: &Plan, t: &MappedTensor, tracker: &Tracker) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    for &s in &t.sources {
        let job = &plan.jobs[s];
        let values = match t.ty {
            TensorType::BF16 => bf16(cat, cpu, job, tracker)?.iter().flat_map(|v| v.to_le_bytes()).collect(),
            TensorType::F32 => f32_bytes(cat, cpu, job, tracker)?,
        };
        out.extend(permuted(values, job, t.permute_heads, if t.ty == TensorType::F32 { 4 } else { 2 }));
    }
    Ok(out)
}

fn bf16(cat: &Catalog, cpu: &CpuExecutor, job: &Job, tracker: &Tracker) -> Result<Vec<u16>> {
    let mut dst = vec![0u16; job.n_elems as usize];
    cpu.fill(cat, &JobKernel::new(cat, job)?, &mut dst, Some(tracker))?;
    Ok(dst)
}

/// F32 values as convert writes them: an F32, F16 or BF16 source widened
/// exactly (its stored values), anything else from its BF16.
fn f32_bytes(cat: &Catalog, cpu: &CpuExecutor, job: &Job, tracker: &Tracker) -> Result<Vec<u8>> {
    let info = &cat.tensors[job.tensor];
    let stored = matches!(info.dtype, Dtype::St(StDtype::F32 | StDtype::F16 | StDtype::BF16)) && info.packed.is_none();
    if !stored {
        return Ok(bf16(cat, cpu, job, tracker)?.iter().flat_map(|&b| ((b as u32) << 16).to_le_bytes()).collect());
    }
    let raw = bytes(cat, info.file, info.offset..info.offset + info.nbytes, &info.name)?;
    tracker.add_bytes(info.nbytes);
    let widen = |b: &[u8]| -> u32 {
        match info.dtype {
            Dtype::St(StDtype::F32) => u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            Dtype::St(StDtype::F16) => weightstream_dequant::numerics::f16_to_f32(u16::from_le_bytes([b[0], b[1]])).to_bits(),
            _ => (u16::from_le_bytes([b[0], b[1]]) as u32) << 16,
        }
    };
    let width = if info.dtype == Dtype::St(StDtype::F32) { 4 } else { 2 };
    Ok(raw.chunks_exact(width).flat_map(|b| widen(b).to_le_bytes()).collect())
}

/// llama's q/k rows in convert's order (LlamaModel.permute): within each of
/// `heads` heads of d rows, output row `2i + j` is input row `j * d / 2 + i`.
fn permuted(values: Vec<u8>, job: &Job, heads: u32, width: usize) -> Vec<u8> {
    if heads == 0 {
        return values;
    }
    let rows = job.shape.first().copied().unwrap_or(0) as usize;
    let row_bytes = values.len() / rows.max(1);
    let d = rows / heads as usize;
    debug_assert!(row_bytes % width == 0 && d % 2 == 0);
    let mut out = Vec::with_capacity(values.len());
    for h in 0..heads as usize {
        for i in 0..d / 2 {
            for j in 0..2 {
                let r = h * d + j * d / 2 + i;
                out.extend_from_slice(&values[r * row_bytes..(r + 1) * row_bytes]);
            }
        }
    }
    out
}
