//! GGUF metadata values: parsing with caps, and JSON rendering.
//!
//! Arrays are stored as typed vectors (`Vec<u8>`, packed strings, ...)
//! rather than vectors of enums, so that parsed metadata costs about as much memory
//! as its bytes in the file: a hostile header cannot multiply its size.

use serde_json::{json, Value as Json};

use crate::cursor::Cursor;
use crate::error::{ErrorKind, Result};

pub use super::strings::StringArray;

/// Longest metadata string accepted (chat templates run to tens of KiB,
/// tokenizer merges are arrays of short strings).
pub const MAX_STRING_LEN: u64 = 64 << 20;
/// Longest metadata key accepted.
pub const MAX_KEY_LEN: u64 = 64 << 10;
/// Most elements in one array (a 256k vocabulary fits many times over).
pub const MAX_ARRAY_LEN: u64 = 1 << 28;
/// Deepest nesting of arrays inside arrays.
pub const MAX_ARRAY_DEPTH: u32 = 4;

/// GGUF metadata value type ids.
pub mod value_type {
    pub const U8: u32 = 0;
    pub const I8: u32 = 1;
    pub const U16: u32 = 2;
    pub const I16: u32 = 3;
    pub const U32: u32 = 4;
    pub const I32: u32 = 5;
    pub const F32: u32 = 6;
    pub const BOOL: u32 = 7;
    pub const STRING: u32 = 8;
    pub const ARRAY: u32 = 9;
    pub const U64: u32 = 10;
    pub const I64: u32 = 11;
    pub const F64: u32 = 12;
}

#[derive(Debug, Clone, PartialEq)]
pub enum MetadataValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    String(String),
    /// Boxed: keeps every scalar value small (hostile files hold millions).
    Array(Box<MetadataArray>),
    U64(u64),
    I64(i64),
    F64(f64),
}

