//! The local cache of remote reads (opt-in: `WEIGHTSTREAM_CACHE_DIR`,
//! `--cache DIR`, `cache=`): the bytes a load fetches are written into an
//! entry as they arrive, and a later load of the same object version reads
//! them from local disk. An entry is one file (cache_entry.rs) named by a
//! hash of the object's identity: its URL (no query), the endpoint it was
//! read from, the pinned version (ETag, version id or GCS generation) and
//! its size. A new version is a new name, so it is fetched afresh; the old
//! one ages out. Objects pinned by modification time alone (an HTTP server
//! without ETags) are never cached: nothing proves two reads saw one version.
//!
//! Least recently used entries (by file modification time, set on every
//! open and write) are removed past `WEIGHTSTREAM_CACHE_MAX_BYTES` of disk
//! taken (default: no limit). Removal is an unlink: a process still reading
//! the entry keeps its open file; one still filling it fills a file no one
//! will find, which costs only the disk until it closes.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use crate::cache_entry::{fnv64, id_block, Entry, ID_BLOCK};
use crate::fill_lock::RangeLock;
use crate::pin::Pin;

/// Where the cache is, and how much disk it may take.
#[derive(Debug, Clone, PartialEq)]
pub struct CacheConfig {
    pub dir: PathBuf,
    /// Bytes of disk all entries may take together; `None`: no limit.
    pub max_bytes: Option<u64>,
}

pub const DIR_VAR: &str = "WEIGHTSTREAM_CACHE_DIR";
pub const MAX_VAR: &str = "WEIGHTSTREAM_CACHE_MAX_BYTES";
const SUFFIX: &str = "wsc";
/// Temporary files older than this were left by a killed process.
const STALE_TMP: Duration = Duration::from_secs(600);

impl CacheConfig {
    /// From `WEIGHTSTREAM_CACHE_DIR` and `WEIGHTSTREAM_CACHE_MAX_BYTES`;
    /// `None` when no directory is set.
    pub fn from_env() -> Result<Option<CacheConfig>, String> {
        let Some(dir) = std::env::var_os(DIR_VAR).filter(|d| !d.is_empty()) else { return Ok(None) };
        Ok(Some(CacheConfig { dir: PathBuf::from(dir), max_bytes: max_from_env()? }))
    }

    /// `dir`, with the size limit the environment sets.
    pub fn at(dir: impl Into<PathBuf>) -> Result<CacheConfig, String> {
        Ok(CacheConfig { dir: dir.into(), max_bytes: max_from_env()? })
    }
}

fn max_from_env() -> Result<Option<u64>, String> {
    match std::env::var(MAX_VAR) {
        Ok(v) => v.trim().parse::<u64>().map(Some).map_err(|_| format!("{MAX_VAR}={v}: not a whole number of bytes")),
        Err(_) => Ok(None),
    }
}

/// The endpoint settings that tell two stores with the same bucket names
/// apart (never a credential: the identity is written into the entry).
fn endpoint(kind: &str) -> String {
    let vars: &[&str] = match kind {
        "s3" => &["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT"],
        "gcs" => &["GOOGLE_BASE_URL", "STORAGE_EMULATOR_HOST"],
        "azure" => &["AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_ENDPOINT", "AZURITE_BLOB_STORAGE_URL"],
        _ => &[],
    };
    vars.iter().filter_map(|v| std::env::var(v).ok().map(|x| format!("{v}={x}"))).collect::<Vec<_>>().join(" ")
}

/// What an entry is of: `None` when the pin proves no version (no ETag, no
/// version id).
pub fn identity(kind: &str, object: &str, pin: &Pin, len: u64) -> Option<String> {
    let version = match (&pin.version, &pin.e_tag) {
        (Some(v), _) => format!("version {v}"),
        (None, Some(e)) => format!("etag {e}"),
        (None, None) => return None,
    };
    Some(format!("{object}\n{}\n{version}\nsize {len}", endpoint(kind)))
}

/// The entry's file name: 128 bits of hash of the identity (two FNV-1a
/// seeds); the identity inside the file is checked on open, so a collision
/// serves nothing wrong.
pub fn file_name(identity: &str) -> String {
    let a = fnv64(0xcbf2_9ce4_8422_2325, identity.as_bytes());
    let b = fnv64(0x6c62_272e_07bb_0142, identity.as_bytes());
    format!("{a:016x}{b:016x}.{SUFFIX}")
}

