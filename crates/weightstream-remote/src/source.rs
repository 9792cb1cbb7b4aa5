//! One remote object as a [`ByteSource`]: every read is a set of ranged
//! GETs pinned to the version seen when the object was opened, cut into
//! parts fetched in parallel; header reads are served from a cached head
//! that grows by doubling, so a header costs a few round trips.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::stream::{self, StreamExt, TryStreamExt};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectMeta, ObjectStore};
use weightstream_io::{ByteSource, Fetched};

use crate::cache::Cached;
use crate::error::{RemoteError, RemoteErrorKind};
use crate::options::RemoteOptions;
pub use crate::pin::{gone_is_changed, proves_pin, Pin};
use crate::store::classify;

/// What every remote source of this process fetched (the sum of their
/// [`ByteSource::fetched`]): a worker's egress over all its opens, for
/// [`fetched_total`].
static PROCESS_BYTES: AtomicU64 = AtomicU64::new(0);
static PROCESS_GETS: AtomicU64 = AtomicU64::new(0);

/// What this process's remote sources have fetched from their stores since
/// it started: ranged GETs' body bytes and the GETs sent. A vLLM worker
/// reports the difference over its load, which counts every open (a
/// quantization check, the load itself), not one checkpoint's.
pub fn fetched_total() -> Fetched {
    Fetched { bytes: PROCESS_BYTES.load(Ordering::Relaxed), requests: PROCESS_GETS.load(Ordering::Relaxed) }
}

/// First head fetch (the header parsers read 64 KiB at a time), and the
/// largest the head grows to, by 4x steps: a 4 MiB GGUF header (a large
/// vocabulary) costs 5 round trips, a safetensors header one or two.
pub const HEAD_FIRST: u64 = 64 << 10;
pub const HEAD_MAX: u64 = 64 << 20;
const HEAD_GROWTH: u64 = 4;

pub struct RemoteSource {
    store: Arc<dyn ObjectStore>,
    location: ObjectPath,
    object: String,
    path: PathBuf,
    len: u64,
    pin: Pin,
    opts: RemoteOptions,
    permits: Arc<tokio::sync::Semaphore>,
    head: Mutex<Vec<u8>>,
    /// Set once the checkpoint is open: the head stops growing, and data
    /// reads fetch exactly their ranges (a tensor-parallel rank its slices).
    sealed: AtomicBool,
    /// The last read failure, typed (the format crate keeps only its text).
    failure: Mutex<Option<RemoteError>>,
    /// Where fetched bytes are kept and read again (cache.rs), if asked.
    cache: Option<Cached>,
    note: String,
    name: &'static str,
    /// Bytes received and GETs sent, for [`ByteSource::fetched`].
    got_bytes: AtomicU64,
    gets: AtomicU64,
}

impl RemoteSource {
    /// `meta` is the object's HEAD or listing entry: its size and version
    /// are what every read is checked against.
    pub fn new(
        store: Arc<dyn ObjectStore>,
        location: ObjectPath,
        object: String,
        meta: &ObjectMeta,
        opts: &RemoteOptions,
        name: &'static str,
    ) -> Self {
        let pin = Pin::of(meta);
        let pinned = match (&pin.version, &pin.e_tag) {
            (Some(_), _) => "version id",
            (None, Some(_)) => "ETag",
            (None, None) => "modification time",
        };
        let cache = Cached::of(opts.cache.as_ref(), name, &object, &pin, meta.size);
        let note = format!(
            "up to {} ranged GETs of {} KiB in flight, each pinned to the object's {pinned}{}",
            opts.concurrency,
            opts.part_size >> 10,
            if cache.is_some() { ", through the local cache" } else { "" }
        );
        RemoteSource {
            store,
            location,
            path: PathBuf::from(&object),
            object,
            len: meta.size,
            pin,
            opts: opts.clone(),
            permits: Arc::new(tokio::sync::Semaphore::new(opts.concurrency.max(1))),
            head: Mutex::new(Vec::new()),
            sealed: AtomicBool::new(false),
            failure: Mutex::new(None),
            cache,
            note,
            name,
            got_bytes: AtomicU64::new(0),
            gets: AtomicU64::new(0),
        }
    }

