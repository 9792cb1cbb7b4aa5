//! How much of a file is in the page cache, and evicting it.
//!
//! `auto` decides between page-cache reads and direct I/O on this measured
//! fact rather than on a guess: a warm file is fastest from memory, a cold
//! one fastest without the page cache's copy.

use std::fs::File;
use std::io;

/// Files up to this many pages (64 MiB) are checked page by page.
const FULL_CHECK_PAGES: usize = 1 << 14;
/// Larger files: this many windows spread evenly over the file...
const WINDOWS: usize = 256;
/// ...of this many pages (256 KiB) each. mincore walks the page cache page
/// by page (120-190 ns a page on this 2-core machine under load): the
/// 1024-page windows this had before checked 1 GiB of pages for every file
/// over 256 MiB, 37-56 ms of each open of a 1 GB GGUF (median 49 ms of 21
/// runs), against 1.6-10 ms (median 1.9) now: docs/PERFORMANCE.md, "Opening
/// a checkpoint touches only its headers".
const WINDOW_PAGES: usize = 64;

/// The fraction (0 to 1) of `file`'s pages resident in the page cache,
/// measured with `mincore(2)` on a fresh mapping (mapping faults nothing in).
/// Files over 64 MiB are sampled: 256 windows of 256 KiB. An empty file
/// counts as cached: there is nothing to read.
#[cfg(target_os = "linux")]
pub fn cached_fraction(file: &File) -> io::Result<f64> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(1.0);
    }
    // SAFETY: a read-only private mapping that is never dereferenced here:
    // only its addresses are passed to mincore.
    let map = unsafe { memmap2::MmapOptions::new().map(file)? };
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
    let pages = map.len().div_ceil(page);
    let windows: Vec<(usize, usize)> = if pages <= FULL_CHECK_PAGES {
        vec![(0, pages)]
    } else {
        (0..WINDOWS).map(|k| (k * (pages - WINDOW_PAGES) / (WINDOWS - 1), WINDOW_PAGES)).collect()
    };
    let mut vec = vec![0u8; windows.iter().map(|w| w.1).max().unwrap_or(0)];
    let (mut resident, mut checked) = (0usize, 0usize);
    for (first, n) in windows {
        let bytes = (n * page).min(map.len() - first * page);
        // SAFETY: [first * page, first * page + bytes) lies inside the
        // mapping, whose start is page-aligned; vec holds one byte per page.
        let rc = unsafe { libc::mincore(map.as_ptr().add(first * page) as *mut libc::c_void, bytes, vec.as_mut_ptr()) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        resident += vec[..n].iter().filter(|&&b| b & 1 != 0).count();
        checked += n;
    }
    Ok(resident as f64 / checked.max(1) as f64)
}

#[cfg(not(target_os = "linux"))]
pub fn cached_fraction(_file: &File) -> io::Result<f64> {
    Err(io::Error::new(io::ErrorKind::Unsupported, "page-cache residency is measured on Linux only"))
}

/// Ask the kernel to drop `file`'s clean pages from the page cache
/// (`posix_fadvise(POSIX_FADV_DONTNEED)`): a cold-cache benchmark without
/// root. Pages another process has mapped or dirtied stay.
#[cfg(target_os = "linux")]
pub fn evict(file: &File) -> io::Result<()> {
    use std::os::unix::io::AsRawFd;
    // SAFETY: the descriptor is open for the duration of the call.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
pub fn evict(_file: &File) -> io::Result<()> {
    Err(io::Error::new(io::ErrorKind::Unsupported, "evicting the page cache is Linux-only"))
}
