//! [`Staging`]: how bytes are staged on their way to the kernels, the one
//! staging option every front and both executors take. Each executor
//! resolves what is left `None` to its own defaults (a CPU read-ahead ring
//! and a GPU pinned ring want different sizes) and refuses values no
//! machine could serve.

use weightstream_cuda::StagingConfig;
use weightstream_dequant::Isa;

use crate::error::{Error, Result};

/// Default bytes per CPU read-ahead slot (one read and one dequantization
/// group): large enough for full-speed direct reads, small enough that
/// cancelling is prompt and the ring stays small.
pub const CPU_SLOT_BYTES: usize = 4 << 20;
/// Default reader threads on the CPU (sources without a zero-copy view).
pub const CPU_READERS: usize = 4;
/// Caps on the options: beyond these a machine runs out of threads or
/// memory slowly rather than going faster.
pub const MAX_THREADS: usize = 1024;
pub const MAX_READERS: usize = 256;
pub const MAX_SLOTS: usize = 4096;

/// How bytes are staged on their way to the kernels, for every device:
/// `None` takes the device's default. On the CPU the read-ahead ring uses
/// `readers`, `slots` and `slot_bytes` (bytes per read and per dequantization
/// group; default 4 MiB, slots twice the readers); on a GPU the pinned ring
/// does (default 8 slots of 4 MiB, 4 readers).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Staging {
    /// CPU dequantization threads (default: every core).
    pub threads: Option<usize>,
    /// Threads reading from storage.
    pub readers: Option<usize>,
    /// Buffers in the read-ahead (CPU) or pinned (GPU) ring.
    pub slots: Option<usize>,
    /// Bytes per buffer.
    pub slot_bytes: Option<usize>,
    /// CPU kernel instruction set (default: the best this CPU has).
    pub isa: Option<Isa>,
    /// GPU: pin the ring write-combined (default: no; the GPU round
    /// measures both).
    pub write_combined: Option<bool>,
}

impl Staging {
    /// Refuse at once, saying why, what would only fail slowly: thousands of
    /// threads (each needs a stack) or of slots.
    pub(crate) fn check(&self) -> Result<()> {
        for (what, v, max) in
            [("threads", self.threads, MAX_THREADS), ("readers", self.readers, MAX_READERS), ("staging slots", self.slots, MAX_SLOTS)]
        {
            if let Some(v) = v.filter(|&v| v > max) {
                return Err(Error::InvalidArgument(format!("{what}: {v} is above the limit of {max}")));
            }
        }
        Ok(())
    }

    /// The CPU read-ahead ring: (readers, slots, slot bytes), defaults filled in.
    pub(crate) fn cpu_ring(&self) -> (usize, usize, usize) {
        let readers = self.readers.unwrap_or(CPU_READERS).max(1);
        (readers, self.slots.unwrap_or(2 * readers).max(1), self.slot_bytes.unwrap_or(CPU_SLOT_BYTES).max(1))
    }

    /// The GPU pinned ring, defaults filled in.
    pub(crate) fn gpu_ring(&self) -> StagingConfig {
        let d = StagingConfig::default();
        StagingConfig {
            slots: self.slots.unwrap_or(d.slots),
            slot_bytes: self.slot_bytes.unwrap_or(d.slot_bytes),
            readers: self.readers.unwrap_or(d.readers),
            write_combined: self.write_combined.unwrap_or(d.write_combined),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_per_device() {
        let s = Staging::default();
        assert_eq!(s.gpu_ring(), StagingConfig::default());
        assert_eq!(s.cpu_ring(), (CPU_READERS, 2 * CPU_READERS, CPU_SLOT_BYTES));
        let s = Staging {
            slots: Some(3),
            slot_bytes: Some(1 << 20),
            readers: Some(2),
            threads: Some(1),
            isa: None,
            write_combined: Some(true),
        };
        assert_eq!(s.gpu_ring(), StagingConfig { slots: 3, slot_bytes: 1 << 20, readers: 2, write_combined: true });
        assert_eq!(s.cpu_ring(), (2, 3, 1 << 20));
    }

    #[test]
    fn refuses_what_would_fail_slowly() {
        assert!(Staging { threads: Some(MAX_THREADS + 1), ..Default::default() }.check().is_err());
        assert!(Staging { slots: Some(MAX_SLOTS + 1), ..Default::default() }.check().is_err());
        assert!(Staging { readers: Some(MAX_READERS), ..Default::default() }.check().is_ok());
    }
}
