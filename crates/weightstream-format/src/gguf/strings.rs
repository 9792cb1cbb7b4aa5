//! GGUF string arrays (tokenizer vocabularies and merges: 100k-400k short
//! strings in current models) stored packed: one text buffer and the end of
//! each string in it. A `Vec<String>` made one allocation per token: malloc,
//! the allocations' page faults and per-string UTF-8 checks led the profile
//! of opening a 128k-vocabulary GGUF, paid by every load (each rank of a
//! vLLM load), though only a tokenizer reads them (docs/PERFORMANCE.md,
//! "A GGUF with a real vocabulary").

use crate::cursor::Cursor;
use crate::error::{ErrorKind, Result};

/// `n` strings, packed: string `i` is `text[ends[i - 1]..ends[i]]`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StringArray {
    text: String,
    ends: Vec<usize>,
}

impl StringArray {
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// String `i` (panics past the end, as indexing a slice does).
    pub fn get(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.text[start..self.ends[i]]
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }
}

impl<S: AsRef<str>> FromIterator<S> for StringArray {
    fn from_iter<I: IntoIterator<Item = S>>(iter: I) -> Self {
        let mut a = StringArray::default();
        for s in iter {
            a.text.push_str(s.as_ref());
            a.ends.push(a.text.len());
        }
        a
    }
}

/// Read `n` GGUF strings (u64 length + bytes each), every one capped at
/// `cap` bytes. The UTF-8 check runs once over the whole text; where
/// it fails, the first string that is not UTF-8 on its own is named by its
/// offset, as a one-by-one read would (a string boundary inside a
/// multi-byte character makes two invalid strings of a valid text).
pub(crate) fn read_string_array(c: &mut Cursor<'_>, n: usize, cap: u64) -> Result<StringArray> {
    let first = c.pos();
    let mut bytes = Vec::new();
    let mut ends = Vec::with_capacity(n);
    for _ in 0..n {
        let at = c.pos();
        let len = c.u64()?;
        if len > cap {
            return Err(c.err(at, ErrorKind::LimitExceeded { what: "metadata string length", value: len, limit: cap }));
        }
        // Past the end: truncation, found before anything is allocated.
        c.append_to(&mut bytes, len)?;
        ends.push(bytes.len());
    }
    let valid_pieces = |text: &str| ends.iter().all(|&e| text.is_char_boundary(e));
    match String::from_utf8(bytes) {
        Ok(text) if valid_pieces(&text) => Ok(StringArray { text, ends }),
        Ok(text) => Err(first_invalid(c, first, text.as_bytes(), &ends)),
        Err(e) => Err(first_invalid(c, first, e.as_bytes(), &ends)),
    }
}

/// The error for the first string of `bytes` (cut at `ends`) that is not
/// UTF-8 on its own, at the offset of its bytes: the array's strings start
/// at `first` in the file, each after its 8-byte length.
fn first_invalid(c: &Cursor<'_>, first: u64, bytes: &[u8], ends: &[usize]) -> crate::error::FormatError {
    let mut from = 0;
    for (i, &end) in ends.iter().enumerate() {
        if std::str::from_utf8(&bytes[from..end]).is_err() {
            return c.err(first + 8 * (i as u64 + 1) + from as u64, ErrorKind::InvalidUtf8);
        }
        from = end;
    }
    unreachable!("a text whose every piece is UTF-8 is UTF-8, cut at char boundaries")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(strings: &[&[u8]]) -> Vec<u8> {
        let mut v = Vec::new();
        for s in strings {
            v.extend_from_slice(&(s.len() as u64).to_le_bytes());
            v.extend_from_slice(s);
        }
        v
    }

    fn read(bytes: Vec<u8>, n: usize) -> Result<StringArray> {
        let src = weightstream_io::MemorySource::new("t.gguf", bytes);
        read_string_array(&mut Cursor::new(&src, 0), n, 1 << 20)
    }

    #[test]
    fn strings_round_trip_packed() {
        let a = read(encode(&[b"", "é".as_bytes(), b"<s>", "日本".as_bytes(), b""]), 5).unwrap();
        assert_eq!(a.iter().collect::<Vec<_>>(), ["", "é", "<s>", "日本", ""]);
        assert_eq!(a, ["", "é", "<s>", "日本", ""].into_iter().collect::<StringArray>());
    }

    #[test]
    fn the_first_bad_string_is_named_by_its_offset() {
        // Valid text, each string not: "é" cut between its two bytes.
        let e = read(encode(&[b"ab", b"\xc3", b"\xa9"]), 3).unwrap_err();
        assert_eq!((e.kind.code(), e.offset), ("invalid_utf8", Some(8 + 2 + 8)));
        // Invalid text: the third string.
        let e = read(encode(&[b"ab", b"cd", b"\xff", b"ok"]), 4).unwrap_err();
        assert_eq!((e.kind.code(), e.offset), ("invalid_utf8", Some(3 * 8 + 4)));
    }

    #[test]
    fn a_length_past_the_end_is_truncation_and_a_huge_one_a_limit() {
        let mut v = encode(&[b"ab"]);
        v.extend_from_slice(&100u64.to_le_bytes());
        assert_eq!(read(v, 2).unwrap_err().kind.code(), "truncated");
        let v = ((1u64 << 20) + 1).to_le_bytes().to_vec();
        assert_eq!(read(v, 1).unwrap_err().kind.code(), "limit_exceeded");
    }
}
