//! Writing BF16 safetensors files: the header up front (every shape is
//! known from the plan), then each tensor's bytes in order.

use std::io::Write;

use serde_json::{json, Map, Value as Json};

/// One tensor's entry in a file being written.
pub struct Entry<'a> {
    pub name: &'a str,
    /// The safetensors dtype written: "BF16" or "F16" (2 bytes an element).
    pub dtype: &'static str,
    pub shape: &'a [u64],
    pub nbytes: u64,
}

/// The header bytes (length prefix, JSON padded with spaces to a multiple
/// of 8 so the data starts aligned) for BF16 tensors laid out contiguously
/// in the given order.
pub fn header(entries: &[Entry], metadata: &Map<String, Json>) -> Vec<u8> {
    let mut obj = Map::new();
    if !metadata.is_empty() {
        obj.insert("__metadata__".into(), Json::Object(metadata.clone()));
    }
    let mut offset = 0u64;
    for e in entries {
        obj.insert(e.name.to_string(), json!({"dtype": e.dtype, "shape": e.shape, "data_offsets": [offset, offset + e.nbytes]}));
        offset += e.nbytes;
    }
    let mut text = serde_json::to_vec(&Json::Object(obj)).expect("JSON of owned values");
    while text.len() % 8 != 0 {
        text.push(b' ');
    }
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&text);
    out
}

/// BF16 values as little-endian bytes, written out.
pub fn write_bf16(w: &mut impl Write, values: &[u16]) -> std::io::Result<()> {
    if cfg!(target_endian = "little") {
        // SAFETY: u16 has no padding; on a little-endian target its memory is
        // exactly the little-endian byte sequence safetensors stores.
        let bytes = unsafe { std::slice::from_raw_parts(values.as_ptr() as *const u8, values.len() * 2) };
        w.write_all(bytes)
    } else {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        w.write_all(&bytes)
    }
}
