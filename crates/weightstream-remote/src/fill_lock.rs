//! One filler per byte range of a cache entry, across processes (issue 59
//! item 4): two loads that start together with one cache directory
//! (data-parallel replicas, two servers on one machine) once both fetched
//! every byte, since each found the entry empty. Now a load about to
//! fetch a missing range first holds an exclusive open-file-description
//! lock (`F_OFD_SETLK`) on that range of the entry file; a second load
//! wanting any of it waits, then finds the bytes recorded (cache_entry.rs
//! records a fill at once, provisionally) and reads them from disk instead.
//!
//! Why these locks: they are per open file description, so threads of one
//! process that open the entry separately exclude each other too, and the
//! kernel drops them when the holder's file closes, a killed process
//! included: a waiter then finds what the dead filler recorded (only
//! complete writes are recorded) and fetches the rest itself. A lock is
//! held only while its range is fetched and written, and a thread never
//! waits while holding one, so no two loads can wait on each other.
//! Waiting polls (every few milliseconds, up to 50) so that a cancelled
//! load stops waiting.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// An exclusive lock on a byte range of an entry file, released on drop.
pub struct RangeLock {
    _file: File,
}

/// What a try at the lock found.
enum Try {
    Held(RangeLock),
    Busy,
    /// The file or the filesystem cannot take the lock.
    Unsupported,
}

fn try_lock(path: &Path, start: u64, end: u64) -> Try {
    let Ok(file) = File::options().read(true).write(true).open(path) else { return Try::Unsupported };
    let (Ok(l_start), Ok(l_len)) = (i64::try_from(start), i64::try_from(end.saturating_sub(start))) else { return Try::Unsupported };
    // SAFETY: `flock` is a plain C struct; all-zero is a valid value
    // (F_OFD_* requires l_pid == 0), and the fields are set below.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = l_start;
    fl.l_len = l_len;
    // SAFETY: fcntl(F_OFD_SETLK) reads the `flock` this frame owns, on a
    // descriptor `file` keeps open for the call.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &fl) } == 0 {
        return Try::Held(RangeLock { _file: file });
    }
    match io::Error::last_os_error().raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EACCES) | Some(libc::EINTR) => Try::Busy,
        _ => Try::Unsupported,
    }
}

impl RangeLock {
    /// `[start, end)` of the entry file at `path`, once no other filler
    /// holds any of it. `None` (fill without coordination, as a cache on a
    /// filesystem without these locks always did) when the lock cannot be
    /// taken there, or when `cancel` is set while waiting.
    pub fn acquire(path: &Path, start: u64, end: u64, cancel: Option<&AtomicBool>) -> Option<RangeLock> {
        let mut wait = Duration::from_millis(2);
        loop {
            match try_lock(path, start, end) {
                Try::Held(l) => return Some(l),
                Try::Unsupported => return None,
                Try::Busy if cancel.is_some_and(|c| c.load(Ordering::Relaxed)) => return None,
                Try::Busy => {
                    std::thread::sleep(wait);
                    wait = (wait * 2).min(Duration::from_millis(50));
                }
            }
        }
    }

    /// The lock if it is free now (tests).
    pub fn try_acquire(path: &Path, start: u64, end: u64) -> Option<RangeLock> {
        match try_lock(path, start, end) {
            Try::Held(l) => Some(l),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_ranges_exclude_each_other_until_dropped() {
        let d = std::env::temp_dir().join(format!("ws-fill-lock-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let path = d.join("entry");
        std::fs::write(&path, vec![0u8; 1000]).unwrap();
        let a = RangeLock::try_acquire(&path, 100, 200).expect("a free range");
        // Another open of the file, in this very process: excluded too.
        assert!(RangeLock::try_acquire(&path, 150, 250).is_none());
        assert!(RangeLock::try_acquire(&path, 0, 101).is_none());
        let b = RangeLock::try_acquire(&path, 200, 300).expect("adjacent, not overlapping");
        drop(a);
        assert!(RangeLock::try_acquire(&path, 150, 199).is_some());
        // A cancelled waiter gives up rather than waiting on b.
        let cancel = AtomicBool::new(true);
        assert!(RangeLock::acquire(&path, 250, 260, Some(&cancel)).is_none());
        drop(b);
        assert!(RangeLock::acquire(&path, 250, 260, Some(&cancel)).is_some());
        std::fs::remove_dir_all(d).unwrap();
    }
}
