//! How remote reads run: parallelism, part size, retries and timeouts.
//! Defaults suit S3 and a fast link; `WEIGHTSTREAM_REMOTE_*` variables
//! override them for every front.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// Remote read settings.
#[derive(Debug, Clone)]
pub struct RemoteOptions {
    /// Ranged GETs in flight per object at most.
    pub concurrency: usize,
    /// Bytes per ranged GET at most: a read is cut into parts this size
    /// (and into two at least, when it is 2 MiB or more), fetched in
    /// parallel.
    pub part_size: usize,
    /// Retries of one request (5xx, SlowDown, reset, timeout).
    pub retries: usize,
    /// No retry starts this long after the first try.
    pub retry_timeout: Duration,
    pub connect_timeout: Duration,
    /// No byte for this long ends the request (then it is retried).
    pub read_timeout: Duration,
    /// A whole request takes at most this long.
    pub request_timeout: Duration,
    /// The local cache reads go through, if any (cache.rs).
    pub cache: Option<crate::cache::CacheConfig>,
    /// Set by the caller to stop: every request then gives up with
    /// `Cancelled` (cancel.rs). Shared, since the sources an open makes
    /// outlive the call that made them.
    pub cancel: Option<Arc<AtomicBool>>,
}

pub const DEFAULT_CONCURRENCY: usize = 16;
/// As boto3's transfer manager and AWS's guidance for ranged GETs: a
/// request costs the server as much as megabytes of data (measured:
/// docs/PERFORMANCE.md, "Loads from object storage").
pub const DEFAULT_PART_SIZE: usize = 8 << 20;

impl Default for RemoteOptions {
    fn default() -> Self {
        RemoteOptions {
            concurrency: DEFAULT_CONCURRENCY,
            part_size: DEFAULT_PART_SIZE,
            retries: 5,
            retry_timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(5),
            read_timeout: Duration::from_secs(20),
            request_timeout: Duration::from_secs(120),
            cache: None,
            cancel: None,
        }
    }
}

impl RemoteOptions {
    /// The flag that stops this operation's requests, if any.
    pub fn cancel_flag(&self) -> Option<&AtomicBool> {
        self.cancel.as_deref()
    }

    /// The defaults, with `WEIGHTSTREAM_REMOTE_CONCURRENCY`,
    /// `_PART_SIZE` (bytes), `_RETRIES` and `_TIMEOUT` (seconds without a
    /// byte) applied where set, and the cache of `WEIGHTSTREAM_CACHE_DIR`;
    /// a value that does not parse is an error.
    pub fn from_env() -> Result<RemoteOptions, String> {
        let mut o = RemoteOptions::default();
        let get = |name: &str| -> Result<Option<u64>, String> {
            match std::env::var(name) {
                Ok(v) => v.trim().parse::<u64>().map(Some).map_err(|_| format!("{name}={v}: not a whole number")),
                Err(_) => Ok(None),
            }
        };
        if let Some(v) = get("WEIGHTSTREAM_REMOTE_CONCURRENCY")? {
            o.concurrency = (v as usize).clamp(1, 256);
        }
        if let Some(v) = get("WEIGHTSTREAM_REMOTE_PART_SIZE")? {
            o.part_size = (v as usize).clamp(64 << 10, 256 << 20);
        }
        if let Some(v) = get("WEIGHTSTREAM_REMOTE_RETRIES")? {
            o.retries = v.min(20) as usize;
        }
        if let Some(v) = get("WEIGHTSTREAM_REMOTE_TIMEOUT")? {
            o.read_timeout = Duration::from_secs(v.clamp(1, 3600));
        }
        o.cache = crate::cache::CacheConfig::from_env()?;
        Ok(o)
    }
}
