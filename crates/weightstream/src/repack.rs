//! A tensor's stored blocks repacked into GPTQ's layout (weightstream-repack)
//! instead of dequantized: the keep-quantized mode of the fronts. Reads
//! only the rows asked for, zero-copy where the source maps the file.

use std::borrow::Cow;
use std::ops::Range;

use weightstream_format::{Catalog, Encoding};
use weightstream_repack::{gptq, GptqTarget};

use crate::access::bytes;
use crate::alloc::zeroed;
use crate::error::{Error, Result};
use crate::plan::{file_path, Job};

/// The GPTQ layout `job`'s tensor maps onto exactly, if any.
pub fn gptq_target(job: &Job) -> Option<GptqTarget> {
    match job.encoding {
        Encoding::Block(f) => gptq::target(f),
        _ => None,
    }
}

/// Rows `rows` (output features) and columns `cols` (input features, whole
/// groups) of whole-tensor job `job` into `qweight` (`[cols / pack, rows]`
/// int32 words) and `scales` (`[cols / group, rows]` fp16 bits). Returns
/// the file bytes read: the rows', or only each row's segment of a column
/// range.
pub fn gptq_into(cat: &Catalog, job: &Job, rows: Range<u64>, cols: Range<u64>, qweight: &mut [u32], scales: &mut [u16]) -> Result<u64> {
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
    gptq::repack(format, &raw, nrows as usize, width as usize, within, qweight, scales).map_err(|e| Error::Unsupported {
        file: file_path(cat, job.file),
        tensor: job.name.clone(),
        offset: first,
        reason: e.to_string(),
    })?;
    Ok(raw.len() as u64)
}
