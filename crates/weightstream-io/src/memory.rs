//! Bytes already in memory: for tests and callers that hold them.

use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::source::{check_range, ByteSource};

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
    fn name(&self) -> &'static str {
        "memory"
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
        #[allow(clippy::reversed_empty_ranges)] // a reversed range, on purpose
        let reversed = 3..2;
        assert!(s.slice(reversed).is_none());
    }

    #[test]
    fn staged_reads_need_room() {
        let s = MemorySource::new("m", vec![1, 2, 3, 4]);
        let mut small = [0u8; 1];
        assert_eq!(s.read_staged(1, 2, &mut small).unwrap_err().kind(), io::ErrorKind::InvalidInput);
        let mut b = [0u8; 4];
        let r = s.read_staged(1, 2, &mut b).unwrap();
        assert_eq!(&b[r], &[2, 3]);
    }
}
