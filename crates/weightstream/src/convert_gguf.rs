//! `convert --to gguf`: a Hugging Face checkpoint directory (any format
//! weightstream reads: BF16, FP8, NVFP4, INT4 safetensors) to the BF16 GGUF
//! that convert_hf_to_gguf.py `--outtype bf16` writes from it: the metadata
//! and tensor map of weightstream-hf2gguf, the tensors dequantized by the
//! CPU kernels. One tensor in memory at a time; written under a temporary
//! name and renamed into place only when complete.

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Instant;

use weightstream_dequant::OutDtype;
use weightstream_format::gguf::writer::{data_offsets, header, TensorDecl};
use weightstream_format::safetensors::StDtype;
use weightstream_format::{Catalog, Dtype, Format};
use weightstream_hf2gguf::{HfInput, MappedTensor, Metadata, TensorIn, TensorType, Value, FILES};

use crate::access::{bytes, JobKernel};
use crate::control::{Control, Tracker};
use crate::convert_output::{write_output, ConvertOptions, ConvertReport};
use crate::cpu::{alloc_output, CpuExecutor};
use crate::error::{Error, Result};
use crate::overlapped_write::{overlapped, Failure};
use crate::plan::{Job, Plan, PlanOptions};
use crate::tensor::LoadStats;

/// u16 values per write buffer (two of them): as the safetensors convert.
const WRITE_GROUP: u64 = 1 << 20;

/// The most a checkpoint's side file (tokenizer.json, README.md, ...) may
/// hold: far above any real tokenizer, and what the converter reads whole.
const MAX_SIDE_FILE: u64 = 1 << 30;

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io { path: path.to_path_buf(), source }
}

