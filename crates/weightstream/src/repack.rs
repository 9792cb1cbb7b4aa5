//! A tensor's stored blocks repacked into GPTQ's layout (weightstream-repack)
//! instead of dequantized: the keep-quantized mode of the fronts. Reads
//! only the rows asked for, zero-copy where the source maps the file, and
//! moves the bits on the CPU or on a CUDA device.

use std::borrow::Cow;
use std::ops::Range;

use weightstream_format::{BlockFormat, Catalog, Encoding};
use weightstream_kernels::{GptqArgs, Launch};
use weightstream_repack::{gptq, GptqTarget};

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

/// The stored bytes a GPTQ repack of a region moves: `nrows` rows of
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
}

/// Rows `rows` (output features) and columns `cols` (input features,
/// whole groups) of whole-tensor job `job`, read: the rows', or only each
/// row's segment of a column range.
fn region<'a>(cat: &'a Catalog, job: &Job, rows: &Range<u64>, cols: &Range<u64>) -> Result<Region<'a>> {
    let (nrows, ncols) = job.matrix;
    let bad =
        |why: String| Error::BadSlice { tensor: job.name.clone(), rows: rows.clone(), cols: cols.clone(), shape: (nrows, ncols), why };
    let Encoding::Block(format) = job.encoding else {
        return Err(bad(format!("{} has no GPTQ layout", job.encoding.name())));
    };
    if job.first != 0 || job.window.is_some() || job.unpermute.is_some() || job.n_elems != nrows * ncols {
        return Err(bad("only a whole tensor's job can be repacked".into()));
    }
    if rows.start > rows.end || rows.end > nrows || cols.start > cols.end || cols.end > ncols {
        return Err(bad("outside the matrix".into()));
    }
    let layout = format.layout();
    let group = gptq::target(format).map_or(layout.elems, |t| t.group) as u64;
    if cols.start % group != 0 || cols.end % group != 0 {
        return Err(bad(format!("columns must start and end on a group of {group}")));
    }
    let elems = layout.elems as u64;
    let row_bytes = ncols / elems * layout.bytes as u64;
    let nrows = rows.end - rows.start;
    let first = job.src.start + rows.start * row_bytes;
    // The blocks covering the columns (a ternary group is half a block).
    let blocks = cols.start / elems..cols.end.div_ceil(elems);
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
    Ok(Region { format, raw, nrows: nrows as usize, width: width as usize, within, offset: first })
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
    for (what, (addr, got), want) in [("qweight", qweight, k / t.pack() * nrows * 4), ("scales", scales, k / t.group * nrows * 2)] {
        if got != want as u64 || (addr == 0 && want != 0) {
            let e = gptq::RepackError::Size { what, got: got as usize, want };
            return Err(repack_error(cat, job, r.offset, format!("{e} (bytes)")));
        }
    }
    let launch = Launch::Gptq(GptqArgs {
        format: r.format,
        scales: scales.0,
        rows: r.nrows as u64,
        width: r.width as u64,
        col_start: r.within.start as u64,
        bits: t.bits,
        group: t.group as u32,
    });
    let n = (r.nrows * r.within.len()) as u64;
    // SAFETY: the caller vouches for qweight, scales and stream; the
    // source buffer holds exactly the region's rows (region() read them).
    unsafe { gpu.launch_from_host(&r.raw, &launch, qweight.0, n, stream, &format!("blocks of '{}' to repack", job.name))? };
    Ok(r.raw.len() as u64)
}