    /// One part: a ranged GET, retried (with backoff) when its body breaks
    /// off or comes back short; object_store retries the request itself.
    async fn fetch_part(&self, offset: u64, dst: &mut [u8]) -> Result<(), RemoteError> {
        let range = offset..offset + dst.len() as u64;
        let mut attempt = 0usize;
        loop {
            let _permit = self
                .permits
                .acquire()
                .await
                .map_err(|_| RemoteError::new(RemoteErrorKind::Server, &self.object, "reads were shut down"))?;
            self.gets.fetch_add(1, Ordering::Relaxed);
            PROCESS_GETS.fetch_add(1, Ordering::Relaxed);
            let err = match self.store.get_opts(&self.location, self.pin.get_options(Some(range.clone()))).await {
                Err(e) => gone_is_changed(&self.pin, classify(&self.object, &e)),
                Ok(got) => {
                    if let Some(changed) = self.changed(&got.meta) {
                        return Err(changed);
                    }
                    match self.stream_into(got, dst).await {
                        Ok(()) => return Ok(()),
                        Err(e) => RemoteError::new(e.kind, &self.object, format!("bytes {}..{}: {}", range.start, range.end, e.reason)),
                    }
                }
            };
            let retryable = matches!(err.kind, RemoteErrorKind::Truncated);
            if !retryable || attempt >= self.opts.retries {
                return Err(err);
            }
            attempt += 1;
            tokio::time::sleep(Duration::from_millis(100 << attempt.min(4))).await;
        }
    }

    /// The body of `got` straight into `dst`, chunk by chunk (no whole-body
    /// buffer): exactly `dst.len()` bytes, or `Truncated`.
    async fn stream_into(&self, got: object_store::GetResult, dst: &mut [u8]) -> Result<(), RemoteError> {
        let mut body = got.into_stream();
        let mut at = 0usize;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| {
                let c = classify(&self.object, &e);
                // A body that breaks off is a short body, retried as one.
                let kind = if c.kind == RemoteErrorKind::Server { RemoteErrorKind::Truncated } else { c.kind };
                RemoteError::new(kind, &self.object, c.reason)
            })?;
            self.got_bytes.fetch_add(chunk.len() as u64, Ordering::Relaxed);
            PROCESS_BYTES.fetch_add(chunk.len() as u64, Ordering::Relaxed);
            let end = at + chunk.len();
            let Some(d) = dst.get_mut(at..end) else {
                return Err(RemoteError::new(
                    RemoteErrorKind::Truncated,
                    &self.object,
                    format!("the server sent more than the {} bytes asked for", dst.len()),
                ));
            };
            d.copy_from_slice(&chunk);
            at = end;
        }
        if at != dst.len() {
            return Err(RemoteError::new(RemoteErrorKind::Truncated, &self.object, format!("the server sent {at} of {} bytes", dst.len())));
        }
        Ok(())
    }

    /// The object's new version, if `meta` (of a GET) does not prove it is
    /// the pinned one. Servers that ignore `If-Match` and
    /// `If-Unmodified-Since` exist (static file servers, some gateways), so
    /// every answer is checked here, not trusted to the precondition.
    fn changed(&self, meta: &ObjectMeta) -> Option<RemoteError> {
        proves_pin(&self.pin, self.len, meta).err().map(|why| RemoteError::new(RemoteErrorKind::Changed, &self.object, why))
    }

    /// `buf` from `offset`, as parts fetched in parallel: `part_size` each
    /// at most, and two at least for a read of 2 MiB or more, so that the
    /// GPU ring's 4 MiB reads still keep two GETs in flight each.
    fn fetch(&self, offset: u64, buf: &mut [u8]) -> Result<(), RemoteError> {
        let part = split_part(buf.len(), self.opts.part_size);
        let parts = buf.chunks_mut(part).enumerate().map(|(i, c)| (offset + (i * part) as u64, c));
        // Stopped when the caller asks (cancel.rs): a header read of an open,
        // or a load's data, waiting on a server that does not answer.
        crate::cancel::request(self.opts.cancel_flag(), &self.object, async {
            stream::iter(parts.map(Ok)).try_for_each_concurrent(self.opts.concurrency.max(1), |(at, dst)| self.fetch_part(at, dst)).await
        })
    }

    /// [`RemoteSource::fetch`] through the local cache, if there is one.
    fn fetch_through(&self, offset: u64, buf: &mut [u8]) -> Result<(), RemoteError> {
        match &self.cache {
            Some(c) => c.read_through(offset, buf, self.opts.cancel_flag(), |at, dst| self.fetch(at, dst)),
            None => self.fetch(offset, buf),
        }
    }

    /// The last read failure, if any.
    pub fn failure(&self) -> Option<RemoteError> {
        self.failure.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Headers are parsed: from now on the head only serves reads inside it.
    pub fn seal(&self) {
        self.sealed.store(true, Ordering::Release);
    }

    /// Serve `offset..offset + buf.len()` from the head, growing it while
    /// the checkpoint is being opened and the read starts inside it (header
    /// parsing); once open, a read that starts inside the head takes what
    /// the head holds and fetches only the rest. `false` when the read
    /// starts past the head (once open) or past what the head may grow to.
    fn read_head(&self, offset: u64, buf: &mut [u8]) -> Result<bool, RemoteError> {
        let end = offset + buf.len() as u64;
        let mut head = self.head.lock().unwrap_or_else(|p| p.into_inner());
        let have = head.len() as u64;
        if end > have && offset < have && self.sealed.load(Ordering::Acquire) {
            // A data read that starts inside the head (the first tensors of
            // a file): its first bytes are here already; fetch the rest.
            let (held, rest) = buf.split_at_mut((have - offset) as usize);
            held.copy_from_slice(&head[offset as usize..]);
            drop(head);
            self.fetch_through(have, rest)?;
            return Ok(true);
        }
        if end > have {
            if self.sealed.load(Ordering::Acquire) || offset > have || end > HEAD_MAX.min(self.len) {
                return Ok(false);
            }
            let want = end.max(have * HEAD_GROWTH).clamp(HEAD_FIRST, HEAD_MAX).min(self.len);
            let mut more = vec![0u8; (want - have) as usize];
            self.fetch_through(have, &mut more)?;
            head.extend_from_slice(&more);
        }
        buf.copy_from_slice(&head[offset as usize..end as usize]);
        Ok(true)
    }
}

