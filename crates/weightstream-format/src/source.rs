//! Byte sources: where a checkpoint's bytes come from.
//!
//! Readers only ever see a [`ByteSource`]: its length, positioned reads, and
//! (where the source can) a zero-copy view of a range. Opening a checkpoint
//! reads just its headers through this trait, so a 100 GB file costs a few
//! pages to open.

use std::fs::File;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A random-access, read-only sequence of bytes with a name.
pub trait ByteSource: Send + Sync {
    /// The file this source reads, for error messages.
    fn path(&self) -> &Path;
    /// Total length in bytes.
    fn len(&self) -> u64;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Fill `buf` from `offset`. Fails with `UnexpectedEof` past the end.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    /// A zero-copy view of `range`, where the source holds the bytes in
    /// memory (mmap). `None` means: use `read_at`.
    fn slice(&self, _range: Range<u64>) -> Option<&[u8]> {
        None
    }
    /// A hint that `range` will be read soon, in order. Default: nothing.
    fn will_need(&self, _range: Range<u64>) {}
}

pub type SharedSource = Arc<dyn ByteSource>;

/// How tensor bytes are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SourceKind {
    /// Positioned reads (`pread`). The default: a file that shrinks while it
    /// is being loaded gives a read error naming file, tensor and offset.
    #[default]
    Read,
    /// Memory-mapped: zero-copy on the CPU path. A file truncated by another
    /// process during the load makes the kernel send SIGBUS, which kills the
    /// process; choose it only for files nothing else writes.
    Mmap,
}

impl SourceKind {
    pub const NAMES: &'static [&'static str] = &["read", "mmap"];

    pub fn name(self) -> &'static str {
        match self {
            SourceKind::Read => "read",
            SourceKind::Mmap => "mmap",
        }
    }

    pub fn parse(s: &str) -> Option<SourceKind> {
        match s {
            "read" => Some(SourceKind::Read),
            "mmap" => Some(SourceKind::Mmap),
            _ => None,
        }
    }

    pub fn open(self, path: &Path) -> io::Result<SharedSource> {
        Ok(match self {
            SourceKind::Read => Arc::new(FileSource::open(path)?),
            SourceKind::Mmap => Arc::new(MmapSource::open(path)?),
        })
    }
}

fn check_range(len: u64, offset: u64, n: usize) -> io::Result<Range<usize>> {
    let end = offset.checked_add(n as u64).filter(|&e| e <= len).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("read of {n} bytes at {offset} passes the end ({len} bytes)"),
        )
    })?;
    Ok(offset as usize..end as usize)
}

/// A memory-mapped file: the default source (the page cache does the I/O).
pub struct MmapSource {
    path: PathBuf,
    map: memmap2::Mmap,
}

impl MmapSource {
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = File::open(path)?;
        // SAFETY: the mapping is read-only and private to this process. Another
        // process truncating the file while it is mapped would make reads of
        // the lost pages fault (SIGBUS): that is why `SourceKind::Read` is the
        // default and mmap must be asked for (docs/robustness.md).
        let map = unsafe { memmap2::MmapOptions::new().map(&file)? };
        Ok(MmapSource { path: path.to_path_buf(), map })
    }
}

impl ByteSource for MmapSource {
    fn path(&self) -> &Path {
        &self.path
    }
    fn len(&self) -> u64 {
        self.map.len() as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let r = check_range(self.len(), offset, buf.len())?;
        buf.copy_from_slice(&self.map[r]);
        Ok(())
    }
    fn slice(&self, range: Range<u64>) -> Option<&[u8]> {
        if range.start > range.end || range.end > self.len() {
            return None;
        }
        Some(&self.map[range.start as usize..range.end as usize])
    }
    fn will_need(&self, range: Range<u64>) {
        if range.start < range.end && range.end <= self.len() {
            // Advice only: a failure changes nothing but speed.
            let _ = self.map.advise_range(
                memmap2::Advice::WillNeed,
                range.start as usize,
                (range.end - range.start) as usize,
            );
        }
    }
}

/// Positioned reads (`pread`) on an open file: no mapping, so a file that
/// shrinks under us yields an error instead of a fault.
pub struct FileSource {
    path: PathBuf,
    file: File,
    len: u64,
}

impl FileSource {
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        Ok(FileSource { path: path.to_path_buf(), file, len })
    }
}

impl ByteSource for FileSource {
    fn path(&self) -> &Path {
        &self.path
    }
    fn len(&self) -> u64 {
        self.len
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        check_range(self.len, offset, buf.len())?;
        read_exact_at(&self.file, offset, buf)
    }
}

#[cfg(unix)]
fn read_exact_at(file: &File, offset: u64, buf: &mut [u8]) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    file.read_exact_at(buf, offset)
}

#[cfg(not(unix))]
fn read_exact_at(file: &File, mut offset: u64, mut buf: &mut [u8]) -> io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !buf.is_empty() {
        let n = file.seek_read(buf, offset)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf = &mut buf[n..];
        offset += n as u64;
    }
    Ok(())
}

/// Bytes held in memory: for tests and for callers that already have them.
pub struct MemorySource {
    path: PathBuf,
    bytes: Vec<u8>,
}

impl MemorySource {
    pub fn new(path: impl Into<PathBuf>, bytes: Vec<u8>) -> Self {
        MemorySource { path: path.into(), bytes }
    }
}

impl ByteSource for MemorySource {
    fn path(&self) -> &Path {
        &self.path
    }
    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let r = check_range(self.len(), offset, buf.len())?;
        buf.copy_from_slice(&self.bytes[r]);
        Ok(())
    }
    fn slice(&self, range: Range<u64>) -> Option<&[u8]> {
        if range.start > range.end || range.end > self.len() {
            return None;
        }
        Some(&self.bytes[range.start as usize..range.end as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_bounds_checked() {
        let s = MemorySource::new("m", vec![1, 2, 3, 4]);
        let mut b = [0u8; 2];
        s.read_at(2, &mut b).unwrap();
        assert_eq!(b, [3, 4]);
        assert!(s.read_at(3, &mut b).is_err());
        assert!(s.read_at(u64::MAX, &mut b).is_err());
        assert!(s.slice(3..5).is_none());
        assert!(s.slice(3..2).is_none());
    }
}
