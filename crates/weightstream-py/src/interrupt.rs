//! Loads run off the GIL: `interruptible` runs one on a thread of its own
//! while the calling thread answers Ctrl-C, and `report` hands each
//! finished tensor back to Python.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use pyo3::prelude::*;
use weightstream::{Control, Error};

use crate::{py_error, to_py};

/// Call `callback(i)` for finished tensor `i` (with the GIL); a Python
/// exception stops the load.
pub(crate) fn report(callback: &Option<Py<PyAny>>, i: usize) -> weightstream::Result<()> {
    match callback {
        None => Ok(()),
        Some(cb) => Python::attach(|py| cb.call1(py, (i,)).map(|_| ()).map_err(|e| Error::Callback(e.to_string()))),
    }
}

/// Run `work` (a load) on a thread of its own while this thread, holding
/// the GIL only briefly every 50 ms, checks for Python signals: Ctrl-C
/// cancels the load (through its `Control`) and raises KeyboardInterrupt
/// here once the load has stopped and released everything. Without this a
/// long `load_file` could not be interrupted at all.
pub(crate) fn interruptible<T: Send>(py: Python<'_>, work: impl FnOnce(Control) -> weightstream::Result<T> + Send) -> PyResult<T> {
    interruptible_shared(py, |cancel| work(Control { progress: None, cancel: Some(&cancel) }))
}

/// [`interruptible`], `work` given the cancel flag itself, shared: what a
/// remote open makes keeps it (its sources' header reads stop with it).
pub(crate) fn interruptible_shared<T: Send>(
    py: Python<'_>,
    work: impl FnOnce(Arc<AtomicBool>) -> weightstream::Result<T> + Send,
) -> PyResult<T> {
    let cancel = Arc::new(AtomicBool::new(false));
    let done = AtomicBool::new(false);
    let mut signal: Option<PyErr> = None;
    let waiter = std::thread::current();
    let result = std::thread::scope(|s| {
        let handle = s.spawn(|| {
            // Set on return and on a panic alike (a guard's drop runs while
            // unwinding): a panicking load once left this loop waiting
            // forever, deaf to Ctrl-C (issue 27).
            let _done = Done { done: &done, waiter };
            work(cancel.clone())
        });
        while !done.load(Ordering::Acquire) {
            py.detach(|| {
                let t0 = std::time::Instant::now();
                let period = std::time::Duration::from_millis(50);
                while !done.load(Ordering::Acquire) {
                    let Some(left) = period.checked_sub(t0.elapsed()) else { break };
                    std::thread::park_timeout(left);
                }
            });
            if signal.is_none() {
                if let Err(e) = py.check_signals() {
                    signal = Some(e);
                    cancel.store(true, Ordering::Relaxed);
                }
            }
        }
        handle.join()
    });
    let result = result
        .map_err(|_| py_error("internal", "the load thread panicked (a bug: please report it with the checkpoint that caused it)"))?;
    match (signal, result) {
        (Some(e), _) => Err(e),
        (None, r) => r.map_err(|e| to_py(py, e)),
    }
}

/// Marks the load finished when dropped, and wakes the waiting thread at
/// once (a polling sleep cost every call about 2 ms, docs/PERFORMANCE.md,
/// Python per-call cost).
struct Done<'a> {
    done: &'a AtomicBool,
    waiter: std::thread::Thread,
}

impl Drop for Done<'_> {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Release);
        self.waiter.unpark();
    }
}
