//! `model.safetensors.index.json`: which shard holds which tensor.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io;
use std::path::{Component, Path};

use serde_json::Value as Json;

use crate::error::{ErrorKind, FormatError, Result};
use crate::listing::{Entry, Listing};

pub const INDEX_FILE: &str = "model.safetensors.index.json";
/// Same cap as a safetensors header: an index is a name-to-file map.
pub const MAX_INDEX_LEN: u64 = 100_000_000;

/// Tensor name to shard file name.
pub type WeightMap = BTreeMap<String, String>;

/// The weight map of index file `name` in `dir`.
pub fn read_index(dir: &dyn Listing, name: &str) -> Result<WeightMap> {
    let json = read_json(dir, name, MAX_INDEX_LEN, ErrorKind::BadIndex)?;
    let path = dir.path(OsStr::new(name));
    let bad = |m: String| FormatError::new(&path, None, ErrorKind::BadIndex(m));
    let map = json.get("weight_map").and_then(Json::as_object).ok_or_else(|| bad("no 'weight_map' object".into()))?;
    let mut out = WeightMap::new();
    for (name, file) in map {
        let file = file.as_str().ok_or_else(|| bad(format!("shard of '{name}' is not a string")))?;
        if !is_plain_file_name(file) {
            return Err(bad(format!("shard '{file}' of '{name}' is not a plain file name in the checkpoint directory")));
        }
        out.insert(name.clone(), file.to_string());
    }
    Ok(out)
}

/// Only names of files in the same directory: no separators, no `..`, not
/// absolute. An index from the internet must not point elsewhere.
fn is_plain_file_name(name: &str) -> bool {
    let p = Path::new(name);
    !name.is_empty() && !name.contains('\\') && p.components().count() == 1 && matches!(p.components().next(), Some(Component::Normal(_)))
}

/// Read JSON file `name` of `dir`, of at most `cap` bytes.
pub fn read_json(dir: &dyn Listing, name: &str, cap: u64, kind: impl Fn(String) -> ErrorKind) -> Result<Json> {
    let name = OsStr::new(name);
    let path = dir.path(name);
    let len = match dir.entry(name) {
        Ok(Some(Entry::File { len, .. })) => len,
        Ok(Some(Entry::Other)) => return Err(FormatError::new(&path, None, ErrorKind::NotRegularFile("the JSON file".into()))),
        Ok(None) => return Err(FormatError::io(&path, None, &io::Error::from(io::ErrorKind::NotFound))),
        Err(e) => return Err(FormatError::io(&path, None, &e)),
    };
    if len > cap {
        return Err(FormatError::at(&path, 0, ErrorKind::LimitExceeded { what: "JSON file size", value: len, limit: cap }));
    }
    let bytes = dir.read(name).map_err(|e| FormatError::io(&path, None, &e))?;
    serde_json::from_slice(&bytes).map_err(|e| FormatError::new(&path, None, kind(e.to_string())))
}

#[cfg(test)]
mod tests {
    use super::is_plain_file_name;

    #[test]
    fn shard_names_stay_inside() {
        assert!(is_plain_file_name("model-00001-of-00002.safetensors"));
        for bad in ["", "../x", "/etc/passwd", "a/b", "..", ".", "a\\b"] {
            assert!(!is_plain_file_name(bad), "{bad}");
        }
    }
}
