//! GGUF split sets, as llama.cpp's `llama-gguf-split` writes them:
//! `<prefix>-00001-of-00004.gguf` ... `<prefix>-00004-of-00004.gguf`, each a
//! complete GGUF holding some of the tensors, with keys `split.no` (0-based),
//! `split.count` and `split.tensors.count` (the whole set's tensors). The
//! first holds the model's metadata. A set opens as one checkpoint, from any
//! of its files or from its directory; a missing, repeated or inconsistent
//! shard is an error naming the file, never a partial result.

use std::path::{Path, PathBuf};

use super::reader::GgufHeader;
use crate::error::{ErrorKind, FormatError, Result};

pub const KEY_NO: &str = "split.no";
pub const KEY_COUNT: &str = "split.count";
pub const KEY_TENSORS: &str = "split.tensors.count";

/// llama.cpp caps the number of splits at what `%05d` can name.
const MAX_SPLITS: u64 = 99_999;

/// A file name's place in a set: `<prefix>-NNNNN-of-MMMMM.gguf` (1-based
/// NNNNN, as llama.cpp's `llama_split_path` writes it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitName {
    pub prefix: String,
    /// 0-based, as `split.no`.
    pub no: u64,
    pub count: u64,
}

impl SplitName {
    pub fn parse(path: &Path) -> Option<SplitName> {
        let name = path.file_name()?.to_str()?;
        let stem = name.strip_suffix(".gguf")?;
        // "<prefix>-NNNNN-of-MMMMM": the last 15 characters are fixed.
        let tail = stem.get(stem.len().checked_sub(15)?..)?;
        let prefix = stem.get(..stem.len() - 15)?;
        let (no, count) = tail.strip_prefix('-')?.split_once("-of-")?;
        let digits = |s: &str| s.len() == 5 && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(no) || !digits(count) || prefix.is_empty() {
            return None;
        }
        let (no, count): (u64, u64) = (no.parse().ok()?, count.parse().ok()?);
        (no >= 1 && no <= count).then(|| SplitName { prefix: prefix.to_string(), no: no - 1, count })
    }

    /// The file name of shard `no` (0-based) of this set.
    pub fn file_name(&self, no: u64) -> String {
        format!("{}-{:05}-of-{:05}.gguf", self.prefix, no + 1, self.count)
    }

    /// The path of shard `no` (0-based) of this set, beside `dir`.
    pub fn path(&self, dir: &Path, no: u64) -> PathBuf {
        dir.join(self.file_name(no))
    }
}

/// What a header says about its place in a split set: `None` for a plain
/// file (no `split.count`, or a count of 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitInfo {
    pub no: u64,
    pub count: u64,
    pub tensors: Option<u64>,
}

/// The header's split keys, checked for type and range.
pub fn info(path: &Path, h: &GgufHeader) -> Result<Option<SplitInfo>> {
    let int = |k: &str| -> Result<Option<u64>> {
        match h.get(k) {
            None => Ok(None),
            Some(v) => v.as_u64().map(Some).ok_or_else(|| {
                FormatError::new(
                    path,
                    None,
                    ErrorKind::BadSplit(format!("'{k}' is {} {}, not a non-negative integer", v.type_name(), v.summary(40))),
                )
            }),
        }
    };
    let (count, no, tensors) = (int(KEY_COUNT)?, int(KEY_NO)?, int(KEY_TENSORS)?);
    let Some(count) = count else {
        return Ok(None);
    };
    if count == 0 || count > MAX_SPLITS {
        return Err(FormatError::new(path, None, ErrorKind::BadSplit(format!("'{KEY_COUNT}' is {count} (1 to {MAX_SPLITS})"))));
    }
    if count == 1 {
        // A one-file "set" (llama-gguf-split with nothing to split) is a
        // plain file.
        if let Some(no) = no.filter(|&n| n != 0) {
            return Err(FormatError::new(path, None, ErrorKind::BadSplit(format!("'{KEY_NO}' is {no}, but the set has 1 file"))));
        }
        return Ok(None);
    }
    // llama.cpp refuses a shard of a set without its number, and a set whose
    // first file does not say how many tensors it holds: so do we (a guess
    // would hide a renamed or foreign file).
    let Some(no) = no else {
        return Err(FormatError::new(path, None, ErrorKind::BadSplit(format!("'{KEY_COUNT}' is {count} but '{KEY_NO}' is missing"))));
    };
    if no == 0 && tensors.is_none() {
        return Err(FormatError::new(
            path,
            None,
            ErrorKind::BadSplit(format!("the first shard of a {count}-file set has no '{KEY_TENSORS}'")),
        ));
    }
    if no >= count {
        return Err(FormatError::new(path, None, ErrorKind::BadSplit(format!("'{KEY_NO}' is {no}, but the set has {count} files"))));
    }
    Ok(Some(SplitInfo { no, count, tensors }))
}

