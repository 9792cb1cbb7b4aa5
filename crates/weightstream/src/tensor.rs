//! What loads hand back.

/// A BF16 tensor in host memory (`data` holds the BF16 bit patterns).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostTensor {
    pub name: String,
    /// Row-major, outermost first.
    pub shape: Vec<u64>,
    pub data: Vec<u16>,
}

impl HostTensor {
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: u16 has no padding and any byte pattern is a valid u8; the
        // slice covers exactly the vector's initialised elements.
        unsafe { std::slice::from_raw_parts(self.data.as_ptr() as *const u8, self.data.len() * 2) }
    }
}

/// What a load did, for reports.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadStats {
    pub tensors: u64,
    /// Checkpoint bytes read: the tensors' data and their scale and
    /// zero-point tensors (`Plan::read_bytes`); not the headers.
    pub src_bytes: u64,
    /// BF16 bytes produced.
    pub out_bytes: u64,
    pub seconds: f64,
    /// Where the seconds went.
    pub phases: Phases,
}

/// Where a load's time went, in seconds, phase by phase (issue 56: the
/// fixed cost of a load is what these expose). A phase a load did not have
/// is 0 (or empty).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Phases {
    /// Allocating the outputs up front (a GPU load that allocates them) and
    /// uploading the GPU's scale and zero-point buffers.
    pub alloc: f64,
    /// Getting the staging ring: pinning a new one, or 0 when one kept from
    /// an earlier load in this process was reused.
    pub ring: f64,
    /// From the pipeline's start until the first chunk's bytes were in
    /// staging (read-ahead and GPU loads).
    pub first_byte: f64,
    /// The pipeline: every read, copy and kernel queued (the CPU: every
    /// group dequantized).
    pub pipeline: f64,
    /// Waiting for the device to finish after the pipeline (GPU).
    pub drain: f64,
    /// Per reader thread, the seconds it spent reading (read-ahead and GPU
    /// loads); against `pipeline`, how busy storage kept each reader.
    pub readers_busy: Vec<f64>,
}

impl Phases {
    /// The reader side of a ring run.
    pub(crate) fn from_ring(times: &weightstream_format::io::ordered::RingTimes) -> Phases {
        Phases {
            first_byte: times.first_item.map_or(0.0, |d| d.as_secs_f64()),
            readers_busy: times.busy.iter().map(|d| d.as_secs_f64()).collect(),
            ..Phases::default()
        }
    }
}

impl LoadStats {
    pub fn src_gbps(&self) -> f64 {
        self.src_bytes as f64 / self.seconds.max(1e-9) / 1e9
    }
    pub fn out_gbps(&self) -> f64 {
        self.out_bytes as f64 / self.seconds.max(1e-9) / 1e9
    }
}
