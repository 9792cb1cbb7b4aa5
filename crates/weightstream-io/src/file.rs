//! Positioned reads (`pread`) through the page cache: no mapping, so a file
//! that shrinks under us yields an error instead of a fault.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use crate::source::{check_range, ByteSource};

pub struct FileSource {
    path: PathBuf,
    file: File,
    len: u64,
    note: Option<String>,
    /// Reading in place of a source the filesystem refused (direct I/O).
    fallback: bool,
}

impl FileSource {
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        Ok(FileSource { path: path.to_path_buf(), file, len, note: None, fallback: false })
    }

    pub fn with_note(mut self, note: String) -> Self {
        self.note = Some(note);
        self
    }

    /// This source stands in for one that was refused; `note` says why.
    pub fn as_fallback(mut self, note: String) -> Self {
        self.note = Some(note);
        self.fallback = true;
        self
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
    fn name(&self) -> &'static str {
        "read"
    }
    fn note(&self) -> Option<&str> {
        self.note.as_deref()
    }
    fn fallback(&self) -> bool {
        self.fallback
    }
}

#[cfg(unix)]
pub(crate) fn read_exact_at(file: &File, offset: u64, buf: &mut [u8]) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    file.read_exact_at(buf, offset)
}

#[cfg(not(unix))]
pub(crate) fn read_exact_at(file: &File, mut offset: u64, mut buf: &mut [u8]) -> io::Result<()> {
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
