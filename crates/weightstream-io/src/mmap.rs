//! A memory-mapped file: zero-copy on the CPU path, the page cache does the I/O.

use std::fs::File;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::source::{check_range, ByteSource};

pub struct MmapSource {
    path: PathBuf,
    map: memmap2::Mmap,
    note: Option<String>,
}

impl MmapSource {
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = File::open(path)?;
        // SAFETY: the mapping is read-only and private to this process. Another
        // process truncating the file while it is mapped would make reads of
        // the lost pages fault (SIGBUS): that is why mmap must be asked for
        // and `auto` never picks it (docs/robustness.md).
        let map = unsafe { memmap2::MmapOptions::new().map(&file)? };
        Ok(MmapSource { path: path.to_path_buf(), map, note: None })
    }

    pub fn with_note(mut self, note: String) -> Self {
        self.note = Some(note);
        self
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
            let _ = self.map.advise_range(memmap2::Advice::WillNeed, range.start as usize, (range.end - range.start) as usize);
        }
    }
    fn name(&self) -> &'static str {
        "mmap"
    }
    fn note(&self) -> Option<&str> {
        self.note.as_deref()
    }
}
