//! One cached object version: a single file holding the object's bytes
//! at their own offsets (sparse: only what was fetched takes disk), then
//! an identity block, then a log of the byte ranges known to be there.
//!
//! ```text
//! [0, len)                 the object's bytes (holes where never fetched)
//! [len, len + ID_BLOCK)    b"WSCACHE1", u32 length, identity (URL, version, size)
//! [len + ID_BLOCK, ..)     records of 24 bytes: start, end, check (u64 LE)
//! ```
//!
//! Why one file: data and log cannot come from two incarnations of an
//! entry (an eviction racing a refill), which two files could.
//! Crash safety: bytes are written, `fdatasync`ed, and only then is their
//! range recorded; a kill mid-write leaves bytes no record names, and a
//! torn record fails its check. Only recorded ranges are ever served (by
//! another handle; this one also serves what it wrote and has yet to
//! record). Records are written once [`SYNC_EVERY`] bytes wait, and when
//! the handle closes: one `fdatasync` per 64 MiB, not per read (a sync
//! per 4 MiB read made a loopback load 80% slower); a kill loses at most
//! that much of what was fetched, to be fetched again.
//! Concurrency: two processes filling one entry write identical bytes
//! (one version of one object) at the same offsets, and append records
//! under an exclusive `flock`, so records never interleave. Each fill is
//! also recorded at once, provisionally: a record whose check holds this
//! boot's id, valid until the machine restarts. A write another process
//! can read survives its writer's death, and only a kernel crash or power
//! loss (a new boot id) loses unsynced bytes, so another load on this
//! machine may read them at once (fill_lock.rs: the one that waited for
//! the filler), while after a restart only synced, durable records count.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Mutex;

/// Bytes reserved for the identity after the data.
pub const ID_BLOCK: u64 = 4096;
const MAGIC: &[u8; 8] = b"WSCACHE1";
const RECORD: u64 = 24;
/// Bytes written before their ranges are synced and recorded.
pub const SYNC_EVERY: u64 = 64 << 20;

