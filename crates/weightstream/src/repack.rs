//! A tensor's stored blocks repacked into GPTQ's or the FP4 layout
//! (weightstream-repack) instead of dequantized: the keep-quantized mode of
//! the fronts. Reads
//! only the rows asked for, zero-copy where the source maps the file, and
//! moves the bits on the CPU or on a CUDA device.

use std::borrow::Cow;
use std::ops::Range;

use weightstream_format::{BlockFormat, Catalog, Encoding};
use weightstream_kernels::{Fp4Args, GptqArgs, Launch};
use weightstream_repack::{fp4, gptq, Fp4Target, GptqTarget};

use crate::access::bytes;
use crate::alloc::zeroed;
use crate::error::{Error, Result};
use crate::gpu::GpuExecutor;
use crate::plan::{file_path, Job};

/// The GPTQ layout `job`'s tensor maps onto exactly, if any.
pub fn gptq_target(job: &Job) -> Option<GptqTarget> {
    match job.encoding {
        Encoding::Block(f) => gptq::target(f),
        _ => None,
    }
}

/// The FP4 layout (compressed-tensors' NVFP4 / MXFP4) `job`'s tensor maps
/// onto exactly, if any.
pub fn fp4_target(job: &Job) -> Option<Fp4Target> {
    match job.encoding {
        Encoding::Block(f) => fp4::target(f),
        _ => None,
    }
}

/// The stored bytes a repack of a region moves: `nrows` rows of
/// `width` elements (whole blocks) back to back, of which columns
/// `within` move.
struct Region<'a> {
    format: BlockFormat,
    raw: Cow<'a, [u8]>,
    nrows: usize,
    width: usize,
    within: Range<usize>,
    /// The file offset of the first row's first byte (for errors).
    offset: u64,
    /// Each row's stored bytes and the bytes skipped at its start: `raw`
    /// holds each row's bytes from there (for errors' offsets).
    row_bytes: u64,
    row_skip: u64,
}

/// Rows `rows` (output features) and columns `cols` (input features,
/// whole groups) of whole-tensor job `job`, read: the rows', or only each
/// row's segment of a column range.
fn region<'a>(cat: &'a Catalog, job: &Job, rows: &Range<u64>, cols: &Range<u64>) -> Result<Region<'a>> {
    let (nrows, ncols) = job.matrix;
    let bad =
        |why: String| Error::BadSlice { tensor: job.name.clone(), rows: rows.clone(), cols: cols.clone(), shape: (nrows, ncols), why };
    let Encoding::Block(format) = job.encoding else {
        return Err(bad(format!("{} has no quantized layout", job.encoding.name())));
    };
    if job.first != 0 || job.window.is_some() || job.unpermute.is_some() || job.n_elems != nrows * ncols {
        return Err(bad("only a whole tensor's job can be repacked".into()));
    }
    if rows.start > rows.end || rows.end > nrows || cols.start > cols.end || cols.end > ncols {
        return Err(bad("outside the matrix".into()));
    }
    let layout = format.layout();
    let group = gptq::target(format).map(|t| t.group).or(fp4::target(format).map(|t| t.group)).unwrap_or(layout.elems) as u64;
    if cols.start % group != 0 || cols.end % group != 0 {
        return Err(bad(format!("columns must start and end on a group of {group}")));
    }
    let elems = layout.elems as u64;
    let row_bytes = ncols / elems * layout.bytes as u64;
    let nrows = rows.end - rows.start;
    let first = job.src.start + rows.start * row_bytes;
    // The blocks covering the columns (a ternary group is half a block).
    let blocks = cols.start / elems..cols.end.div_ceil(elems);
    let row_skip = blocks.start * layout.bytes as u64;
    let (raw, width) = if blocks == (0..ncols / elems) {
        (bytes(cat, job.file, first..first + nrows * row_bytes, &job.name)?, ncols)
    } else {
        // A column range (a row-parallel rank's input features): only each
        // row's segment is read, gathered rows back to back.
        let seg = blocks.start * layout.bytes as u64..blocks.end * layout.bytes as u64;
        let seg_len = seg.end - seg.start;
        let total = nrows * seg_len;
        let mut buf =
            usize::try_from(total).ok().and_then(zeroed).ok_or_else(|| Error::HostMemory { tensor: job.name.clone(), bytes: total })?;
        for (r, out) in buf.chunks_exact_mut(seg_len.max(1) as usize).enumerate() {
            let at = first + r as u64 * row_bytes + seg.start;
            out.copy_from_slice(&bytes(cat, job.file, at..at + seg_len, &job.name)?);
        }
        (Cow::Owned(buf), (blocks.end - blocks.start) * elems)
    };
    let base = blocks.start * elems;
    let within = (cols.start - base) as usize..(cols.end - base) as usize;
    Ok(Region { format, raw, nrows: nrows as usize, width: width as usize, within, offset: first, row_bytes, row_skip })
}