/// The file names of the set `path` belongs to (described by `info`), in
/// order: found by llama.cpp's naming rule, beside `path`. Errors: a name
/// that does not follow the rule or disagrees with the header.
pub fn set_names(path: &Path, info: SplitInfo) -> Result<Vec<String>> {
    let name = SplitName::parse(path).ok_or_else(|| {
        FormatError::new(
            path,
            None,
            ErrorKind::BadSplit(format!(
                "shard {} of a {}-file split set, but its name does not follow llama.cpp's <prefix>-NNNNN-of-NNNNN.gguf, \
                 so the other shards cannot be found (rename the files as llama-gguf-split wrote them)",
                info.no + 1,
                info.count
            )),
        )
    })?;
    if name.no != info.no || name.count != info.count {
        return Err(FormatError::new(
            path,
            None,
            ErrorKind::BadSplit(format!(
                "the name says shard {} of {}, the header says {} of {}",
                name.no + 1,
                name.count,
                info.no + 1,
                info.count
            )),
        ));
    }
    Ok((0..info.count).map(|no| name.file_name(no)).collect())
}

/// A file whose header is not part of a set (no `split.count`, or 1) but
/// whose name says it is shard N of M > 1: loading it alone would give part
/// of a model with exit 0 (issue 27), so the disagreement is refused.
pub fn check_plain_name(path: &Path) -> Result<()> {
    match SplitName::parse(path) {
        Some(name) if name.count > 1 => Err(FormatError::new(
            path,
            None,
            ErrorKind::BadSplit(format!(
                "the name says shard {} of a {}-file split set, but the header has no '{KEY_COUNT}' > 1: \
                 it holds only part of a model or was renamed (llama-gguf-split writes the split keys into every shard)",
                name.no + 1,
                name.count
            )),
        )),
        _ => Ok(()),
    }
}

/// Shard `expected_no` of a set of `count`: its header must say so, and
/// carry the same tensor total as the first.
pub fn check_shard(path: &Path, h: &GgufHeader, expected_no: u64, count: u64, tensors: Option<u64>) -> Result<()> {
    let found = info(path, h)?;
    let (no, c, t) = match found {
        Some(i) => (i.no, i.count, i.tensors),
        None => {
            return Err(FormatError::new(
                path,
                None,
                ErrorKind::BadSplit(format!("expected shard {} of {count}, found a file that is not part of a split set", expected_no + 1)),
            ))
        }
    };
    if c != count || no != expected_no {
        return Err(FormatError::new(
            path,
            None,
            ErrorKind::BadSplit(format!("expected shard {} of {count}, the header says shard {} of {c}", expected_no + 1, no + 1)),
        ));
    }
    if t.is_some() && tensors.is_some() && t != tensors {
        return Err(FormatError::new(
            path,
            None,
            ErrorKind::BadSplit(format!("'{KEY_TENSORS}' is {}, the first shard says {}", t.unwrap_or(0), tensors.unwrap_or(0))),
        ));
    }
    Ok(())
}

/// What to tell a user whose directory holds several GGUF files that are not
/// one split set: each candidate to pass (a set by its first file, with how
/// many of its files are present), at most `SHOWN` of them.
pub fn which_to_pass(files: &[PathBuf], names: &[Option<SplitName>]) -> String {
    const SHOWN: usize = 8;
    let mut sets: Vec<(&SplitName, usize)> = Vec::new();
    let mut candidates: Vec<String> = Vec::new();
    for (f, n) in files.iter().zip(names) {
        match n {
            Some(n) => match sets.iter_mut().find(|(s, _)| s.prefix == n.prefix && s.count == n.count) {
                Some((_, present)) => *present += 1,
                None => sets.push((n, 1)),
            },
            None => candidates.push(format!("'{}'", f.file_name().unwrap_or(f.as_os_str()).to_string_lossy())),
        }
    }
    let mut all: Vec<String> = sets
        .iter()
        .map(|(n, present)| {
            let first = n.path(Path::new(""), 0);
            format!("split set '{}' ({present} of its {} files here)", first.display(), n.count)
        })
        .collect();
    all.append(&mut candidates);
    let more = all.len().saturating_sub(SHOWN);
    all.truncate(SHOWN);
    let tail = if more > 0 { format!(" and {more} more") } else { String::new() };
    format!(
        "{} GGUF files that are not one checkpoint: {}{tail}; pass the one to load (a split set: its first file)",
        files.len(),
        all.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_llama_cpp() {
        let n = SplitName::parse(Path::new("/m/Llama-3-Q4_K_M-00002-of-00004.gguf")).unwrap();
        assert_eq!(n, SplitName { prefix: "Llama-3-Q4_K_M".into(), no: 1, count: 4 });
        assert_eq!(n.path(Path::new("/m"), 0), Path::new("/m/Llama-3-Q4_K_M-00001-of-00004.gguf"));
        for bad in [
            "m-0001-of-00004.gguf",
            "m-00005-of-00004.gguf",
            "m-00000-of-00004.gguf",
            "-00001-of-00002.gguf",
            "m-00001-of-00002.bin",
            "m.gguf",
            "m-0000a-of-00002.gguf",
        ] {
            assert_eq!(SplitName::parse(Path::new(bad)), None, "{bad}");
        }
    }
}
