//! Files that only look like mainline GGUF: forks that reuse or squat ggml
//! type ids, and metadata declaring a transform of the weights that a plain
//! dequantization does not apply. Each is refused with what was found
//! (docs/formats.md, "Look-alikes").
//!
//! The forks named here are only those found in their own repositories'
//! issues and pull requests (November 2026):
//! - PrismML's llama.cpp (`prism-v5` line) stored its group-128 Q2_0 under
//!   id 42, which mainline gave the group-64 Q2_0: 128 values in 34 bytes
//!   (an f16 d and 32 bytes of 2-bit codes), told apart only by the
//!   tensor's byte size (PrismML-Eng/llama.cpp issue 167). Its current
//!   line uses 142 (PQ2_0) and 143 (PTQ1_0) for its ternary group-128
//!   packs (ggml-org/llama.cpp issue 29058).
//! - unslothai/llama.cpp's pull request 61 gives id 43 to IQ1_XS.
//! - ik_llama.cpp's IQ3_KS is id 156 (ikawrakow/ik_llama.cpp issue 605).

use std::path::Path;

use super::metadata::MetadataValue;
use super::types::GgmlType;
use crate::error::{ErrorKind, FormatError, Result};

/// A tensor as the size checks see it (from the reader's tensor infos).
pub(crate) struct Stored<'a> {
    pub name: &'a str,
    pub elems: u64,
    pub ggml_type: GgmlType,
    /// Relative to the data section.
    pub offset: u64,
    pub nbytes: u64,
}

/// A fork's layout under a mainline id: (id, elements, bytes per block, what).
const FORK_LAYOUTS: &[(u32, u64, u64, &str)] =
    &[(42, 128, 34, "PrismML's older Q2_0 (prism-v5: 128 values in 34 bytes, group 128), not mainline's group-64 Q2_0")];

/// Ids mainline ggml does not define that forks are known to use.
const FORK_IDS: &[(u32, &str)] = &[
    (43, "IQ1_XS in unslothai/llama.cpp (pull request 61)"),
    (142, "PQ2_0 in PrismML's llama.cpp (ternary, group 128)"),
    (143, "PTQ1_0 in PrismML's llama.cpp (ternary, group 128)"),
    (156, "IQ3_KS in ik_llama.cpp"),
];

/// The fork known to use type id `id`, if any (for unknown ids).
pub fn fork_using(id: u32) -> Option<&'static str> {
    FORK_IDS.iter().find(|(i, _)| *i == id).map(|(_, w)| *w)
}

/// Each tensor's stored size, measured as the distance to the next
/// tensor's data (or to the file's end for the last), against its declared
/// type's layout: llama.cpp and gguf-py write tensors back to back, each
/// padded to the alignment, so a tensor of `n` bytes spans `n` to
/// `n` rounded up to the alignment. A span outside that holds some other
/// layout. Run twice: before the bounds and overlap checks with `forks_only`
/// (a span that fits a known fork's layout, so the file is named as that
/// fork's rather than as overlapping or truncated), and after them for any
/// span too long. A short span that fits no known layout is left to those
/// checks (an overlap or a truncated file), and trailing bytes after the
/// last tensor are allowed unless they fit a fork's layout.
pub(crate) fn check_sizes<'a>(
    path: &Path,
    file_len: u64,
    data_offset: u64,
    alignment: u64,
    count: usize,
    tensor: impl Fn(usize) -> Stored<'a>,
    forks_only: bool,
) -> Result<()> {
    // Indices, 4 bytes each (hostile headers hold millions of tensors).
    let mut order: Vec<u32> = (0..count as u32).filter(|&i| tensor(i as usize).nbytes > 0).collect();
    order.sort_unstable_by_key(|&i| tensor(i as usize).offset);
    for (i, &k) in order.iter().enumerate() {
        let t = tensor(k as usize);
        let last = i + 1 == order.len();
        let end = match order.get(i + 1) {
            Some(&next) => tensor(next as usize).offset,
            None => file_len.saturating_sub(data_offset),
        };
        let Some(found) = end.checked_sub(t.offset) else { continue };
        let padded = t.nbytes.div_ceil(alignment).saturating_mul(alignment);
        if (t.nbytes..=padded).contains(&found) {
            continue;
        }
        let fork = fork_layout(&t, found, alignment);
        if fork.is_some() || (!forks_only && found > padded && !last) {
            let id = t.ggml_type.id();
            let kind = ErrorKind::TypeSizeMismatch { type_id: id, dtype: t.ggml_type.name(), expected: t.nbytes, found, fork };
            return Err(FormatError::at(path, data_offset.saturating_add(t.offset), kind).with_tensor(t.name));
        }
    }
    Ok(())
}

/// The fork layout a span of `found` bytes fits for this tensor's id and
/// element count (exactly, or padded to the alignment).
fn fork_layout(t: &Stored, found: u64, alignment: u64) -> Option<&'static str> {
    let n = t.elems;
    FORK_LAYOUTS.iter().find_map(|&(id, elems, bytes, what)| {
        let size = (n % elems == 0).then(|| n / elems * bytes)?;
        (id == t.ggml_type.id() && (size..=size.div_ceil(alignment) * alignment).contains(&found)).then_some(what)
    })
}

/// What a metadata key declares, if it names a transform of the weights
/// (a rotation, permutation or codebook) that weightstream does not apply:
/// a dotted segment starting with one of these words. No key llama.cpp or
/// gguf-py 0.19 defines has one (its constants were searched).
pub fn transform_of(key: &str) -> Option<&'static str> {
    const WORDS: &[(&str, &str)] = &[
        ("hadamard", "a Hadamard rotation of the weights"),
        ("rotation", "a rotation of the weights"),
        ("permutation", "a permutation of the weights"),
        ("codebook", "a codebook the weights index"),
    ];
    key.split('.').find_map(|seg| {
        let seg = seg.to_ascii_lowercase();
        WORDS.iter().find(|(w, _)| seg.starts_with(w)).map(|(_, what)| *what)
    })
}

/// The first metadata key declaring such a transform, refused unless the
/// caller asked to load anyway.
pub(crate) fn check_transforms(path: &Path, metadata: &[(String, MetadataValue)]) -> Result<()> {
    match metadata.iter().find_map(|(k, _)| transform_of(k).map(|w| (k, w))) {
        Some((key, what)) => Err(FormatError::new(path, None, ErrorKind::WeightTransform { key: key.clone(), what })),
        None => Ok(()),
    }
}