fn repack_error(cat: &Catalog, job: &Job, offset: u64, reason: String) -> Error {
    Error::Unsupported { file: file_path(cat, job.file), tensor: job.name.clone(), offset, reason }
}

/// Rows `rows` (output features) and columns `cols` (input features, whole
/// groups) of whole-tensor job `job` into `qweight` (`[cols / pack, rows]`
/// int32 words) and `scales` (`[cols / group, rows]` fp16 bits), on the
/// CPU. Returns the file bytes read: the rows', or only each row's segment
/// of a column range.
pub fn gptq_into(cat: &Catalog, job: &Job, rows: Range<u64>, cols: Range<u64>, qweight: &mut [u32], scales: &mut [u16]) -> Result<u64> {
    let r = region(cat, job, &rows, &cols)?;
    gptq::repack(r.format, &r.raw, r.nrows, r.width, r.within.clone(), qweight, scales)
        .map_err(|e| repack_error(cat, job, r.offset, e.to_string()))?;
    Ok(r.raw.len() as u64)
}

/// As [`gptq_into`], on CUDA device `gpu`: the rows' bytes are copied to
/// the device and moved there by `cuda/gptq.cu` (bitwise the CPU kernel's
/// result: kernels/tests/gptq_parity.rs), into `qweight` and `scales`
/// (device addresses), ordered after the work queued on `stream` and
/// complete when this returns. `qweight` and `scales` are `(address,
/// bytes)`: sizes other than the region's are refused before any launch.
///
/// # Safety
/// `qweight` and `scales` must be device memory of that GPU's primary
/// context of the bytes given, alive until this returns; `stream` 0 or a
/// live stream of that context.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gptq_into_device(
    cat: &Catalog,
    gpu: &GpuExecutor,
    job: &Job,
    rows: Range<u64>,
    cols: Range<u64>,
    qweight: (u64, u64),
    scales: (u64, u64),
    stream: u64,
) -> Result<u64> {
    let r = region(cat, job, &rows, &cols)?;
    let t = gptq::target(r.format).ok_or_else(|| repack_error(cat, job, r.offset, gptq::RepackError::NoTarget(r.format).to_string()))?;
    let (k, nrows) = (r.within.len(), r.nrows);
    let launch = Launch::Gptq(GptqArgs {
        format: r.format,
        scales: scales.0,
        rows: r.nrows as u64,
        width: r.width as u64,
        col_start: r.within.start as u64,
        bits: t.bits,
        group: t.group as u32,
    });
    let outs = [("qweight", qweight, k / t.pack() * nrows * 4), ("scales", scales, k / t.group * nrows * 2)];
    // SAFETY: the caller vouches for qweight, scales and stream.
    unsafe { launch_region(cat, gpu, job, &r, &launch, outs, stream) }
}

