//! One safetensors file: the 8-byte length, the JSON header, the data buffer.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::Path;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde_json::Value as Json;

use super::dtype::StDtype;
use super::strict_json::{StrictJson, DUPLICATE_KEY};
use crate::cursor::Cursor;
use crate::error::{ErrorKind, FormatError, Result};
use crate::gguf::reader::{check_no_overlap, first_duplicate};
use weightstream_io::ByteSource;

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
    let ctx = Ctx { path, text: &text, data_offset, data_len };
    let failure = RefCell::new(None);
    let mut de = serde_json::Deserializer::from_slice(&text);
    let parsed = de.deserialize_map(HeaderVisitor { ctx: &ctx, failure: &failure }).and_then(|v| de.end().map(|()| v));
    let (metadata, mut tensors) = match parsed {
        Ok(v) => v,
        Err(e) => {
            return Err(failure
                .into_inner()
                .unwrap_or_else(|| c.err(8 + json_error_offset(&text, e.line(), e.column()), ErrorKind::BadJson(e.to_string()))))
        }
    };
    // serde_json hands repeated keys over one by one: a repeated tensor name
    // is ambiguous and refused (at its last occurrence).
    if let Some((i, _)) = first_duplicate(&tensors, |t| &t.name) {
        let name = &tensors[i].name;
        return Err(FormatError::at(path, 8 + locate_key(&text, name, true), ErrorKind::DuplicateTensor).with_tensor(name));
    }
    let mut ranges: Vec<_> = tensors.iter().enumerate().map(|(i, t)| (t.start, t.end, i)).collect();
    check_no_overlap(path, &mut ranges, |i| &tensors[i].name)?;
    tensors.sort_by_key(|t| (t.start, t.end));
    Ok(StHeader { metadata, tensors, data_offset })
}

/// What entry parsing needs to know about the file.
struct Ctx<'a> {
    path: &'a Path,
    text: &'a [u8],
    data_offset: u64,
    data_len: u64,
}

/// Streams the header object: each entry's JSON value lives only while it
/// is turned into a compact `StTensorInfo`, so a header of a million
/// entries never exists as a million JSON trees.
struct HeaderVisitor<'a> {
    ctx: &'a Ctx<'a>,
    /// Our typed error, when the visitor stops with one (serde only carries
    /// its own error type through).
    failure: &'a RefCell<Option<FormatError>>,
}

impl HeaderVisitor<'_> {
    fn fail<E: de::Error>(&self, e: FormatError) -> E {
        *self.failure.borrow_mut() = Some(e);
        E::custom("invalid safetensors header")
    }
}

impl<'de> Visitor<'de> for HeaderVisitor<'_> {
    type Value = (BTreeMap<String, String>, Vec<StTensorInfo>);

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object of tensor entries")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Self::Value, A::Error> {
        let mut metadata = None;
        let mut tensors = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            // Duplicate keys inside the entry (or its __metadata__) are
            // refused as the safetensors library refuses them.
            let value: Json = match map.next_value::<StrictJson>() {
                Ok(v) => v.0,
                Err(e) => {
                    let msg = e.to_string();
                    return Err(match msg.strip_prefix(DUPLICATE_KEY) {
                        Some(rest) => {
                            let dup = rest.split(" at line").next().unwrap_or(rest).to_string();
                            let at = 8 + locate_key(self.ctx.text, &key, false);
                            self.fail(FormatError::at(self.ctx.path, at, ErrorKind::DuplicateKey(dup)).with_tensor(&key))
                        }
                        None => e,
                    });
                }
            };
            if key == METADATA_KEY {
                let at = 8 + locate_key(self.ctx.text, &key, metadata.is_some());
                if metadata.is_some() {
                    return Err(self.fail(FormatError::at(self.ctx.path, at, ErrorKind::DuplicateTensor).with_tensor(&key)));
                }
                let m = parse_metadata(&value)
                    .map_err(|m| self.fail(FormatError::at(self.ctx.path, at, ErrorKind::BadSafetensorsMetadata(m))))?;
                metadata = Some(m);
                continue;
            }
            tensors.push(parse_entry(self.ctx, key, &value).map_err(|e| self.fail(e))?);
        }
        Ok((metadata.unwrap_or_default(), tensors))
    }
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

fn parse_entry(ctx: &Ctx, name: String, entry: &Json) -> Result<StTensorInfo> {
    // The entry's byte position is searched for only when reporting an error.
    let fail = |kind: ErrorKind| FormatError::at(ctx.path, 8 + locate_key(ctx.text, &name, false), kind).with_tensor(&name);
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
    if begin > end || end > ctx.data_len {
        // The range's start in the file when that is a real position; else
        // (an offset past the file, or past 2^64) the entry in the header.
        let abs = ctx.data_offset.checked_add(begin).filter(|&a| begin <= ctx.data_len && a <= ctx.data_offset + ctx.data_len);
        let at = abs.unwrap_or_else(|| 8 + locate_key(ctx.text, &name, false));
        return Err(FormatError::at(
            ctx.path,
            at,
            ErrorKind::OutOfBounds { start: begin, end, limit: ctx.data_len, region: "data buffer" },
        )
        .with_tensor(&name));
    }
    let n_elems = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d)).ok_or_else(|| fail(ErrorKind::ShapeOverflow(shape.clone())))?;
    let expected = dtype.nbytes(n_elems).ok_or_else(|| fail(ErrorKind::ShapeOverflow(shape.clone())))?;
    if expected != end - begin {
        return Err(fail(ErrorKind::SizeMismatch { expected, actual: end - begin }));
    }
    Ok(StTensorInfo { name, dtype, shape, start: ctx.data_offset + begin, end: ctx.data_offset + end })
}

/// Byte offset of `"name"` in the header text (its first or last
/// occurrence), for error messages: one linear search, on the error path
/// only. 0 when not found (names written with escapes).
fn locate_key(text: &[u8], name: &str, last: bool) -> u64 {
    let needle = serde_json::to_string(name).unwrap_or_default();
    let needle = needle.as_bytes();
    if needle.is_empty() || needle.len() > text.len() {
        return 0;
    }
    let mut windows = text.windows(needle.len());
    let found = if last { windows.rposition(|w| w == needle) } else { windows.position(|w| w == needle) };
    found.unwrap_or(0) as u64
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

#[cfg(test)]
mod tests {
    use super::*;
    use weightstream_io::MemorySource;

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
        assert_eq!(read_header(&file(h, 8)).unwrap_err().kind.code(), "duplicate_key");
        // A repeated field inside an entry: once last-wins, now refused (issue 14).
        let h = r#"{"a":{"dtype":"F16","dtype":"U8","shape":[4],"data_offsets":[0,4]}}"#;
        let e = read_header(&file(h, 8)).unwrap_err();
        assert_eq!((e.kind.code(), e.tensor.as_deref()), ("duplicate_key", Some("a")), "{e}");
        assert!(e.to_string().contains("'dtype'"), "{e}");
        let h = r#"{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"__metadata__":{"k":"v","k":"w"}}"#;
        assert_eq!(read_header(&file(h, 8)).unwrap_err().kind.code(), "duplicate_key");
    }
}
