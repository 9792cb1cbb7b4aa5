//! GGUF v2/v3 header parsing and validation.

use super::lookalike::{check_sizes, Stored};
use super::metadata::{read_string, read_value, MetadataValue, MAX_KEY_LEN};
use super::types::GgmlType;
use super::{MAX_DIMS, MAX_TENSOR_NAME_LEN};
use crate::cursor::Cursor;
use crate::error::{ErrorKind, FormatError, Result};
use weightstream_io::ByteSource;

pub const MAGIC: &[u8; 4] = b"GGUF";
pub const DEFAULT_ALIGNMENT: u64 = 32;
pub const ALIGNMENT_KEY: &str = "general.alignment";
/// Most tensors in one file (the largest published models have ~10^5).
pub const MAX_TENSORS: u64 = 1 << 24;
/// Most metadata pairs in one file.
pub const MAX_KV: u64 = 1 << 20;

/// One tensor as the GGUF header describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct GgufTensorInfo {
    pub name: String,
    /// Dimensions innermost first, as stored (`ne`).
    pub ne: Vec<u64>,
    pub ggml_type: GgmlType,
    /// Offset relative to the data section.
    pub offset: u64,
    pub nbytes: u64,
    /// Where this tensor's info record starts in the file (for errors).
    pub info_at: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GgufHeader {
    pub version: u32,
    pub alignment: u64,
    pub metadata: Vec<(String, MetadataValue)>,
    pub tensors: Vec<GgufTensorInfo>,
    /// Absolute offset of the data section.
    pub data_offset: u64,
}