/// The side files [`FILES`] and `modules.json` of the checkpoint
/// directory `cat` was opened from, read (None: absent): a local
/// directory, or an object-store prefix (fetched whole).
fn side_files(cat: &Catalog) -> Result<Vec<Option<Vec<u8>>>> {
    let names: Vec<&str> = FILES.iter().copied().chain(["modules.json"]).collect();
    #[cfg(feature = "remote")]
    if let Some(url) = cat.root.to_str().filter(|s| weightstream_remote::is_url(s)) {
        let url = if url.ends_with('/') { url.to_string() } else { format!("{url}/") };
        let opts = weightstream_remote::RemoteOptions::from_env().map_err(Error::InvalidArgument)?;
        return weightstream_remote::read_side_files(&url, &names, MAX_SIDE_FILE, &opts).map_err(Error::Remote);
    }
    names
        .iter()
        .map(|f| {
            let p = cat.root.join(f);
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

/// Whether `cat` was opened from a checkpoint directory: a local one, or
/// an object-store prefix.
fn is_dir(cat: &Catalog) -> bool {
    #[cfg(feature = "remote")]
    if cat.root.to_str().is_some_and(weightstream_remote::is_url) {
        return cat.root.to_string_lossy().ends_with('/');
    }
    cat.root.is_dir()
}

fn check_hf_dir(cat: &Catalog) -> Result<()> {
    if cat.format != Format::Safetensors || !is_dir(cat) {
        return Err(Error::InvalidArgument(format!(
            "{}: llama.cpp's metadata is made from a Hugging Face checkpoint directory (config.json, tokenizer, safetensors; \
             locally or under an object-store prefix)",
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
    let files = side_files(cat)?;
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
        generation_config: f("generation_config.json"),
        has_modules_json: files[FILES.len()].is_some(),
        tensors,
    };
    weightstream_hf2gguf::build(&input).map_err(|source| Error::HfMetadata { dir: cat.root.clone(), source })
}

/// The metadata and tensor map of `cat`, with the plan whose jobs the
/// map's sources index.
pub fn gguf_metadata(cat: &Catalog) -> Result<(Metadata, Plan)> {
    check_hf_dir(cat)?;
    let plan = Plan::new(cat, &PlanOptions { names: None, skip_unsupported: false, ..Default::default() })?;
    let tensors: Vec<TensorIn> = plan.jobs.iter().map(|j| TensorIn { name: j.name.clone(), shape: j.shape.clone() }).collect();
    Ok((hf_metadata(cat, &tensors)?, plan))
}

/// A tensor as declared in the header: convert's BF16 tensors are float16
/// ones where the convert asked for float16 (`--dtype f16`).
fn decl(t: &MappedTensor, out: OutDtype) -> TensorDecl {
    let (ggml_type, width) = match (t.ty, out) {
        (TensorType::F32, _) => (0, 4),                // GGML_TYPE_F32
        (TensorType::BF16, OutDtype::BF16) => (30, 2), // GGML_TYPE_BF16
        (TensorType::BF16, OutDtype::F16) => (1, 2),   // GGML_TYPE_F16
    };
    TensorDecl { name: t.name.clone(), shape: t.shape.clone(), ggml_type, nbytes: t.shape.iter().product::<u64>() * width }
}

/// Convert the checkpoint directory `cat` to a BF16 (or float16) GGUF at `output`.
pub fn convert_to_gguf(cat: &Catalog, output: &Path, opts: &ConvertOptions, control: Control) -> Result<ConvertReport> {
    let t0 = Instant::now();
    let (mut meta, plan) = gguf_metadata(cat)?;
    let plan = plan.with_out(opts.out);
    if opts.out == OutDtype::F16 {
        meta.set("general.file_type", Value::U32(1)); // LlamaFileType.MOSTLY_F16
    }
    let decls: Vec<TensorDecl> = meta.tensors.iter().map(|t| decl(t, opts.out)).collect();
    let head = header(&meta.kv, &decls).map_err(|why| Error::InvalidArgument(format!("{}: {why}", output.display())))?;
    let out_bytes = head.len() as u64 + data_offsets(&decls).last().copied().unwrap_or(0) + decls.last().map_or(0, |d| d.nbytes);
    let src_bytes: u64 = meta.tensors.iter().flat_map(|t| &t.sources).map(|&i| plan.jobs[i].src_bytes()).sum();
    write_output(output, opts.force, |tmp| write_file(cat, &plan, &meta, &head, &decls, tmp, &opts.staging, control))?;
    Ok(ConvertReport {
        output: output.to_path_buf(),
        files: vec![PathBuf::from(output)],
        skipped: vec![],
        stats: LoadStats {
            tensors: meta.tensors.len() as u64,
            src_bytes,
            out_bytes,
            seconds: t0.elapsed().as_secs_f64(),
            ..Default::default()
        },
    })
}

/// A piece of the data section, at most one write buffer of u16 values:
/// zeros up to a tensor's 32-byte alignment, or rows `rows` of one source of
/// GGUF tensor `tensor` (its expert `source`), in output order.
enum Piece {
    Pad(usize),
    Rows {
        tensor: usize,
        source: usize,
        rows: Range<u64>,
        cols: u64,
        last: bool,
    },
    /// A tensor convert computes (Llama 3's rope factors), whole.
    Generated(usize),
}

/// The data section as pieces: every tensor's sources in order, each cut
/// into runs of whole rows of at most `group` values (a row is one value of
/// a 1-D tensor when its rows are permuted, else the whole tensor).
fn pieces(meta: &Metadata, plan: &Plan, decls: &[TensorDecl], group: u64) -> Vec<Piece> {
    let mut out = vec![];
    let mut at = 0u64;
    for (ti, (t, d)) in meta.tensors.iter().zip(decls).enumerate() {
        let per_value = if t.ty == TensorType::F32 { 2 } else { 1 };
        if t.sources.is_empty() {
            out.push(Piece::Generated(ti));
        }
        for (si, &s) in t.sources.iter().enumerate() {
            let job = &plan.jobs[s];
            let (rows, cols) = shape2(job, t.permute_heads);
            // An F32 source (a norm, a bias, the router: small) is one piece:
            // its values are made whole (f32_values).
            let step = if per_value == 2 { rows } else { (group / cols.max(1)).max(1) };
            for r in (0..rows).step_by(step as usize) {
                let end = (r + step).min(rows);
                out.push(Piece::Rows { tensor: ti, source: si, rows: r..end, cols, last: si + 1 == t.sources.len() && end == rows });
            }
        }
        at += d.nbytes;
        // Each tensor's data starts 32-byte aligned; sizes are even, so the
        // padding is whole u16 zeros.
        let pad = at.next_multiple_of(32) - at;
        if pad > 0 {
            out.push(Piece::Pad(pad as usize / 2));
        }
        at += pad;
    }
    out
}

/// A source seen as rows: the rows convert permutes (a 1-D bias: one value
/// each), or the outermost dimension's, or one row for a 1-D tensor.
fn shape2(job: &Job, permute_heads: u32) -> (u64, u64) {
    match job.shape.first() {
        Some(&r) if r > 0 && (permute_heads > 0 || job.shape.len() >= 2) => (r, job.n_elems / r),
        _ => (1, job.n_elems),
    }
}

/// The GGUF file: its header, then the data written from two buffers, one
/// filled by the CPU kernels while the other is written (bounded memory,
/// as the safetensors convert).
#[allow(clippy::too_many_arguments)]
fn write_file(
    cat: &Catalog,
    plan: &Plan,
    meta: &Metadata,
    head: &[u8],
    decls: &[TensorDecl],
    tmp: &Path,
    staging: &crate::Staging,
    control: Control,
) -> Result<()> {
    let cpu = CpuExecutor::new(staging)?;
    let src_bytes: u64 = meta.tensors.iter().flat_map(|t| &t.sources).map(|&i| plan.jobs[i].src_bytes()).sum();
    let tracker = Tracker::new(control, meta.tensors.len() as u64, src_bytes);
    let file = File::create(tmp).map_err(io_err(tmp))?;
    let mut w = BufWriter::with_capacity(4 << 20, file);
    w.write_all(head).map_err(io_err(tmp))?;
    // A row of the widest BF16 tensor, and a whole F32 source, must fit a buffer.
    let widest = meta.tensors.iter().flat_map(|t| t.sources.iter().map(move |&s| (t, s))).map(|(t, s)| match t.ty {
        TensorType::F32 => plan.jobs[s].n_elems * 2,
        TensorType::BF16 => shape2(&plan.jobs[s], t.permute_heads).1,
    });
    let generated = meta.tensors.iter().map(|t| t.generated.len() as u64 * 2);
    let group = widest.chain(generated).max().unwrap_or(0).max(WRITE_GROUP);
    let bufs = [alloc_output("(convert write buffer)", group)?, alloc_output("(convert write buffer)", group)?];
    let kernels = meta
        .tensors
        .iter()
        .map(|t| t.sources.iter().map(|&s| JobKernel::new(cat, &plan.jobs[s])).collect::<Result<Vec<_>>>())
        .collect::<Result<Vec<_>>>()?;
    let len = |p: &Piece| match p {
        Piece::Pad(n) => *n,
        Piece::Generated(t) => meta.tensors[*t].generated.len() * 2,
        Piece::Rows { tensor, rows, cols, .. } => {
            ((rows.end - rows.start) * cols * if meta.tensors[*tensor].ty == TensorType::F32 { 2 } else { 1 }) as usize
        }
    };
    let fill = |p: &Piece, out: &mut [u16]| -> Result<()> {
        let (tensor, source, rows, cols, last) = match p {
            Piece::Pad(_) => {
                out.fill(0);
                return Ok(());
            }
            Piece::Generated(t) => {
                // Little-endian F32 as two u16 (low half first).
                for (o, v) in out.chunks_exact_mut(2).zip(&meta.tensors[*t].generated) {
                    (o[0], o[1]) = (*v as u16, (*v >> 16) as u16);
                }
                tracker.tensor_done();
                return Ok(());
            }
            Piece::Rows { tensor, source, rows, cols, last } => (tensor, source, rows, cols, last),
        };
        let t = &meta.tensors[*tensor];
        let jk = &kernels[*tensor][*source];
        let job = jk.job();
        match t.ty {
            TensorType::BF16 if t.permute_heads == 0 => {
                cpu.fill_elems(cat, jk, job.first + rows.start * cols, out, Some(&tracker))?;
            }
            TensorType::BF16 => {
                for (k, r) in rows.clone().enumerate() {
                    let src = permuted_row(r, job.shape[0], t.permute_heads);
                    let dst = &mut out[k * *cols as usize..(k + 1) * *cols as usize];
                    cpu.fill_elems(cat, jk, job.first + src * cols, dst, Some(&tracker))?;
                }
            }
            TensorType::F32 => {
                let values = f32_values(cat, &cpu, job, &tracker)?;
                for (k, r) in rows.clone().enumerate() {
                    let src = if t.permute_heads > 0 { permuted_row(r, job.shape[0], t.permute_heads) } else { r };
                    for c in 0..*cols as usize {
                        // Little-endian F32 as two u16 (low half first).
                        let v = values[src as usize * *cols as usize + c];
                        let o = 2 * (k * *cols as usize + c);
                        (out[o], out[o + 1]) = (v as u16, (v >> 16) as u16);
                    }
                }
            }
        }
        if *last {
            tracker.tensor_done();
        }
        Ok(())
    };
    let (w, _) = overlapped(w, pieces(meta, plan, decls, group), len, bufs, fill, |w| w.flush()).map_err(|f| match f {
        Failure::Fill(e) => e,
        Failure::Write(source) => Error::Io { path: tmp.to_path_buf(), source },
    })?;
    w.into_inner().map_err(|e| Error::Io { path: tmp.to_path_buf(), source: e.into_error() })?.sync_all().map_err(io_err(tmp))
}

/// llama's q/k rows in convert's order (LlamaModel.permute): within each of
/// `heads` heads of d rows, output row `h * d + 2i + j` is source row
/// `h * d + j * d / 2 + i`.
fn permuted_row(r: u64, rows: u64, heads: u32) -> u64 {
    let d = rows / heads as u64;
    let (h, within) = (r / d, r % d);
    h * d + (within % 2) * (d / 2) + within / 2
}

fn bf16(cat: &Catalog, cpu: &CpuExecutor, job: &Job, tracker: &Tracker) -> Result<Vec<u16>> {
    let mut dst = vec![0u16; job.n_elems as usize];
    cpu.fill(cat, &JobKernel::new(cat, job)?, &mut dst, Some(tracker))?;
    Ok(dst)
}

/// F32 values (bits) as convert writes them: an F32, F16 or BF16 source
/// widened exactly (its stored values), anything else from its BF16.
fn f32_values(cat: &Catalog, cpu: &CpuExecutor, job: &Job, tracker: &Tracker) -> Result<Vec<u32>> {
    let info = &cat.tensors[job.tensor];
    let stored = matches!(info.dtype, Dtype::St(StDtype::F32 | StDtype::F16 | StDtype::BF16)) && info.packed.is_none();
    if !stored {
        // Widened from BF16 whatever the convert's output dtype.
        let job = Job { out: OutDtype::BF16, ..job.clone() };
        return Ok(bf16(cat, cpu, &job, tracker)?.iter().map(|&b| (b as u32) << 16).collect());
    }
    let raw = bytes(cat, info.file, info.offset..info.offset + info.nbytes, &info.name)?;
    tracker.add_bytes(info.nbytes);
    Ok(match info.dtype {
        Dtype::St(StDtype::F32) => raw.chunks_exact(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
        Dtype::St(StDtype::F16) => {
            raw.chunks_exact(2).map(|b| weightstream_dequant::numerics::f16_to_f32(u16::from_le_bytes([b[0], b[1]])).to_bits()).collect()
        }
        _ => raw.chunks_exact(2).map(|b| (u16::from_le_bytes([b[0], b[1]]) as u32) << 16).collect(),
    })
}
