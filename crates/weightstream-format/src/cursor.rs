//! A bounds-checked little-endian reader over a [`ByteSource`].
//!
//! Header parsing goes through here: every read is checked against the end of
//! the source, and every failure becomes a `Truncated` error at the exact
//! offset. Reads are buffered so that parsing a header of many small fields
//! costs a few large reads.

use crate::error::{ErrorKind, FormatError, Result};
use weightstream_io::ByteSource;

const BUF_SIZE: usize = 64 * 1024;

pub struct Cursor<'a> {
    src: &'a dyn ByteSource,
    pos: u64,
    buf: Vec<u8>,
    buf_start: u64,
}

impl<'a> Cursor<'a> {
    pub fn new(src: &'a dyn ByteSource, pos: u64) -> Self {
        Cursor { src, pos, buf: Vec::new(), buf_start: 0 }
    }

    pub fn pos(&self) -> u64 {
        self.pos
    }

    pub fn remaining(&self) -> u64 {
        self.src.len().saturating_sub(self.pos)
    }

    pub fn err(&self, at: u64, kind: ErrorKind) -> FormatError {
        FormatError::at(self.src.path(), at, kind)
    }

    fn truncated(&self, needed: u64) -> FormatError {
        self.err(self.pos, ErrorKind::Truncated { needed, available: self.remaining() })
    }

    /// Read exactly `out.len()` bytes and advance.
    pub fn read_into(&mut self, out: &mut [u8]) -> Result<()> {
        let n = out.len() as u64;
        if n > self.remaining() {
            return Err(self.truncated(n));
        }
        let mut done = 0usize;
        while done < out.len() {
            let buf_end = self.buf_start + self.buf.len() as u64;
            if self.pos < self.buf_start || self.pos >= buf_end {
                self.refill()?;
                continue;
            }
            let off = (self.pos - self.buf_start) as usize;
            let take = (self.buf.len() - off).min(out.len() - done);
            out[done..done + take].copy_from_slice(&self.buf[off..off + take]);
            done += take;
            self.pos += take as u64;
        }
        Ok(())
    }

    /// Read `n` bytes onto the end of `out` and advance: [`Self::read_into`]
    /// without zero-filling the room first (packed string arrays grow one
    /// buffer by hundreds of thousands of short strings).
    pub fn append_to(&mut self, out: &mut Vec<u8>, n: u64) -> Result<()> {
        if n > self.remaining() {
            return Err(self.truncated(n));
        }
        let end = out.len() + n as usize;
        while out.len() < end {
            let buf_end = self.buf_start + self.buf.len() as u64;
            if self.pos < self.buf_start || self.pos >= buf_end {
                self.refill()?;
                continue;
            }
            let off = (self.pos - self.buf_start) as usize;
            let take = (self.buf.len() - off).min(end - out.len());
            out.extend_from_slice(&self.buf[off..off + take]);
            self.pos += take as u64;
        }
        Ok(())
    }

    fn refill(&mut self) -> Result<()> {
        let len = (self.remaining()).min(BUF_SIZE as u64) as usize;
        self.buf.resize(len, 0);
        self.buf_start = self.pos;
        self.src.read_at(self.pos, &mut self.buf).map_err(|e| FormatError::io(self.src.path(), Some(self.pos), &e))
    }

    /// Read `n` bytes into a new vector; `n` must already be checked against
    /// a cap by the caller, and is checked against the file end here before
    /// anything is allocated.
    pub fn read_vec(&mut self, n: u64) -> Result<Vec<u8>> {
        if n > self.remaining() {
            return Err(self.truncated(n));
        }
        let mut v = vec![0u8; n as usize];
        self.read_into(&mut v)?;
        Ok(v)
    }

    pub fn u8(&mut self) -> Result<u8> {
        let mut b = [0u8; 1];
        self.read_into(&mut b)?;
        Ok(b[0])
    }
    pub fn u16(&mut self) -> Result<u16> {
        let mut b = [0u8; 2];
        self.read_into(&mut b)?;
        Ok(u16::from_le_bytes(b))
    }
    pub fn u32(&mut self) -> Result<u32> {
        let mut b = [0u8; 4];
        self.read_into(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }
    pub fn u64(&mut self) -> Result<u64> {
        let mut b = [0u8; 8];
        self.read_into(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weightstream_io::MemorySource;

    #[test]
    fn reads_across_buffer_boundaries() {
        let bytes: Vec<u8> = (0..(BUF_SIZE * 2 + 7)).map(|i| i as u8).collect();
        let src = MemorySource::new("m", bytes.clone());
        let mut c = Cursor::new(&src, BUF_SIZE as u64 - 3);
        let mut out = vec![0u8; 10];
        c.read_into(&mut out).unwrap();
        assert_eq!(&out[..], &bytes[BUF_SIZE - 3..BUF_SIZE + 7]);
        c.read_vec(BUF_SIZE as u64).unwrap();
        let e = c.read_vec(100).unwrap_err();
        assert_eq!(e.kind.code(), "truncated");
        assert_eq!(e.offset, Some(2 * BUF_SIZE as u64 + 7));
    }
}