impl GgufHeader {
    pub fn get(&self, key: &str) -> Option<&MetadataValue> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

/// The later of the first pair of items with equal names, as (index, other
/// index). Sorting indices costs 4 bytes per item, where a set of cloned
/// names would cost a copy of every name (hostile headers hold millions).
pub(crate) fn first_duplicate<T>(items: &[T], name: impl Fn(&T) -> &str) -> Option<(usize, usize)> {
    let mut idx: Vec<u32> = (0..items.len() as u32).collect();
    idx.sort_unstable_by(|&a, &b| name(&items[a as usize]).cmp(name(&items[b as usize])).then(a.cmp(&b)));
    idx.windows(2).filter(|w| name(&items[w[0] as usize]) == name(&items[w[1] as usize])).map(|w| (w[1] as usize, w[0] as usize)).min()
}

/// Bound a count read from the header by the bytes left to hold it and by a
/// hard cap, before anything is allocated for it.
fn check_count(c: &Cursor, at: u64, count: u64, min_size: u64, cap: u64, what: &'static str) -> Result<()> {
    if count > cap {
        return Err(c.err(at, ErrorKind::LimitExceeded { what, value: count, limit: cap }));
    }
    let needed = count.saturating_mul(min_size);
    if needed > c.remaining() {
        return Err(c.err(at, ErrorKind::Truncated { needed, available: c.remaining() }));
    }
    Ok(())
}

pub fn read_header(src: &dyn ByteSource) -> Result<GgufHeader> {
    let path = src.path();
    let mut c = Cursor::new(src, 0);
    let mut magic = [0u8; 4];
    c.read_into(&mut magic)?;
    if &magic != MAGIC {
        return Err(c.err(0, ErrorKind::BadMagic { format: "GGUF" }));
    }
    let version = c.u32()?;
    if version & 0xFFFF == 0 {
        return Err(c.err(4, ErrorKind::BigEndian));
    }
    if version != 2 && version != 3 {
        return Err(c.err(4, ErrorKind::UnsupportedVersion(version)));
    }
    let tc_at = c.pos();
    let tensor_count = c.u64()?;
    let kv_at = c.pos();
    let kv_count = c.u64()?;
    // A KV pair is at least key length (8) + type (4) + one byte of value;
    // a tensor info at least name length (8) + n_dims (4) + type (4) + offset (8).
    check_count(&c, kv_at, kv_count, 13, MAX_KV, "metadata pair count")?;
    check_count(&c, tc_at, tensor_count, 24, MAX_TENSORS, "tensor count")?;

    let mut metadata = Vec::with_capacity(kv_count as usize);
    let mut key_offsets = Vec::with_capacity(kv_count as usize);
    let mut alignment = DEFAULT_ALIGNMENT;
    for _ in 0..kv_count {
        let key_at = c.pos();
        let key = read_string(&mut c, MAX_KEY_LEN, "metadata key length")?;
        let type_at = c.pos();
        let vtype = c.u32()?;
        let value = read_value(&mut c, vtype, type_at)?;
        key_offsets.push(key_at);
        if key == ALIGNMENT_KEY {
            alignment = match value {
                MetadataValue::U32(a) if a != 0 && a.is_power_of_two() => a as u64,
                MetadataValue::U32(a) => return Err(c.err(type_at + 4, ErrorKind::BadAlignment(a as u64))),
                ref other => {
                    return Err(c.err(type_at, ErrorKind::BadMetadata(format!("{ALIGNMENT_KEY} must be u32, found {}", other.type_name()))))
                }
            };
        }
        metadata.push((key, value));
    }
    if let Some((i, _)) = first_duplicate(&metadata, |kv| &kv.0) {
        let key = &metadata[i].0;
        return Err(c.err(key_offsets[i], ErrorKind::BadMetadata(format!("duplicate key '{key}'"))));
    }

    let mut tensors = Vec::with_capacity(tensor_count as usize);
    for _ in 0..tensor_count {
        tensors.push(read_tensor_info(&mut c, alignment)?);
    }
    if let Some((i, _)) = first_duplicate(&tensors, |t| &t.name) {
        return Err(c.err(tensors[i].info_at, ErrorKind::DuplicateTensor).with_tensor(&tensors[i].name));
    }

    let end_of_infos = c.pos();
    let data_offset = end_of_infos
        .checked_next_multiple_of(alignment)
        .ok_or_else(|| c.err(end_of_infos, ErrorKind::ShapeOverflow(vec![end_of_infos])))?;
    let stored = |i: usize| {
        let t: &GgufTensorInfo = &tensors[i];
        Stored { name: &t.name, elems: t.ne.iter().product(), ggml_type: t.ggml_type, offset: t.offset, nbytes: t.nbytes }
    };
    check_sizes(path, src.len(), data_offset, alignment, tensors.len(), stored, true)?;
    check_data_ranges(path, src.len(), data_offset, &tensors)?;
    check_sizes(path, src.len(), data_offset, alignment, tensors.len(), stored, false)?;
    Ok(GgufHeader { version, alignment, metadata, tensors, data_offset })
}

fn read_tensor_info(c: &mut Cursor, alignment: u64) -> Result<GgufTensorInfo> {
    let info_at = c.pos();
    let name = read_string(c, MAX_TENSOR_NAME_LEN, "tensor name length")?;
    let fail = |c: &Cursor, at: u64, kind: ErrorKind| c.err(at, kind).with_tensor(&name);
    let dims_at = c.pos();
    let n_dims = c.u32()? as u64;
    if n_dims > MAX_DIMS {
        return Err(fail(c, dims_at, ErrorKind::TooManyDims { dims: n_dims, max: MAX_DIMS }));
    }
    let mut ne = Vec::with_capacity(n_dims as usize);
    for _ in 0..n_dims {
        ne.push(c.u64()?);
    }
    let type_at = c.pos();
    let type_id = c.u32()?;
    let ggml_type = GgmlType::from_id(type_id)
        .ok_or_else(|| fail(c, type_at, ErrorKind::UnknownGgmlType(type_id, super::lookalike::fork_using(type_id))))?;
    let offset_at = c.pos();
    let offset = c.u64()?;

    // ggml keeps sizes in int64_t: each dimension and the element count must fit.
    let n_elems = ne
        .iter()
        .try_fold(1u64, |acc, &d| if d > i64::MAX as u64 { None } else { acc.checked_mul(d) })
        .filter(|&n| n <= i64::MAX as u64)
        .ok_or_else(|| fail(c, dims_at, ErrorKind::ShapeOverflow(ne.clone())))?;
    let inner = ne.first().copied().unwrap_or(1);
    if inner % ggml_type.block() != 0 {
        return Err(fail(
            c,
            dims_at,
            ErrorKind::BlockMismatch { dtype: ggml_type.name().to_string(), dim: inner, block: ggml_type.block() },
        ));
    }
    let nbytes = ggml_type.nbytes(n_elems).ok_or_else(|| fail(c, dims_at, ErrorKind::ShapeOverflow(ne.clone())))?;
    if offset % alignment != 0 {
        return Err(fail(c, offset_at, ErrorKind::Misaligned { offset, alignment }));
    }
    Ok(GgufTensorInfo { name, ne, ggml_type, offset, nbytes, info_at })
}

/// Every tensor's bytes lie inside the file and no two overlap.
fn check_data_ranges(path: &std::path::Path, file_len: u64, data_offset: u64, tensors: &[GgufTensorInfo]) -> Result<()> {
    let mut ranges = Vec::with_capacity(tensors.len());
    for (i, t) in tensors.iter().enumerate() {
        let start = data_offset.checked_add(t.offset);
        let end = start.and_then(|s| s.checked_add(t.nbytes));
        match (start, end) {
            (Some(s), Some(e)) if e <= file_len => ranges.push((s, e, i)),
            (Some(s), Some(e)) => {
                return Err(FormatError::at(
                    path,
                    s.min(file_len),
                    ErrorKind::OutOfBounds { start: s, end: e, limit: file_len, region: "file" },
                )
                .with_tensor(&t.name));
            }
            // Past 2^64: say so, rather than print a saturated 18446744073709551615.
            _ => {
                return Err(FormatError::at(
                    path,
                    file_len,
                    ErrorKind::OffsetOverflow { base: data_offset, offset: t.offset, nbytes: t.nbytes },
                )
                .with_tensor(&t.name));
            }
        }
    }
    check_no_overlap(path, &mut ranges, |i| &tensors[i].name)
}

/// Sort `(start, end, index)` ranges and fail on the first overlap.
/// Empty ranges overlap nothing.
pub(crate) fn check_no_overlap<'a>(
    path: &std::path::Path,
    ranges: &mut [(u64, u64, usize)],
    name: impl Fn(usize) -> &'a str,
) -> Result<()> {
    ranges.sort_unstable();
    let mut prev: Option<(u64, usize)> = None;
    for &(s, e, i) in ranges.iter() {
        if s == e {
            continue;
        }
        if let Some((pe, pi)) = prev {
            if s < pe {
                return Err(FormatError::at(path, s, ErrorKind::Overlap { other: name(pi).to_string() }).with_tensor(name(i)));
            }
        }
        prev = Some((e, i));
    }
    Ok(())
}
