//! The plan's scale and zero-point grids on the device: f32 values (FP8
//! block scales, packed 4-bit scales with the global scale folded in,
//! integer packs' zero points) gathered into a few large buffers instead
//! of one allocation and one synchronized copy per grid. A plan of a few
//! hundred FP8 tensors otherwise paid a few hundred `cuMemAlloc`s and
//! context synchronizations per load, the fixed cost issue 56 item 3 asks
//! to bring under 2 ms.

use weightstream_cuda::{DeviceBuffer, Gpu};

use crate::error::Result;

/// Host bytes gathered before they go to one device buffer: large enough
/// that a model's grids take a handful of buffers, small enough that the
/// host copy stays a small fraction of the load's memory.
const FLUSH_BYTES: usize = 64 << 20;
/// Where each grid starts in its buffer (`cuMemAlloc`'s own alignment, so
/// a grid is aligned as if it had a buffer of its own).
const ALIGN: usize = 256;

/// Grids being gathered: `add` each, then `finish` for their addresses.
pub(super) struct Grids<'g> {
    gpu: &'g Gpu,
    pending: Vec<u8>,
    buffers: Vec<DeviceBuffer>,
    /// Per added grid: (buffer index, byte offset in it).
    at: Vec<(usize, usize)>,
}

impl<'g> Grids<'g> {
    pub(super) fn new(gpu: &'g Gpu) -> Self {
        Grids { gpu, pending: Vec::new(), buffers: Vec::new(), at: Vec::new() }
    }

    /// Queue `values` for the device; returns the grid's handle for
    /// [`Placed::ptr`].
    pub(super) fn add(&mut self, values: &[f32]) -> Result<usize> {
        let len = values.len() * 4;
        if !self.pending.is_empty() && self.pending.len() + len > FLUSH_BYTES {
            self.flush()?;
        }
        self.at.push((self.buffers.len(), self.pending.len()));
        self.pending.extend(values.iter().flat_map(|x| x.to_le_bytes()));
        self.pending.resize(self.pending.len().next_multiple_of(ALIGN), 0);
        Ok(self.at.len() - 1)
    }

    fn flush(&mut self) -> Result<()> {
        let what = format!("{} bytes of scale and zero-point grids", self.pending.len());
        let b = self.gpu.alloc(self.pending.len(), &what).map_err(super::device_error)?;
        // Synchronized: the copy has landed before any kernel reads it.
        b.from_host(&self.pending).map_err(super::device_error)?;
        self.buffers.push(b);
        self.pending.clear();
        Ok(())
    }

    /// Every grid on the device.
    pub(super) fn finish(mut self) -> Result<Placed> {
        if !self.pending.is_empty() {
            self.flush()?;
        }
        Ok(Placed { buffers: self.buffers, at: self.at })
    }
}

/// The grids on the device; freed on drop (after the load's last kernel).
pub(super) struct Placed {
    buffers: Vec<DeviceBuffer>,
    at: Vec<(usize, usize)>,
}

impl Placed {
    /// The device address of grid `handle`.
    pub(super) fn ptr(&self, handle: usize) -> u64 {
        let (b, off) = self.at[handle];
        self.buffers[b].ptr() + off as u64
    }
}
