//! A plan's jobs cut into the pipeline's chunks: each at most a staging
//! slot of file bytes, each output starting 512-byte aligned.

use std::sync::Arc;

use weightstream_cuda::trim::Trim;
use weightstream_cuda::{ChunkOp, ChunkWork, GdsFile};
use weightstream_format::{Catalog, Encoding, ScaleDtype};
use weightstream_kernels::{Launch, ScaledArgs};

use crate::error::{Error, Result};
use crate::plan::Job;

/// Elements per chunk: as many as fit a slot, a multiple of 256 so every
/// chunk's output starts 512-byte aligned (whole 16-byte stores).
fn chunk_elems(encoding: Encoding, slot_bytes: usize) -> u64 {
    let (block, size) = encoding.block();
    let fit = slot_bytes as u64 / size * block;
    (fit / 256 * 256).max(block.max(256))
}

/// Append job `index`'s chunks to `out`, its output at device address `dst`.
#[allow(clippy::too_many_arguments)]
pub(super) fn chunks_for(
    cat: &Catalog,
    job: &Job,
    index: usize,
    dst: u64,
    (scales, zeros): (Option<u64>, Option<u64>),
    gds: Option<Arc<GdsFile>>,
    slot_bytes: usize,
    out: &mut Vec<ChunkWork>,
) -> Result<()> {
    let elems = chunk_elems(job.encoding, slot_bytes);
    if job.encoding.block().1 * elems / job.encoding.block().0 > slot_bytes as u64 {
        return Err(Error::InvalidArgument(format!(
            "staging slots of {slot_bytes} bytes are too small for tensor '{}' ({}): use at least {} bytes",
            job.name,
            job.encoding.name(),
            job.encoding.block().1 * elems / job.encoding.block().0
        )));
    }
    let source = cat.files[job.file].source.clone();
    let start = out.len();
    for c in job.chunks(elems) {
        let layout = job.scale.as_ref().map(|s| s.scale.layout);
        let round_f16 = job.scale.as_ref().is_some_and(|s| s.scale.dtype == ScaleDtype::F16);
        // The kernel writes the job's output (BF16 or float16); a source
        // already of that type is copied.
        let op = match Launch::for_encoding(job.encoding, job.matrix, c.first, layout.as_ref(), round_f16, job.out) {
            None => ChunkOp::Copy,
            Some(Launch::Scaled(a)) => {
                ChunkOp::Kernel(Launch::Scaled(ScaledArgs { scales: scales.unwrap_or(0), zeros: zeros.unwrap_or(0), ..a }))
            }
            Some(l) => ChunkOp::Kernel(l),
        };
        out.push(ChunkWork {
            tensor: index,
            source: source.clone(),
            gds: gds.clone(),
            offset: c.src.start,
            len: (c.src.end - c.src.start) as usize,
            op,
            n: c.n,
            dst: dst + job.out_index(c.keep.start) * 2,
            trim: c.trimmed().then(|| {
                let (block, block_bytes) = job.encoding.block();
                Trim { keep: c.keep.start - c.first..c.keep.end - c.first, block, block_bytes }
            }),
            last_of_tensor: false,
        });
    }
    if let Some(last) = out[start..].last_mut() {
        last.last_of_tensor = true;
    }
    Ok(())
}
