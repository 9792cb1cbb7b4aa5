//! Progress reports and cancellation, shared by every long operation.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::error::{Error, Result};

/// Where a load or convert stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub tensors_done: u64,
    pub tensors_total: u64,
    /// Source (file) bytes dequantized so far.
    pub bytes_done: u64,
    pub bytes_total: u64,
}

/// What a caller passes to watch and stop an operation: an optional
/// progress callback (called from any thread) and an optional cancel flag.
#[derive(Default, Clone, Copy)]
pub struct Control<'a> {
    pub progress: Option<&'a (dyn Fn(Progress) + Sync)>,
    pub cancel: Option<&'a AtomicBool>,
}

impl<'a> Control<'a> {
    pub fn check(&self) -> Result<()> {
        match self.cancel {
            Some(c) if c.load(Ordering::Relaxed) => Err(Error::Cancelled),
            _ => Ok(()),
        }
    }
}

/// Counts work done and reports it through a `Control`.
pub struct Tracker<'a> {
    control: Control<'a>,
    tensors_total: u64,
    bytes_total: u64,
    tensors_done: AtomicU64,
    bytes_done: AtomicU64,
}

impl<'a> Tracker<'a> {
    pub fn new(control: Control<'a>, tensors_total: u64, bytes_total: u64) -> Self {
        let t = Tracker { control, tensors_total, bytes_total, tensors_done: AtomicU64::new(0), bytes_done: AtomicU64::new(0) };
        t.report();
        t
    }

    pub fn check(&self) -> Result<()> {
        self.control.check()
    }

    pub fn add_bytes(&self, n: u64) {
        self.bytes_done.fetch_add(n, Ordering::Relaxed);
        self.report();
    }

    pub fn tensor_done(&self) {
        self.tensors_done.fetch_add(1, Ordering::Relaxed);
        self.report();
    }

    fn report(&self) {
        if let Some(p) = self.control.progress {
            p(Progress {
                tensors_done: self.tensors_done.load(Ordering::Relaxed),
                tensors_total: self.tensors_total,
                bytes_done: self.bytes_done.load(Ordering::Relaxed),
                bytes_total: self.bytes_total,
            });
        }
    }
}
