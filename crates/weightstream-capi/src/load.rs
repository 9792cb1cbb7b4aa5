//! Serving load requests: validate them all, then host loads in order, raw
//! device copies, and one pipelined GPU pass per (device, stream).

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use weightstream::{Control, Job, Plan, Progress};

use crate::abi::{Failure, WsDestination, WsLoadRequest, WsProgressCallback, WsStatus, WS_DTYPE_BF16, WS_MEMORY_CUDA, WS_MEMORY_HOST};
use crate::checkpoint::{Checkpoint, Output};

/// The caller's progress callback and its user data.
struct CCallback {
    f: unsafe extern "C" fn(f32, *mut c_void) -> bool,
    user_data: *mut c_void,
}

// SAFETY: ws_load_tensors' caller lets the callback be called with its
// user_data; progress is only ever reported from the calling thread (CPU
// fills and the GPU submitter both run there).
unsafe impl Sync for CCallback {}

/// File bytes done across every phase, reported as one fraction.
struct Reporter {
    callback: Option<CCallback>,
    total: u64,
    /// Bytes of phases already finished.
    base: AtomicU64,
    cancel: AtomicBool,
}

impl Reporter {
    fn report(&self, phase_done: u64) {
        if let Some(cb) = &self.callback {
            let done = self.base.load(Ordering::Relaxed) + phase_done;
            let frac = if self.total == 0 { 1.0 } else { (done as f64 / self.total as f64).min(1.0) as f32 };
            // SAFETY: see CCallback.
            if !unsafe { (cb.f)(frac, cb.user_data) } {
                self.cancel.store(true, Ordering::Relaxed);
            }
        }
    }

    fn finish_phase(&self, bytes: u64) {
        self.base.fetch_add(bytes, Ordering::Relaxed);
    }
}

struct Validated<'r> {
    req: &'r WsLoadRequest,
    output: Output,
    src_bytes: u64,
}

/// A destination fits `bytes` of output for tensor `name`: its size,
/// pointer, alignment and memory kind.
fn check_destination(name: &str, bytes: usize, dst: &WsDestination) -> Result<(), Failure> {
    let invalid = |m: String| Failure::new(WsStatus::InvalidArgument, m);
    if dst.size != bytes {
        return Err(invalid(format!("tensor '{name}' takes {bytes} bytes, its destination holds {}", dst.size)));
    }
    if bytes > 0 && dst.data.is_null() {
        return Err(invalid(format!("tensor '{name}': destination data is NULL")));
    }
    match dst.memory {
        WS_MEMORY_HOST if (dst.data as usize) % 2 != 0 => Err(invalid(format!("tensor '{name}': host destination is not 2-byte aligned"))),
        WS_MEMORY_HOST => Ok(()),
        WS_MEMORY_CUDA if dst.device < 0 => Err(invalid(format!("tensor '{name}': CUDA device {}", dst.device))),
        WS_MEMORY_CUDA => Ok(()),
        m => Err(invalid(format!("tensor '{name}': unknown ws_memory {m}"))),
    }
}