/// Entries this process has open: never evicted by it.
/// Counted: two sources of one process may hold one entry.
fn in_use() -> &'static Mutex<HashMap<PathBuf, usize>> {
    static IN_USE: OnceLock<Mutex<HashMap<PathBuf, usize>>> = OnceLock::new();
    IN_USE.get_or_init(Default::default)
}

/// Bytes this process wrote since its last eviction pass.
static WRITTEN: AtomicU64 = AtomicU64::new(0);

/// An open entry of the cache, kept from eviction by this process while
/// it lives.
pub struct Cached {
    entry: Entry,
    path: PathBuf,
    config: CacheConfig,
}

impl Cached {
    /// The entry for `identity` (an object of `len` bytes) in the cache,
    /// made if absent; `None` when the object is larger than the whole
    /// cache may be, or the directory cannot be used (the load then reads
    /// from the store alone).
    pub fn open(config: &CacheConfig, identity: &str, len: u64) -> Option<Cached> {
        if config.max_bytes.is_some_and(|m| len > m) {
            return None;
        }
        let path = config.dir.join(file_name(identity));
        let entry = open_entry(&config.dir, &path, identity, len).ok()?;
        *in_use().lock().unwrap_or_else(|p| p.into_inner()).entry(path.clone()).or_default() += 1;
        let cached = Cached { entry, path, config: config.clone() };
        evict(config);
        Some(cached)
    }

    /// The entry of the object `object` (a store of `kind`) of `len` bytes
    /// pinned to `pin`, in `config`'s cache if there is one.
    pub fn of(config: Option<&CacheConfig>, kind: &str, object: &str, pin: &Pin, len: u64) -> Option<Cached> {
        Cached::open(config?, &identity(kind, object, pin, len)?, len)
    }

    pub fn entry(&self) -> &Entry {
        &self.entry
    }

