//! Direct I/O: `O_DIRECT` reads that bypass the page cache.
//!
//! A cold checkpoint read through the page cache costs a copy per byte and
//! evicts whatever else was cached; `O_DIRECT` moves the bytes from the
//! drive straight into our (aligned) staging buffers. The kernel demands
//! that offsets, lengths and buffer addresses be multiples of the logical
//! block size; tensor data is only 8 (safetensors) or 32 (GGUF) byte aligned,
//! so [`read_staged`](ByteSource::read_staged) reads the enclosing
//! [`DIRECT_ALIGN`] range and hands back the bytes past the skew. At the end
//! of the file the kernel returns the partial last block short, which is
//! what we want.
//!
//! Small reads (headers, FP8 scales) go through a second, buffered handle:
//! one 4 KiB device read per 8-byte header field would be absurd.

use std::fs::File;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::aligned::{align_down, align_up, AlignedBuf, DIRECT_ALIGN};
use crate::file::read_exact_at;
use crate::source::{check_range, staging_too_small, ByteSource, GdsUse};

/// Reads shorter than this go through the page cache.
pub const SMALL_READ: usize = 64 << 10;
/// Piece size of `read_at` into unaligned memory (through a bounce buffer).
const BOUNCE_BYTES: usize = 8 << 20;
/// Bounce buffers kept for reuse (one per concurrent reader, typically).
const BOUNCE_KEPT: usize = 8;

pub struct DirectSource {
    path: PathBuf,
    direct: File,
    buffered: File,
    len: u64,
    gds: GdsUse,
    note: Option<String>,
    bounce: Mutex<Vec<AlignedBuf>>,
}

/// The outcome of asking for direct I/O on a file.
pub enum DirectOpen {
    Opened(DirectSource),
    /// The filesystem does not do `O_DIRECT` (tmpfs before Linux 6.6, some
    /// network and FUSE filesystems): why, for the log.
    Refused(String),
}

/// `open(2)` with `O_DIRECT`.
pub fn open_o_direct(path: &Path) -> io::Result<File> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(path)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = path;
        Err(io::Error::new(io::ErrorKind::Unsupported, "O_DIRECT is Linux-only in this build"))
    }
}

/// Errors that mean "this filesystem does not do direct I/O".
fn is_refusal(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::Unsupported || matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::EOPNOTSUPP))
}

impl DirectSource {
    pub fn open(path: &Path) -> io::Result<DirectOpen> {
        Self::open_with(path, &open_o_direct)
    }

    /// [`open`](Self::open) with the `O_DIRECT` open supplied (tests use it to
    /// stand in for a filesystem that refuses).
    pub fn open_with(path: &Path, open_direct: &dyn Fn(&Path) -> io::Result<File>) -> io::Result<DirectOpen> {
        let buffered = File::open(path)?;
        let len = buffered.metadata()?.len();
        let direct = match open_direct(path) {
            Ok(f) => f,
            Err(e) if is_refusal(&e) => return Ok(DirectOpen::Refused(format!("the filesystem refuses O_DIRECT opens ({e})"))),
            Err(e) => return Err(e),
        };
        // Some filesystems accept the open and refuse the reads, or want a
        // larger alignment than ours: find out now, on one block.
        if len > 0 {
            let mut probe = AlignedBuf::new(DIRECT_ALIGN).ok_or_else(out_of_memory)?;
            match read_direct(&direct, 0, probe.as_mut_slice()) {
                Ok(_) => {}
                Err(e) if is_refusal(&e) => return Ok(DirectOpen::Refused(format!("the filesystem refuses O_DIRECT reads ({e})"))),
                Err(e) => return Err(e),
            }
        }
        Ok(DirectOpen::Opened(DirectSource {
            path: path.to_path_buf(),
            direct,
            buffered,
            len,
            gds: GdsUse::Never,
            note: None,
            bounce: Mutex::new(Vec::new()),
        }))
    }

    pub fn with_gds(mut self, gds: GdsUse) -> Self {
        self.gds = gds;
        self
    }

    pub fn with_note(mut self, note: Option<String>) -> Self {
        self.note = note;
        self
    }

    fn take_bounce(&self) -> io::Result<AlignedBuf> {
        let kept = self.bounce.lock().unwrap_or_else(|p| p.into_inner()).pop();
        match kept {
            Some(b) => Ok(b),
            None => AlignedBuf::new(BOUNCE_BYTES + 2 * DIRECT_ALIGN).ok_or_else(out_of_memory),
        }
    }

    fn give_bounce(&self, b: AlignedBuf) {
        let mut kept = self.bounce.lock().unwrap_or_else(|p| p.into_inner());
        if kept.len() < BOUNCE_KEPT {
            kept.push(b);
        }
    }
}

fn out_of_memory() -> io::Error {
    io::Error::new(io::ErrorKind::OutOfMemory, "cannot allocate a direct-I/O buffer")
}

/// Read into `buf` (aligned address and length) from `offset` (aligned) until
/// it is full or the file ends; returns the bytes read.
fn read_direct(file: &File, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
    use std::os::unix::fs::FileExt;
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => {
                got += n;
                // Only the last block of the file comes back short.
                if n % DIRECT_ALIGN != 0 {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

impl ByteSource for DirectSource {
    fn path(&self) -> &Path {
        &self.path
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        check_range(self.len, offset, buf.len())?;
        if buf.len() < SMALL_READ {
            return read_exact_at(&self.buffered, offset, buf);
        }
        let mut bounce = self.take_bounce()?;
        let mut done = 0;
        while done < buf.len() {
            let n = BOUNCE_BYTES.min(buf.len() - done);
            let r = self.read_staged(offset + done as u64, n, bounce.as_mut_slice())?;
            buf[done..done + n].copy_from_slice(&bounce.as_slice()[r]);
            done += n;
        }
        self.give_bounce(bounce);
        Ok(())
    }

    fn staged_len(&self, offset: u64, len: usize) -> usize {
        if len == 0 {
            return 0;
        }
        let end = offset.saturating_add(len as u64);
        (align_up(end) - align_down(offset)) as usize
    }

    fn read_staged(&self, offset: u64, len: usize, buf: &mut [u8]) -> io::Result<Range<usize>> {
        check_range(self.len, offset, len)?;
        if len == 0 {
            return Ok(0..0);
        }
        let start = align_down(offset);
        let need = self.staged_len(offset, len);
        if buf.len() < need {
            return Err(staging_too_small(need, buf.len()));
        }
        if buf.as_ptr() as usize % DIRECT_ALIGN != 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "direct-I/O staging buffer is not 4 KiB aligned"));
        }
        let got = read_direct(&self.direct, start, &mut buf[..need])?;
        let skew = (offset - start) as usize;
        if got < skew + len {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the file ends at {} while reading {len} bytes at {offset} (did it shrink?)", start + got as u64),
            ));
        }
        Ok(skew..skew + len)
    }

    fn name(&self) -> &'static str {
        match self.gds {
            GdsUse::Always => "gds",
            _ => "direct",
        }
    }

    fn note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    fn direct_file(&self) -> Option<(&File, GdsUse)> {
        Some((&self.direct, self.gds))
    }
}