/// FNV-1a, 64-bit: a stable hash (std's may change between releases, and
/// names on disk must not), used for entry names and record checks.
pub fn fnv64(seed: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(seed, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

fn record(start: u64, end: u64) -> [u8; RECORD as usize] {
    record_with(start, end, 0x5753_4341_4348_4531)
}

/// A record of unsynced bytes, valid on the boot whose id hashes to `boot`.
fn provisional(start: u64, end: u64, boot: u64) -> [u8; RECORD as usize] {
    record_with(start, end, 0x5753_5052_4f56_4953 ^ boot)
}

fn record_with(start: u64, end: u64, key: u64) -> [u8; RECORD as usize] {
    let mut r = [0u8; RECORD as usize];
    r[..8].copy_from_slice(&start.to_le_bytes());
    r[8..16].copy_from_slice(&end.to_le_bytes());
    let check = fnv64(FNV_OFFSET, &r[..16]) ^ key;
    r[16..].copy_from_slice(&check.to_le_bytes());
    r
}

/// This boot's id, hashed (Linux: /proc/sys/kernel/random/boot_id); `None`
/// where there is none, and then no provisional record is written or read.
fn boot() -> Option<u64> {
    static BOOT: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *BOOT.get_or_init(|| std::fs::read("/proc/sys/kernel/random/boot_id").ok().map(|id| fnv64(FNV_OFFSET, id.trim_ascii())))
}

/// The identity block: magic, length, identity, zero padding.
pub fn id_block(identity: &str) -> Option<Vec<u8>> {
    let mut b = Vec::with_capacity(ID_BLOCK as usize);
    b.extend_from_slice(MAGIC);
    b.extend_from_slice(&u32::try_from(identity.len()).ok()?.to_le_bytes());
    b.extend_from_slice(identity.as_bytes());
    (b.len() as u64 <= ID_BLOCK).then(|| {
        b.resize(ID_BLOCK as usize, 0);
        b
    })
}

/// Sorted, disjoint, non-adjacent byte ranges.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Ranges(Vec<(u64, u64)>);

impl Ranges {
    pub fn insert(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        let (mut s, mut e) = (start, end);
        // Every range touching [s, e) merges into it.
        self.0.retain(|&(a, b)| {
            let touches = a <= e && s <= b;
            if touches {
                s = s.min(a);
                e = e.max(b);
            }
            !touches
        });
        let at = self.0.partition_point(|&(a, _)| a < s);
        self.0.insert(at, (s, e));
    }

    /// `[start, end)` cut into pieces, each `true` where recorded.
    pub fn pieces(&self, start: u64, end: u64) -> Vec<(u64, u64, bool)> {
        let mut out = Vec::new();
        let mut at = start;
        for &(a, b) in &self.0 {
            if b <= at || at >= end {
                continue;
            }
            if a >= end {
                break;
            }
            if a > at {
                out.push((at, a, false));
            }
            let stop = b.min(end);
            out.push((at.max(a), stop, true));
            at = stop;
        }
        if at < end {
            out.push((at, end, false));
        }
        out
    }

    pub fn covers(&self, start: u64, end: u64) -> bool {
        start >= end || self.0.iter().any(|&(a, b)| a <= start && end <= b)
    }
}

/// An open entry: its file and the ranges read from its log so far.
pub struct Entry {
    file: File,
    len: u64,
    log: Mutex<LogState>,
}

#[derive(Default)]
struct LogState {
    ranges: Ranges,
    /// Where the next unread record starts.
    scanned: u64,
    /// Written by this handle, not yet synced and recorded.
    pending: Vec<(u64, u64)>,
    pending_bytes: u64,
}

impl Entry {
    /// `file` holds `identity` for an object of `len` bytes, or `None`
    /// (another object's entry, or not an entry at all).
    pub fn check(file: File, len: u64, identity: &str) -> io::Result<Option<Entry>> {
        let want = id_block(identity).ok_or_else(|| io::Error::other("identity too long"))?;
        let mut got = vec![0u8; ID_BLOCK as usize];
        if file.metadata()?.len() < len + ID_BLOCK || file.read_exact_at(&mut got, len).is_err() || got != want {
            return Ok(None);
        }
        let entry = Entry { file, len, log: Mutex::new(LogState { scanned: len + ID_BLOCK, ..Default::default() }) };
        entry.refresh()?;
        Ok(Some(entry))
    }

    /// Read records appended since the last scan (other processes fill the
    /// same entry: tensor-parallel ranks, a concurrent load).
    fn refresh(&self) -> io::Result<()> {
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        // Shared: never a record another process is appending, half written.
        self.file.lock_shared()?;
        let read = (|| {
            let size = self.file.metadata()?.len();
            let mut buf = vec![0u8; size.saturating_sub(log.scanned) as usize];
            self.file.read_exact_at(&mut buf, log.scanned)?;
            Ok::<_, io::Error>(buf)
        })();
        self.file.unlock()?;
        let buf = read?;
        for r in buf.chunks_exact(RECORD as usize) {
            let start = u64::from_le_bytes(r[..8].try_into().expect("8 bytes"));
            let end = u64::from_le_bytes(r[8..16].try_into().expect("8 bytes"));
            // A torn or zeroed record (a kill mid-append) names nothing, nor
            // does a provisional one of another boot.
            let valid = r == record(start, end) || boot().is_some_and(|b| r == provisional(start, end, b));
            if valid && end <= self.len {
                log.ranges.insert(start, end);
            }
        }
        log.scanned += buf.len() as u64 / RECORD * RECORD;
        Ok(())
    }

    /// `[start, end)` cut into recorded (`true`) and missing pieces; the
    /// log is re-read first when the range is not all recorded.
    pub fn pieces(&self, start: u64, end: u64) -> Vec<(u64, u64, bool)> {
        let covered = self.log.lock().unwrap_or_else(|p| p.into_inner()).ranges.covers(start, end);
        if !covered {
            let _ = self.refresh();
        }
        self.log.lock().unwrap_or_else(|p| p.into_inner()).ranges.pieces(start, end)
    }

    /// Recorded bytes at `offset`.
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }

    /// `data`, fetched from `offset`, written; recorded once synced
    /// ([`SYNC_EVERY`], [`Entry::flush`]).
    pub fn fill(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let end = offset + data.len() as u64;
        if end > self.len || data.is_empty() {
            return Ok(());
        }
        self.file.write_all_at(data, offset)?;
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(b) = boot() {
            self.append(&provisional(offset, end, b))?;
        }
        log.ranges.insert(offset, end);
        log.pending.push((offset, end));
        log.pending_bytes += data.len() as u64;
        if log.pending_bytes >= SYNC_EVERY {
            self.record(&mut log)?;
        }
        Ok(())
    }

    /// Sync and record what this handle wrote.
    pub fn flush(&self) -> io::Result<()> {
        self.record(&mut self.log.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The pending ranges, made durable, then appended as records. The
    /// mutex (held by the caller) orders this process's threads (flock is
    /// per open file, so it would let them both in); flock orders processes.
    fn record(&self, log: &mut LogState) -> io::Result<()> {
        if log.pending.is_empty() {
            return Ok(());
        }
        self.file.sync_data()?;
        let records: Vec<u8> = log.pending.iter().flat_map(|&(a, b)| record(a, b)).collect();
        self.append(&records)?;
        log.pending.clear();
        log.pending_bytes = 0;
        Ok(())
    }

    /// `records` appended to the log under the exclusive flock (the caller
    /// holds the log mutex, which orders this process's threads).
    fn append(&self, records: &[u8]) -> io::Result<()> {
        self.file.lock()?;
        let appended = (|| {
            let size = self.file.metadata()?.len();
            // Past a torn record, at the next record boundary.
            let base = self.len + ID_BLOCK;
            let at = base + (size.max(base) - base).div_ceil(RECORD) * RECORD;
            self.file.write_all_at(records, at)
        })();
        self.file.unlock()?;
        appended
    }
}

/// What this handle wrote is recorded as it closes.
impl Drop for Entry {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_merge_and_cut() {
        let mut r = Ranges::default();
        r.insert(10, 20);
        r.insert(30, 40);
        r.insert(20, 25);
        assert_eq!(r.0, vec![(10, 25), (30, 40)]);
        assert_eq!(r.pieces(0, 50), vec![(0, 10, false), (10, 25, true), (25, 30, false), (30, 40, true), (40, 50, false)]);
        assert_eq!(r.pieces(12, 14), vec![(12, 14, true)]);
        assert!(r.covers(31, 40) && !r.covers(24, 31));
        r.insert(0, 100);
        assert_eq!(r.0, vec![(0, 100)]);
    }

    fn entry(dir: &std::path::Path, len: u64) -> File {
        let path = dir.join("e");
        let f = File::options().read(true).write(true).create(true).truncate(true).open(path).unwrap();
        f.set_len(len + ID_BLOCK).unwrap();
        f.write_all_at(&id_block("s3://b/k etag").unwrap(), len).unwrap();
        f
    }

    fn tmp(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("ws-cache-entry-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn only_recorded_bytes_are_served_and_torn_records_are_not() {
        let d = tmp("torn");
        let f = entry(&d, 100);
        let e = Entry::check(f.try_clone().unwrap(), 100, "s3://b/k etag").unwrap().unwrap();
        e.fill(0, &[7u8; 40]).unwrap();
        e.flush().unwrap();
        // Bytes written without a record (a kill before the record).
        f.write_all_at(&[9u8; 20], 50).unwrap();
        // A torn record: half of one, then a whole one after it.
        let size = f.metadata().unwrap().len();
        f.write_all_at(&record(50, 70)[..10], size).unwrap();
        let again = Entry::check(f.try_clone().unwrap(), 100, "s3://b/k etag").unwrap().unwrap();
        assert_eq!(again.pieces(0, 100), vec![(0, 40, true), (40, 100, false)]);
        again.fill(60, &[1u8; 10]).unwrap();
        again.flush().unwrap();
        let third = Entry::check(f, 100, "s3://b/k etag").unwrap().unwrap();
        assert_eq!(third.pieces(0, 100), vec![(0, 40, true), (40, 60, false), (60, 70, true), (70, 100, false)]);
        let mut buf = [0u8; 10];
        third.read(60, &mut buf).unwrap();
        assert_eq!(buf, [1u8; 10]);
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn a_fill_is_served_to_other_handles_at_once_on_this_boot_only() {
        let d = tmp("provisional");
        let f = entry(&d, 100);
        let a = Entry::check(f.try_clone().unwrap(), 100, "s3://b/k etag").unwrap().unwrap();
        a.fill(10, &[3u8; 10]).unwrap();
        // Not synced, yet recorded for this boot: another handle serves it.
        let b = Entry::check(f.try_clone().unwrap(), 100, "s3://b/k etag").unwrap().unwrap();
        assert_eq!(b.pieces(0, 30), vec![(0, 10, false), (10, 20, true), (20, 30, false)]);
        // A provisional record of another boot (before a restart) is not.
        let size = f.metadata().unwrap().len();
        f.write_all_at(&provisional(40, 50, boot().unwrap() ^ 1), size).unwrap();
        let c = Entry::check(f, 100, "s3://b/k etag").unwrap().unwrap();
        assert_eq!(c.pieces(40, 50), vec![(40, 50, false)]);
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn another_identity_or_a_short_file_is_not_an_entry() {
        let d = tmp("identity");
        let f = entry(&d, 100);
        assert!(Entry::check(f.try_clone().unwrap(), 100, "s3://b/k other-etag").unwrap().is_none());
        assert!(Entry::check(f.try_clone().unwrap(), 101, "s3://b/k etag").unwrap().is_none());
        f.set_len(50).unwrap();
        assert!(Entry::check(f, 100, "s3://b/k etag").unwrap().is_none());
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn another_handle_sees_new_records() {
        let d = tmp("share");
        let f = entry(&d, 100);
        let a = Entry::check(f.try_clone().unwrap(), 100, "s3://b/k etag").unwrap().unwrap();
        let b = Entry::check(f, 100, "s3://b/k etag").unwrap().unwrap();
        a.fill(10, &[3u8; 10]).unwrap();
        assert_eq!(a.pieces(10, 20), vec![(10, 20, true)], "served by the handle that wrote it");
        assert_eq!(b.pieces(10, 20), vec![(10, 20, true)], "and by another, on this boot");
        a.flush().unwrap();
        assert_eq!(b.pieces(0, 30), vec![(0, 10, false), (10, 20, true), (20, 30, false)]);
        std::fs::remove_dir_all(d).unwrap();
    }
}
