//! One safetensors file: the 8-byte length, the JSON header, the data buffer.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use serde_json::{Map, Value as Json};

use super::dtype::StDtype;
use crate::cursor::Cursor;
use crate::error::{ErrorKind, FormatError, Result};
use crate::gguf::reader::check_no_overlap;
use crate::source::ByteSource;

/// The safetensors crate refuses headers above this size.
pub const MAX_HEADER_LEN: u64 = 100_000_000;
/// Most dimensions of one tensor (no real model comes close).
pub const MAX_DIMS: u64 = 16;
pub const METADATA_KEY: &str = "__metadata__";

#[derive(Debug, Clone, PartialEq)]
pub struct StTensorInfo {
    pub name: String,
    pub dtype: StDtype,
    pub shape: Vec<u64>,
    /// Absolute byte range in the file.
    pub start: u64,
    pub end: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StHeader {
    pub metadata: BTreeMap<String, String>,
    /// Tensors in data order.
    pub tensors: Vec<StTensorInfo>,
    /// Absolute offset of the data buffer.
    pub data_offset: u64,
}

pub fn read_header(src: &dyn ByteSource) -> Result<StHeader> {
    let path = src.path();
    let mut c = Cursor::new(src, 0);
    let n = c.u64()?;
    if n > MAX_HEADER_LEN {
        return Err(c.err(0, ErrorKind::LimitExceeded { what: "safetensors header length", value: n, limit: MAX_HEADER_LEN }));
    }
    let text = c.read_vec(n)?;
    let data_offset = 8 + n;
    let data_len = src.len() - data_offset;
    if text.first() != Some(&b'{') {
        return Err(c.err(8, ErrorKind::NotAnObject));
    }
    let json: Json = serde_json::from_slice(&text).map_err(|e| {
        let at = 8 + json_error_offset(&text, e.line(), e.column());
        c.err(at, ErrorKind::BadJson(e.to_string()))
    })?;
    let Json::Object(map) = json else {
        return Err(c.err(8, ErrorKind::NotAnObject));
    };

    let mut metadata = BTreeMap::new();
    let mut tensors = Vec::with_capacity(map.len());
    for (name, entry) in &map {
        let at = 8 + locate_key(&text, name);
        if name == METADATA_KEY {
            metadata = parse_metadata(entry).map_err(|m| c.err(at, ErrorKind::BadSafetensorsMetadata(m)))?;
            continue;
        }
        let t = parse_entry(path, name, entry, at, data_offset, data_len)?;
        tensors.push(t);
    }
    let mut ranges: Vec<_> = tensors.iter().enumerate().map(|(i, t)| (t.start, t.end, i)).collect();
    check_no_overlap(path, &mut ranges, |i| &tensors[i].name)?;
    tensors.sort_by_key(|t| (t.start, t.end));
    // The JSON object cannot hold duplicate keys once parsed; serde_json keeps
    // the last one silently, so look for repeats in the raw text.
    check_duplicate_keys(path, &text, &map)?;
    Ok(StHeader { metadata, tensors, data_offset })
}

fn parse_metadata(entry: &Json) -> std::result::Result<BTreeMap<String, String>, String> {
    let Json::Object(m) = entry else {
        return Err("not an object".into());
    };
    m.iter()
        .map(|(k, v)| match v {
            Json::String(s) => Ok((k.clone(), s.clone())),
            other => Err(format!("value of '{k}' is {other}, not a string")),
        })
        .collect()
}

fn parse_entry(path: &Path, name: &str, entry: &Json, at: u64, data_offset: u64, data_len: u64) -> Result<StTensorInfo> {
    let fail = |kind: ErrorKind| FormatError::at(path, at, kind).with_tensor(name);
    let bad = |m: &str| fail(ErrorKind::BadTensorEntry(m.to_string()));
    let Json::Object(obj) = entry else {
        return Err(bad("not an object"));
    };
    let dtype_str = obj.get("dtype").and_then(Json::as_str).ok_or_else(|| bad("missing or non-string 'dtype'"))?;
    let dtype = StDtype::parse(dtype_str).ok_or_else(|| fail(ErrorKind::BadDtype(dtype_str.to_string())))?;
    let shape_json = obj.get("shape").and_then(Json::as_array).ok_or_else(|| bad("missing or non-array 'shape'"))?;
    if shape_json.len() as u64 > MAX_DIMS {
        return Err(fail(ErrorKind::TooManyDims { dims: shape_json.len() as u64, max: MAX_DIMS }));
    }
    let shape = shape_json
        .iter()
        .map(|d| d.as_u64().ok_or_else(|| bad("shape entries must be non-negative integers")))
        .collect::<Result<Vec<u64>>>()?;
    let offsets = obj.get("data_offsets").and_then(Json::as_array).ok_or_else(|| bad("missing or non-array 'data_offsets'"))?;
    let (begin, end) = match offsets.as_slice() {
        [b, e] => match (b.as_u64(), e.as_u64()) {
            (Some(b), Some(e)) => (b, e),
            _ => return Err(bad("data_offsets must be non-negative integers")),
        },
        _ => return Err(bad("data_offsets must hold exactly [begin, end]")),
    };
    if begin > end || end > data_len {
        let abs = data_offset.saturating_add(begin);
        return Err(FormatError::at(
            path,
            abs,
            ErrorKind::OutOfBounds { start: begin, end, limit: data_len, region: "data buffer" },
        )
        .with_tensor(name));
    }
    let n_elems = shape
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .ok_or_else(|| fail(ErrorKind::ShapeOverflow(shape.clone())))?;
    let expected = dtype.nbytes(n_elems).ok_or_else(|| fail(ErrorKind::ShapeOverflow(shape.clone())))?;
    if expected != end - begin {
        return Err(fail(ErrorKind::SizeMismatch { expected, actual: end - begin }));
    }
    Ok(StTensorInfo { name: name.to_string(), dtype, shape, start: data_offset + begin, end: data_offset + end })
}

/// Byte offset of `"name"` as a key in the header text (first match), for
/// error messages. 0 when not found (escaped names).
fn locate_key(text: &[u8], name: &str) -> u64 {
    let needle = serde_json::to_string(name).unwrap_or_default();
    find(text, needle.as_bytes()).unwrap_or(0) as u64
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || needle.len() > hay.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

fn json_error_offset(text: &[u8], line: usize, column: usize) -> u64 {
    let mut off = 0usize;
    for (i, l) in text.split(|&b| b == b'\n').enumerate() {
        if i + 1 == line {
            return (off + column.saturating_sub(1)).min(text.len()) as u64;
        }
        off += l.len() + 1;
    }
    0
}

/// serde_json keeps the last of two equal keys; a header with a repeated
/// tensor name is ambiguous and is rejected. Scans top-level keys only.
fn check_duplicate_keys(path: &Path, text: &[u8], map: &Map<String, Json>) -> Result<()> {
    let mut seen = HashSet::with_capacity(map.len());
    let mut depth = 0i32;
    let mut i = 0usize;
    let mut expect_key = false;
    while i < text.len() {
        match text[i] {
            b'{' | b'[' => {
                depth += 1;
                expect_key = depth == 1 && text[i] == b'{';
            }
            b'}' | b']' => depth -= 1,
            b',' if depth == 1 => expect_key = true,
            b'"' => {
                let start = i;
                i += 1;
                while i < text.len() && text[i] != b'"' {
                    if text[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                if depth == 1 && expect_key {
                    let raw = &text[start..=i.min(text.len() - 1)];
                    if let Ok(key) = serde_json::from_slice::<String>(raw) {
                        if !seen.insert(key.clone()) {
                            return Err(FormatError::at(path, 8 + start as u64, ErrorKind::DuplicateTensor).with_tensor(&key));
                        }
                    }
                    expect_key = false;
                }
            }
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::MemorySource;

    fn file(header: &str, data: usize) -> MemorySource {
        let mut b = (header.len() as u64).to_le_bytes().to_vec();
        b.extend_from_slice(header.as_bytes());
        b.resize(b.len() + data, 0);
        MemorySource::new("t.safetensors", b)
    }

    #[test]
    fn parses_and_orders_by_offset() {
        let h = r#"{"b":{"dtype":"F16","shape":[2],"data_offsets":[4,8]},"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"__metadata__":{"k":"v"}}"#;
        let hd = read_header(&file(h, 8)).unwrap();
        assert_eq!(hd.tensors[0].name, "a");
        assert_eq!(hd.tensors[1].start, 8 + h.len() as u64 + 4);
        assert_eq!(hd.metadata["k"], "v");
    }

    #[test]
    fn rejects_duplicates_and_overlap() {
        let h = r#"{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"a":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}}"#;
        assert_eq!(read_header(&file(h, 8)).unwrap_err().kind.code(), "duplicate_tensor");
        let h = r#"{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}}"#;
        assert_eq!(read_header(&file(h, 8)).unwrap_err().kind.code(), "overlap");
        let h = r#"{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"x":{"k":{"a":1,"a":2}}}"#;
        assert_eq!(read_header(&file(h, 8)).unwrap_err().kind.code(), "bad_tensor_entry");
    }
}