/// Check the device buffers (`(name, (address, bytes), bytes needed)`; the
/// first is the launch's destination) against the region, then copy the
/// region's rows to the device and run `launch` over them.
///
/// # Safety
/// As [`gptq_into_device`], for the buffers and `stream`.
unsafe fn launch_region(
    cat: &Catalog,
    gpu: &GpuExecutor,
    job: &Job,
    r: &Region,
    launch: &Launch,
    outs: [(&str, (u64, u64), usize); 2],
    stream: u64,
) -> Result<u64> {
    for (what, (addr, got), want) in outs {
        if got != want as u64 || (addr == 0 && want != 0) {
            return Err(repack_error(cat, job, r.offset, format!("buffer sizes: {what} holds {got} bytes, {want} needed")));
        }
    }
    let n = (r.nrows * r.within.len()) as u64;
    // SAFETY: the caller vouches for the buffers and stream; the source
    // buffer holds exactly the region's rows (region() read them).
    unsafe { gpu.launch_from_host(&r.raw, launch, outs[0].1 .0, n, stream, &format!("blocks of '{}' to repack", job.name))? };
    Ok(r.raw.len() as u64)
}

/// An FP4 repack's error for the file: a scale byte without an exact image
/// at its place in the file, anything else at the region's first byte.
fn fp4_error(cat: &Catalog, job: &Job, r: &Region, e: fp4::Fp4Error) -> Error {
    let offset = match e {
        // `at` counts the rows' bytes as read (a column range's rows
        // gathered segment by segment): the byte's place in the file.
        fp4::Fp4Error::Scale { at, .. } => {
            let row_len = r.raw.len() / r.nrows.max(1);
            r.offset + (at / row_len) as u64 * r.row_bytes + r.row_skip + (at % row_len) as u64
        }
        _ => r.offset,
    };
    repack_error(cat, job, offset, e.to_string())
}

/// Rows `rows` and columns `cols` (whole groups) of whole-tensor job `job`
/// into the FP4 layout's `packed` (`[rows, cols / 2]` bytes) and `scales`
/// (`[rows, cols / group]` bytes), on the CPU. Returns the file bytes read.
pub fn fp4_into(cat: &Catalog, job: &Job, rows: Range<u64>, cols: Range<u64>, packed: &mut [u8], scales: &mut [u8]) -> Result<u64> {
    let r = region(cat, job, &rows, &cols)?;
    // The kernel checks the scale bytes before it moves anything.
    fp4::repack(r.format, &r.raw, r.nrows, r.width, r.within.clone(), packed, scales).map_err(|e| fp4_error(cat, job, &r, e))?;
    Ok(r.raw.len() as u64)
}

/// As [`fp4_into`], on CUDA device `gpu` by `cuda/fp4.cu` (bitwise the CPU
/// kernel's result: kernels/tests/fp4_parity.rs); as [`gptq_into_device`]
/// for `packed`, `scales` and `stream`.
///
/// # Safety
/// As [`gptq_into_device`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn fp4_into_device(
    cat: &Catalog,
    gpu: &GpuExecutor,
    job: &Job,
    rows: Range<u64>,
    cols: Range<u64>,
    packed: (u64, u64),
    scales: (u64, u64),
    stream: u64,
) -> Result<u64> {
    let r = region(cat, job, &rows, &cols)?;
    let t = fp4::target(r.format).ok_or(fp4::Fp4Error::NoTarget(r.format)).map_err(|e| fp4_error(cat, job, &r, e))?;
    // The device kernel maps every scale byte: the ones without an image
    // are refused here, before the launch.
    fp4::check_scales(r.format, &r.raw).map_err(|e| fp4_error(cat, job, &r, e))?;
    let launch = Launch::Fp4(Fp4Args {
        format: r.format,
        scales: scales.0,
        rows: r.nrows as u64,
        width: r.width as u64,
        col_start: r.within.start as u64,
        group: t.group as u32,
    });
    let k = r.within.len();
    let outs = [("packed", packed, k / 2 * r.nrows), ("scales", scales, k / t.group * r.nrows)];
    // SAFETY: the caller vouches for packed, scales and stream.
    unsafe { launch_region(cat, gpu, job, &r, &launch, outs, stream) }
}
