//! The byte-source trait.

use std::fs::File;
use std::io;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

/// What a GPU load may do with a source's `O_DIRECT` file descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GdsUse {
    /// Read through pinned host staging (`--source direct`).
    Never,
    /// Read with cuFile straight into device memory (`--source gds`).
    Always,
    /// cuFile where the nvidia-fs driver gives real peer-to-peer DMA, else
    /// host staging (`--source auto` chose direct for a cold file).
    IfNative,
}

/// What a source fetched from a remote store since it was opened: the
/// bytes of the ranged GETs' bodies as received (retried parts counted
/// again; local cache hits not at all) and the GETs sent. What a fleet
/// operator pays as egress, where the plan's byte count is only what the
/// load asked for (issue 59).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Fetched {
    pub bytes: u64,
    pub requests: u64,
}

impl std::ops::Add for Fetched {
    type Output = Fetched;
    fn add(self, o: Fetched) -> Fetched {
        Fetched { bytes: self.bytes + o.bytes, requests: self.requests + o.requests }
    }
}

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
    /// Bytes of staging buffer [`read_staged`](Self::read_staged) needs for
    /// `len` bytes at `offset`: `len`, or the enclosing aligned range for
    /// direct I/O.
    fn staged_len(&self, _offset: u64, len: usize) -> usize {
        len
    }
    /// Read `len` bytes at `offset` into `buf`, a staging buffer aligned to
    /// [`DIRECT_ALIGN`](crate::DIRECT_ALIGN) and at least
    /// [`staged_len`](Self::staged_len) long; returns where in `buf` the
    /// bytes are. Direct I/O reads the enclosing aligned range and skips the
    /// skew, so the range need not start at 0.
    fn read_staged(&self, offset: u64, len: usize, buf: &mut [u8]) -> io::Result<Range<usize>> {
        let have = buf.len();
        let dst = buf.get_mut(..len).ok_or_else(|| staging_too_small(len, have))?;
        self.read_at(offset, dst)?;
        Ok(0..len)
    }
    /// What this source is, for reports: `read`, `mmap`, `direct`, `gds`,
    /// `memory`.
    fn name(&self) -> &'static str {
        "custom"
    }
    /// Why this source is the one reading: set when `auto` chose it or when
    /// it stands in for one the filesystem refused.
    fn note(&self) -> Option<&str> {
        None
    }
    /// Whether this source stands in for the one asked for, which the
    /// filesystem refused (then `note` says why): fronts warn about these
    /// and only inform about the others.
    fn fallback(&self) -> bool {
        false
    }
    /// What this source fetched from a remote store so far; `None` for
    /// local sources (files, mappings, memory).
    fn fetched(&self) -> Option<Fetched> {
        None
    }
    /// Whether loads should read this source ahead in the ring of large
    /// reads ([`ordered`](crate::ordered)) rather than piece by piece from
    /// each dequantization thread: sources whose every read is costly
    /// (direct I/O, object storage). Default: direct I/O sources.
    fn read_ahead(&self) -> bool {
        self.direct_file().is_some()
    }
    /// Bytes per read-ahead read this source needs to run at full speed,
    /// where that is more than the CPU ring's default slot: object storage
    /// costs the server a request per ranged GET, and at 2 MiB parts a
    /// SeaweedFS server spent twice the CPU of 8 MiB parts on the same
    /// bytes (docs/PERFORMANCE.md, "Loads from object storage"). The CPU
    /// ring takes it when no slot size was asked for. Default: none.
    fn read_size(&self) -> Option<usize> {
        None
    }
    /// The file opened with `O_DIRECT`, and whether GPU loads may hand it to
    /// cuFile.
    fn direct_file(&self) -> Option<(&File, GdsUse)> {
        None
    }
}

pub type SharedSource = Arc<dyn ByteSource>;

pub(crate) fn staging_too_small(need: usize, have: usize) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("staging buffer of {have} bytes is smaller than the {need} bytes to read"))
}

/// `offset..offset + n` as indices, or `UnexpectedEof` when it passes `len`.
pub(crate) fn check_range(len: u64, offset: u64, n: usize) -> io::Result<Range<usize>> {
    let end = offset.checked_add(n as u64).filter(|&e| e <= len).ok_or_else(|| {
        io::Error::new(io::ErrorKind::UnexpectedEof, format!("read of {n} bytes at {offset} passes the end ({len} bytes)"))
    })?;
    Ok(offset as usize..end as usize)
}