    /// `buf` from `offset`: the recorded pieces read from the entry, the
    /// rest from `fetch` and written into the entry. A missing piece is
    /// fetched by one process at a time (fill_lock.rs): a load that finds
    /// another filling it waits, then reads what that one recorded and
    /// fetches only what is still missing. The cache is best effort: a
    /// piece it cannot read is fetched, a fill that fails (a full disk)
    /// costs only a later load's speed, a lock it cannot take (another
    /// filesystem, a cancelled wait) lets the load fetch as if alone.
    pub fn read_through<E>(
        &self,
        offset: u64,
        buf: &mut [u8],
        cancel: Option<&AtomicBool>,
        mut fetch: impl FnMut(u64, &mut [u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        for (start, end, recorded) in self.entry.pieces(offset, offset + buf.len() as u64) {
            let dst = &mut buf[(start - offset) as usize..(end - offset) as usize];
            if recorded && self.entry.read(start, dst).is_ok() {
                continue;
            }
            let _lock = RangeLock::acquire(&self.path, start, end, cancel);
            // What another filler recorded while this one waited.
            for (s, e, recorded) in self.entry.pieces(start, end) {
                let part = &mut dst[(s - start) as usize..(e - start) as usize];
                if recorded && self.entry.read(s, part).is_ok() {
                    continue;
                }
                fetch(s, part)?;
                let _ = self.fill(s, part);
            }
        }
        Ok(())
    }

    /// [`Entry::fill`], then an eviction pass once this process has written
    /// an eighth of the limit since the last.
    pub fn fill(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.entry.fill(offset, data)?;
        if let Some(max) = self.config.max_bytes {
            let written = WRITTEN.fetch_add(data.len() as u64, Ordering::Relaxed) + data.len() as u64;
            if written >= max / 8 {
                WRITTEN.store(0, Ordering::Relaxed);
                evict(&self.config);
            }
        }
        Ok(())
    }
}

/// The entry is free to go; what this load added may put the cache over
/// its limit.
impl Drop for Cached {
    fn drop(&mut self) {
        let mut in_use = in_use().lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = in_use.get_mut(&self.path) {
            *n -= 1;
            if *n == 0 {
                in_use.remove(&self.path);
            }
        }
        drop(in_use);
        evict(&self.config);
    }
}

/// Open `path` as the entry of `identity`, first making it when absent:
/// a temporary file gets the size and identity, then is hard-linked into
/// place (which never replaces an entry another process made meanwhile).
/// A file there that is not this entry (a torn creation, a collision) is
/// replaced by a fresh one.
fn open_entry(dir: &Path, path: &Path, identity: &str, len: u64) -> io::Result<Entry> {
    // A directory that cannot be made may still be there, read-only.
    let _ = std::fs::create_dir_all(dir);
    for attempt in 0..3 {
        match open_rw_or_ro(path) {
            Ok(file) => {
                let _ = file.set_modified(SystemTime::now());
                if let Some(entry) = Entry::check(file, len, identity)? {
                    return Ok(entry);
                }
                if attempt == 0 {
                    let tmp = fresh(dir, identity, len)?;
                    std::fs::rename(&tmp, path)?;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let tmp = fresh(dir, identity, len)?;
                match std::fs::hard_link(&tmp, path) {
                    Ok(()) => std::fs::remove_file(&tmp)?,
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => std::fs::remove_file(&tmp)?,
                    // A filesystem without hard links: a rename, which may
                    // replace an entry made meanwhile (its records are lost,
                    // never mixed in: it is another file).
                    Err(_) => std::fs::rename(&tmp, path)?,
                }
            }
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other("the cache entry was replaced while being opened"))
}

/// `path` for reading and writing, else for reading: a cache another user
/// filled, or on a read-only mount, still serves what it holds (fills and
/// touches then fail, and are ignored).
fn open_rw_or_ro(path: &Path) -> io::Result<File> {
    File::options().read(true).write(true).open(path).or_else(|e| match e.kind() {
        io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem => File::open(path),
        _ => Err(e),
    })
}

/// A new, empty entry in a temporary file of `dir`, synced.
fn fresh(dir: &Path, identity: &str, len: u64) -> io::Result<PathBuf> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_nanos();
    let tmp = dir.join(format!(".tmp.{}.{nanos}.{}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed)));
    let block = id_block(identity).ok_or_else(|| io::Error::other("identity too long for a cache entry"))?;
    let made = (|| {
        let f = File::options().read(true).write(true).create_new(true).open(&tmp)?;
        f.set_len(len + ID_BLOCK)?;
        std::os::unix::fs::FileExt::write_all_at(&f, &block, len)?;
        f.sync_all()
    })();
    match made {
        Ok(()) => Ok(tmp),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// Remove least recently used entries until the cache takes at most its
/// limit (entries this process has open are kept), and temporary files a
/// killed process left. Failures are ignored: another process may be
/// evicting the same files.
pub fn evict(config: &CacheConfig) {
    let Some(max) = config.max_bytes else { return };
    let Ok(dir) = std::fs::read_dir(&config.dir) else { return };
    let now = SystemTime::now();
    let mut entries: Vec<(SystemTime, PathBuf, u64)> = Vec::new();
    for e in dir.flatten() {
        let (path, Ok(meta)) = (e.path(), e.metadata()) else { continue };
        let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(".tmp.") {
            if now.duration_since(modified).is_ok_and(|age| age > STALE_TMP) {
                let _ = std::fs::remove_file(&path);
            }
        } else if name.ends_with(SUFFIX) {
            // Disk taken, not length: an entry is sparse until filled.
            entries.push((modified, path, meta.blocks() * 512));
        }
    }
    let mut total: u64 = entries.iter().map(|e| e.2).sum();
    entries.sort();
    let in_use = in_use().lock().unwrap_or_else(|p| p.into_inner()).clone();
    for (_, path, size) in entries {
        if total <= max {
            break;
        }
        if !in_use.contains_key(&path) && std::fs::remove_file(&path).is_ok() {
            total -= size;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pin(e_tag: Option<&str>, version: Option<&str>) -> Pin {
        Pin { e_tag: e_tag.map(Into::into), version: version.map(Into::into), last_modified: Default::default() }
    }

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ws-cache-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    /// A cache without a limit in a fresh directory.
    fn unbounded(name: &str) -> CacheConfig {
        CacheConfig { dir: tmp(name), max_bytes: None }
    }

    /// The entry of `identity`, all `len` bytes written and recorded.
    fn filled(config: &CacheConfig, identity: &str, len: u64) -> Cached {
        let c = Cached::open(config, identity, len).unwrap();
        c.fill(0, &vec![1u8; len as usize]).unwrap();
        c.entry().flush().unwrap();
        c
    }

    #[test]
    fn keys_differ_by_object_version_and_size_and_need_a_version() {
        let a = identity("http", "https://h/m.gguf", &pin(Some("\"1\""), None), 10).unwrap();
        let names: std::collections::HashSet<String> = [
            a.clone(),
            identity("http", "https://h/n.gguf", &pin(Some("\"1\""), None), 10).unwrap(),
            identity("http", "https://h/m.gguf", &pin(Some("\"2\""), None), 10).unwrap(),
            identity("http", "https://h/m.gguf", &pin(Some("\"1\""), None), 11).unwrap(),
            identity("http", "https://h/m.gguf", &pin(Some("\"1\""), Some("7")), 10).unwrap(),
        ]
        .iter()
        .map(|i| file_name(i))
        .collect();
        assert_eq!(names.len(), 5);
        assert_eq!(file_name(&a), file_name(&a.clone()));
        assert!(identity("http", "https://h/m.gguf", &pin(None, None), 10).is_none());
    }

    #[test]
    fn an_entry_is_shared_and_a_torn_one_is_replaced() {
        let config = unbounded("open");
        let dir = config.dir.clone();
        let a = filled(&config, "x etag 1", 100);
        let b = Cached::open(&config, "x etag 1", 100).unwrap();
        assert_eq!(b.entry().pieces(0, 100), vec![(0, 100, true)]);
        // A creation torn before its identity was written.
        std::fs::write(&b.path, b"").unwrap();
        let c = Cached::open(&config, "x etag 1", 100).unwrap();
        assert_eq!(c.entry().pieces(0, 100), vec![(0, 100, false)]);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "no temporary file left");
        drop((a, b, c));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn eviction_removes_the_least_recently_used_first() {
        let config = unbounded("evict");
        let dir = config.dir.clone();
        let mut paths = Vec::new();
        for (i, age) in [(0, 30u64), (1, 10), (2, 20)] {
            let c = filled(&config, &format!("obj{i} etag 1"), 64 << 10);
            let f = File::options().write(true).open(&c.path).unwrap();
            f.set_modified(SystemTime::now() - Duration::from_secs(age)).unwrap();
            paths.push(c.path.clone());
        }
        let one = std::fs::metadata(&paths[0]).unwrap().blocks() * 512;
        evict(&CacheConfig { dir: dir.clone(), max_bytes: Some(2 * one) });
        // obj0 was used longest ago.
        assert_eq!(paths.iter().map(|p| p.exists()).collect::<Vec<_>>(), vec![false, true, true]);
        evict(&CacheConfig { dir: dir.clone(), max_bytes: Some(one) });
        assert_eq!(paths.iter().map(|p| p.exists()).collect::<Vec<_>>(), vec![false, true, false]);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn an_entry_this_process_holds_is_kept_until_its_last_holder_closes() {
        let config = unbounded("held");
        let (a, b) = (filled(&config, "x etag 1", 100), filled(&config, "x etag 1", 100));
        let path = a.path.clone();
        let none = CacheConfig { dir: config.dir.clone(), max_bytes: Some(0) };
        drop(a);
        evict(&none);
        assert!(path.exists(), "still held by b");
        drop(b);
        evict(&none);
        assert!(!path.exists());
        std::fs::remove_dir_all(&config.dir).unwrap();
    }

    #[test]
    fn a_read_only_entry_still_serves_what_it_holds() {
        use std::os::unix::fs::PermissionsExt;
        let config = unbounded("ro");
        let a = filled(&config, "x etag 1", 10);
        std::fs::set_permissions(&a.path, std::fs::Permissions::from_mode(0o444)).unwrap();
        drop(a);
        let b = Cached::open(&config, "x etag 1", 10).unwrap();
        assert_eq!(b.entry().pieces(0, 10), vec![(0, 10, true)]);
        std::fs::remove_dir_all(&config.dir).unwrap();
    }

    #[test]
    fn an_object_larger_than_the_cache_is_not_cached() {
        let dir = tmp("large");
        assert!(Cached::open(&CacheConfig { dir: dir.clone(), max_bytes: Some(10) }, "x etag 1", 11).is_none());
        let _ = std::fs::remove_dir_all(dir);
    }
}
