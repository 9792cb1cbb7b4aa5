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
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadStats {
    pub tensors: u64,
    /// Checkpoint bytes read: the tensors' data and their scale and
    /// zero-point tensors (`Plan::read_bytes`); not the headers.
    pub src_bytes: u64,
    /// BF16 bytes produced.
    pub out_bytes: u64,
    pub seconds: f64,
}

impl LoadStats {
    pub fn src_gbps(&self) -> f64 {
        self.src_bytes as f64 / self.seconds.max(1e-9) / 1e9
    }
    pub fn out_gbps(&self) -> f64 {
        self.out_bytes as f64 / self.seconds.max(1e-9) / 1e9
    }
}