impl ByteSource for RemoteSource {
    fn path(&self) -> &Path {
        &self.path
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let end = offset.checked_add(buf.len() as u64).filter(|&e| e <= self.len);
        if end.is_none() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("read of {} bytes at {offset} passes the end ({} bytes)", buf.len(), self.len),
            ));
        }
        if buf.is_empty() {
            return Ok(());
        }
        let r = match self.read_head(offset, buf) {
            Ok(true) => Ok(()),
            Ok(false) => self.fetch_through(offset, buf),
            Err(e) => Err(e),
        };
        r.map_err(|e| {
            *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.clone());
            e.into_io()
        })
    }

    fn name(&self) -> &'static str {
        self.name
    }

    fn note(&self) -> Option<&str> {
        Some(&self.note)
    }

    fn read_ahead(&self) -> bool {
        true
    }

    fn fetched(&self) -> Option<Fetched> {
        Some(Fetched { bytes: self.got_bytes.load(Ordering::Relaxed), requests: self.gets.load(Ordering::Relaxed) })
    }

    /// Two full parts per read: each reader keeps two GETs in flight.
    fn read_size(&self) -> Option<usize> {
        Some(self.opts.part_size.saturating_mul(2))
    }
}

/// Bytes per part of a read of `len` bytes: `part_size` at most, half the
/// read (rounded up to 64 KiB) for reads from 2 MiB up to two parts.
fn split_part(len: usize, part_size: usize) -> usize {
    let part = part_size.max(1);
    if len >= 2 << 20 && len < 2 * part {
        return len.div_ceil(2).next_multiple_of(64 << 10).min(part);
    }
    part
}

#[cfg(test)]
mod tests {
    use super::split_part;

    #[test]
    fn reads_split_into_parts() {
        const MIB: usize = 1 << 20;
        // The CPU ring's remote reads (two parts of 8 MiB) and the GPU ring's
        // 4 MiB reads (two of 2 MiB, as before the 8 MiB default).
        assert_eq!(split_part(16 * MIB, 8 * MIB), 8 * MIB);
        assert_eq!(split_part(4 * MIB, 8 * MIB), 2 * MIB);
        assert_eq!(split_part(3 * MIB + 1, 8 * MIB), 3 * MIB / 2 + (64 << 10));
        // Small reads (headers) are one GET; a set part size is a ceiling.
        assert_eq!(split_part(64 << 10, 8 * MIB), 8 * MIB);
        assert_eq!(split_part(100 * MIB, 8 * MIB), 8 * MIB);
        assert_eq!(split_part(4 * MIB, 1000), 1000);
    }
}