#[derive(Debug, Clone, PartialEq)]
pub enum MetadataArray {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    F32(Vec<f32>),
    Bool(Vec<bool>),
    String(StringArray),
    Array(Vec<MetadataArray>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F64(Vec<f64>),
}

impl MetadataValue {
    /// The GGUF type name (`u32`, `string`, `array[string]`, ...).
    pub fn type_name(&self) -> String {
        match self {
            MetadataValue::U8(_) => "u8".into(),
            MetadataValue::I8(_) => "i8".into(),
            MetadataValue::U16(_) => "u16".into(),
            MetadataValue::I16(_) => "i16".into(),
            MetadataValue::U32(_) => "u32".into(),
            MetadataValue::I32(_) => "i32".into(),
            MetadataValue::F32(_) => "f32".into(),
            MetadataValue::Bool(_) => "bool".into(),
            MetadataValue::String(_) => "string".into(),
            MetadataValue::Array(a) => format!("array[{}]", a.element_type_name()),
            MetadataValue::U64(_) => "u64".into(),
            MetadataValue::I64(_) => "i64".into(),
            MetadataValue::F64(_) => "f64".into(),
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            MetadataValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// Any integer type as u64, when it is non-negative.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            MetadataValue::U8(v) => Some(v as u64),
            MetadataValue::U16(v) => Some(v as u64),
            MetadataValue::U32(v) => Some(v as u64),
            MetadataValue::U64(v) => Some(v),
            MetadataValue::I8(v) => u64::try_from(v).ok(),
            MetadataValue::I16(v) => u64::try_from(v).ok(),
            MetadataValue::I32(v) => u64::try_from(v).ok(),
            MetadataValue::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// JSON rendering. Non-finite floats, which JSON cannot hold, become the
    /// strings "NaN", "Infinity" and "-Infinity" (docs/formats.md).
    pub fn to_json(&self) -> Json {
        match self {
            MetadataValue::U8(v) => json!(v),
            MetadataValue::I8(v) => json!(v),
            MetadataValue::U16(v) => json!(v),
            MetadataValue::I16(v) => json!(v),
            MetadataValue::U32(v) => json!(v),
            MetadataValue::I32(v) => json!(v),
            MetadataValue::F32(v) => float_json(*v as f64, json!(v)),
            MetadataValue::Bool(v) => json!(v),
            MetadataValue::String(v) => json!(v),
            MetadataValue::Array(a) => a.to_json(),
            MetadataValue::U64(v) => json!(v),
            MetadataValue::I64(v) => json!(v),
            MetadataValue::F64(v) => float_json(*v, json!(v)),
        }
    }

    /// A one-line rendering for tables: long arrays and strings abbreviated.
    pub fn summary(&self, max_chars: usize) -> String {
        let s = match self {
            MetadataValue::String(s) => format!("{s:?}"),
            // Printed as Rust prints them: NaN, inf, -inf, 0.1.
            MetadataValue::F32(v) => format!("{v}"),
            MetadataValue::F64(v) => format!("{v}"),
            MetadataValue::Array(a) if a.len() > 8 => {
                format!("[{} x {}]", a.len(), a.element_type_name())
            }
            v => v.to_json().to_string(),
        };
        if s.chars().count() > max_chars {
            let cut: String = s.chars().take(max_chars.saturating_sub(3)).collect();
            format!("{cut}...")
        } else {
            s
        }
    }
}

impl MetadataArray {
    pub fn len(&self) -> usize {
        match self {
            MetadataArray::U8(v) => v.len(),
            MetadataArray::I8(v) => v.len(),
            MetadataArray::U16(v) => v.len(),
            MetadataArray::I16(v) => v.len(),
            MetadataArray::U32(v) => v.len(),
            MetadataArray::I32(v) => v.len(),
            MetadataArray::F32(v) => v.len(),
            MetadataArray::Bool(v) => v.len(),
            MetadataArray::String(v) => v.len(),
            MetadataArray::Array(v) => v.len(),
            MetadataArray::U64(v) => v.len(),
            MetadataArray::I64(v) => v.len(),
            MetadataArray::F64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn element_type_name(&self) -> &'static str {
        match self {
            MetadataArray::U8(_) => "u8",
            MetadataArray::I8(_) => "i8",
            MetadataArray::U16(_) => "u16",
            MetadataArray::I16(_) => "i16",
            MetadataArray::U32(_) => "u32",
            MetadataArray::I32(_) => "i32",
            MetadataArray::F32(_) => "f32",
            MetadataArray::Bool(_) => "bool",
            MetadataArray::String(_) => "string",
            MetadataArray::Array(_) => "array",
            MetadataArray::U64(_) => "u64",
            MetadataArray::I64(_) => "i64",
            MetadataArray::F64(_) => "f64",
        }
    }

    pub fn to_json(&self) -> Json {
        match self {
            MetadataArray::U8(v) => json!(v),
            MetadataArray::I8(v) => json!(v),
            MetadataArray::U16(v) => json!(v),
            MetadataArray::I16(v) => json!(v),
            MetadataArray::U32(v) => json!(v),
            MetadataArray::I32(v) => json!(v),
            MetadataArray::F32(v) => Json::Array(v.iter().map(|&x| float_json(x as f64, json!(x))).collect()),
            MetadataArray::Bool(v) => json!(v),
            MetadataArray::String(v) => Json::Array(v.iter().map(|s| json!(s)).collect()),
            MetadataArray::Array(v) => Json::Array(v.iter().map(|a| a.to_json()).collect()),
            MetadataArray::U64(v) => json!(v),
            MetadataArray::I64(v) => json!(v),
            MetadataArray::F64(v) => Json::Array(v.iter().map(|&x| float_json(x, json!(x))).collect()),
        }
    }
}

/// A float as JSON: `finite` (the number in its own type's shortest form)
/// when `v` is finite, else "NaN", "Infinity" or "-Infinity".
fn float_json(v: f64, finite: Json) -> Json {
    if v.is_nan() {
        json!("NaN")
    } else if v.is_infinite() {
        json!(if v > 0.0 { "Infinity" } else { "-Infinity" })
    } else {
        finite
    }
}

/// Read a GGUF string (u64 length + bytes), capped at `cap` bytes.
pub(crate) fn read_string(c: &mut Cursor, cap: u64, what: &'static str) -> Result<String> {
    let at = c.pos();
    let len = c.u64()?;
    if len > cap {
        return Err(c.err(at, ErrorKind::LimitExceeded { what, value: len, limit: cap }));
    }
    let bytes = c.read_vec(len)?;
    String::from_utf8(bytes).map_err(|_| c.err(at + 8, ErrorKind::InvalidUtf8))
}

/// Smallest encoded size of one value of a type: bounds array counts by the
/// bytes left in the file before anything is allocated.
fn min_encoded_size(vtype: u32) -> u64 {
    use value_type::*;
    match vtype {
        U8 | I8 | BOOL => 1,
        U16 | I16 => 2,
        U32 | I32 | F32 => 4,
        U64 | I64 | F64 | STRING => 8,
        ARRAY => 12,
        _ => 1,
    }
}

pub(crate) fn read_value(c: &mut Cursor, vtype: u32, type_at: u64) -> Result<MetadataValue> {
    use value_type::*;
    Ok(match vtype {
        U8 => MetadataValue::U8(c.u8()?),
        I8 => MetadataValue::I8(c.u8()? as i8),
        U16 => MetadataValue::U16(c.u16()?),
        I16 => MetadataValue::I16(c.u16()? as i16),
        U32 => MetadataValue::U32(c.u32()?),
        I32 => MetadataValue::I32(c.u32()? as i32),
        F32 => MetadataValue::F32(f32::from_bits(c.u32()?)),
        BOOL => MetadataValue::Bool(read_bool(c)?),
        STRING => MetadataValue::String(read_string(c, MAX_STRING_LEN, "metadata string length")?),
        ARRAY => MetadataValue::Array(Box::new(read_array(c, 1)?)),
        U64 => MetadataValue::U64(c.u64()?),
        I64 => MetadataValue::I64(c.u64()? as i64),
        F64 => MetadataValue::F64(f64::from_bits(c.u64()?)),
        other => return Err(c.err(type_at, ErrorKind::UnknownValueType(other))),
    })
}

fn read_bool(c: &mut Cursor) -> Result<bool> {
    let at = c.pos();
    match c.u8()? {
        0 => Ok(false),
        1 => Ok(true),
        v => Err(c.err(at, ErrorKind::BadMetadata(format!("bool value {v} is neither 0 nor 1")))),
    }
}

fn read_n<T>(c: &mut Cursor, n: usize, mut f: impl FnMut(&mut Cursor) -> Result<T>) -> Result<Vec<T>> {
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        v.push(f(c)?);
    }
    Ok(v)
}

fn read_array(c: &mut Cursor, depth: u32) -> Result<MetadataArray> {
    use value_type::*;
    let type_at = c.pos();
    let etype = c.u32()?;
    let count_at = c.pos();
    let count = c.u64()?;
    if depth > MAX_ARRAY_DEPTH {
        return Err(
            c.err(type_at, ErrorKind::LimitExceeded { what: "array nesting depth", value: depth as u64, limit: MAX_ARRAY_DEPTH as u64 })
        );
    }
    if count > MAX_ARRAY_LEN {
        return Err(c.err(count_at, ErrorKind::LimitExceeded { what: "metadata array length", value: count, limit: MAX_ARRAY_LEN }));
    }
    // Every element takes at least this many bytes: a count the file cannot
    // hold is truncation, found before anything is allocated.
    let needed = count.saturating_mul(min_encoded_size(etype));
    if needed > c.remaining() {
        return Err(c.err(count_at + 8, ErrorKind::Truncated { needed, available: c.remaining() }));
    }
    let n = count as usize;
    Ok(match etype {
        U8 => MetadataArray::U8(c.read_vec(count)?),
        I8 => MetadataArray::I8(c.read_vec(count)?.into_iter().map(|b| b as i8).collect()),
        U16 => MetadataArray::U16(read_n(c, n, |c| c.u16())?),
        I16 => MetadataArray::I16(read_n(c, n, |c| Ok(c.u16()? as i16))?),
        U32 => MetadataArray::U32(read_n(c, n, |c| c.u32())?),
        I32 => MetadataArray::I32(read_n(c, n, |c| Ok(c.u32()? as i32))?),
        F32 => MetadataArray::F32(read_n(c, n, |c| Ok(f32::from_bits(c.u32()?)))?),
        BOOL => MetadataArray::Bool(read_n(c, n, read_bool)?),
        STRING => MetadataArray::String(super::strings::read_string_array(c, n, MAX_STRING_LEN)?),
        ARRAY => MetadataArray::Array(read_n(c, n, |c| read_array(c, depth + 1))?),
        U64 => MetadataArray::U64(read_n(c, n, |c| c.u64())?),
        I64 => MetadataArray::I64(read_n(c, n, |c| Ok(c.u64()? as i64))?),
        F64 => MetadataArray::F64(read_n(c, n, |c| Ok(f64::from_bits(c.u64()?)))?),
        other => return Err(c.err(type_at, ErrorKind::UnknownValueType(other))),
    })
}