impl Checkpoint {
    fn validate<'r>(&self, reqs: &'r [WsLoadRequest]) -> Result<Vec<Validated<'r>>, Failure> {
        reqs.iter()
            .map(|r| {
                let (output, bytes) = self.output(r.index, r.dtype)?;
                let e = self.entry(r.index)?;
                check_destination(&e.name.to_string_lossy(), bytes, &r.dst)?;
                let t = &self.cat().tensors[e.tensor];
                Ok(Validated { req: r, output, src_bytes: t.nbytes })
            })
            .collect()
    }

    /// Rows `rows` and columns `cols` of tensor `index`'s matrix view as
    /// BF16 into `dst`: only those bytes are read.
    ///
    /// # Safety
    /// As for `load`.
    pub(crate) unsafe fn load_slice(&self, index: usize, rows: Range<u64>, cols: Range<u64>, dst: &WsDestination) -> Result<(), Failure> {
        let Output::Dequant(j, _) = self.output(index, WS_DTYPE_BF16)?.0 else { unreachable!("BF16 output is always a dequant job") };
        let job = self.plan.jobs[j].slice(rows, cols)?;
        check_destination(&job.name, job.out_bytes() as usize, dst)?;
        match dst.memory {
            WS_MEMORY_HOST => {
                // SAFETY: size checked equal to the slice's BF16 bytes and
                // 2-byte alignment checked; validity is the caller's contract.
                let out = unsafe { std::slice::from_raw_parts_mut(dst.data as *mut u16, job.n_elems as usize) };
                self.loader.fill_host(&job, out, Control::default())?;
            }
            _ => {
                let gpu = self.gpu(dst.device as usize)?;
                let plan = Plan { jobs: vec![job], skipped: vec![] };
                // SAFETY: destination and stream per the contract.
                unsafe { gpu.load_into(self.cat(), &plan, &[dst.data as u64], dst.stream as u64, Control::default(), |_| Ok(()))? };
            }
        }
        Ok(())
    }

    /// BF16 bytes of that slice (an error if it is outside the tensor).
    pub(crate) fn slice_nbytes(&self, index: usize, rows: Range<u64>, cols: Range<u64>) -> Result<usize, Failure> {
        let Output::Dequant(j, _) = self.output(index, WS_DTYPE_BF16)?.0 else { unreachable!("BF16 output is always a dequant job") };
        Ok(self.plan.jobs[j].slice(rows, cols)?.out_bytes() as usize)
    }

    /// Serve `reqs`.
    ///
    /// # Safety
    /// Every destination's data pointer holds `size` writable bytes of the
    /// memory it names (host, or device memory of that CUDA device's primary
    /// context), alive and otherwise unused until this returns; streams are
    /// live streams of that context; the callback is callable with user_data.
    pub(crate) unsafe fn load(&self, reqs: &[WsLoadRequest], progress: WsProgressCallback, user_data: *mut c_void) -> Result<(), Failure> {
        let v = self.validate(reqs)?;
        let reporter = Reporter {
            callback: progress.map(|f| CCallback { f, user_data }),
            total: v.iter().map(|x| x.src_bytes).sum(),
            base: AtomicU64::new(0),
            cancel: AtomicBool::new(false),
        };
        let report = |p: Progress| reporter.report(p.bytes_done);
        let control = Control { progress: Some(&report), cancel: Some(&reporter.cancel) };

        // Host requests, in order.
        for x in v.iter().filter(|x| x.req.dst.memory == WS_MEMORY_HOST) {
            control.check()?;
            match x.output {
                Output::Dequant(j, out) => {
                    let job = &Job { out, ..self.plan.jobs[j].clone() };
                    // SAFETY: size checked equal to the job's 2-byte elements and
                    // 2-byte alignment checked; validity is the caller's contract.
                    let dst = unsafe { std::slice::from_raw_parts_mut(x.req.dst.data as *mut u16, job.n_elems as usize) };
                    self.loader.fill_host(job, dst, control)?;
                }
                Output::Raw(t) => {
                    let info = &self.cat().tensors[t];
                    // SAFETY: size checked equal to the stored bytes.
                    let dst = unsafe { std::slice::from_raw_parts_mut(x.req.dst.data as *mut u8, info.nbytes as usize) };
                    self.loader.read_raw(t, dst, control)?;
                }
            }
            reporter.finish_phase(x.src_bytes);
        }

        // Device requests: raw copies one by one, dequant grouped per (device, stream).
        let mut groups: BTreeMap<(i32, usize), Vec<&Validated>> = BTreeMap::new();
        for x in v.iter().filter(|x| x.req.dst.memory == WS_MEMORY_CUDA) {
            match x.output {
                Output::Raw(t) => {
                    control.check()?;
                    // SAFETY: device memory of that size per the contract.
                    unsafe { self.loader.copy_raw_to_device(x.req.dst.device as usize, t, x.req.dst.data as u64)? };
                    reporter.finish_phase(x.src_bytes);
                    reporter.report(0);
                }
                Output::Dequant(..) => groups.entry((x.req.dst.device, x.req.dst.stream as usize)).or_default().push(x),
            }
        }
        for ((device, stream), xs) in groups {
            let gpu = self.gpu(device as usize)?;
            let jobs = xs
                .iter()
                .map(|x| match x.output {
                    Output::Dequant(j, out) => Job { out, ..self.plan.jobs[j].clone() },
                    Output::Raw(_) => unreachable!("only dequant requests are grouped"),
                })
                .collect();
            let plan = Plan { jobs, skipped: vec![] };
            let ptrs: Vec<u64> = xs.iter().map(|x| x.req.dst.data as u64).collect();
            // NULL is the legacy default stream: waited for like any other.
            let stream = stream as u64;
            // SAFETY: destinations and stream per the contract.
            unsafe { gpu.load_into(self.cat(), &plan, &ptrs, stream, control, |_| Ok(()))? };
            reporter.finish_phase(plan.src_bytes());
        }
        Ok(())
    }
}
