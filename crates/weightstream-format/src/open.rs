//! Opening a checkpoint: a GGUF file, a safetensors file, or a directory of
//! shards. Touches only headers (and small JSON files).

use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value as Json;

use crate::catalog::{Catalog, CatalogFile, Dtype, Format, Metadata, Role, TensorInfo};
use crate::error::{ErrorKind, FormatError, Result};
use crate::fp8::pair_scales;
use crate::gguf::reader::first_duplicate;
use crate::listing::{Entry, Listing, LocalDir};
use crate::packed::pair_packed;
use crate::safetensors::index::{read_index, read_json, INDEX_FILE};
use crate::{gguf, safetensors};
use weightstream_io::{MmapSource, SharedSource, SourceKind};

pub use crate::listing::SourceOpener;

pub const CONFIG_FILE: &str = "config.json";
const MAX_CONFIG_LEN: u64 = 16 << 20;

pub fn mmap_opener(path: &Path) -> io::Result<SharedSource> {
    Ok(Arc::new(MmapSource::open(path)?))
}

/// Open `path` (file or checkpoint directory), reading with the default
/// source (positioned reads).
pub fn open(path: &Path) -> Result<Catalog> {
    open_kind(path, SourceKind::default())
}

/// Open `path` reading with `kind`.
pub fn open_kind(path: &Path, kind: SourceKind) -> Result<Catalog> {
    open_with(path, &|p: &Path| kind.open(p))
}

/// What opening accepts beyond a plain checkpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenOptions {
    /// Open GGUF files whose metadata declares a transform of the weights
    /// (a Hadamard rotation, a permutation, a codebook:
    /// `gguf::lookalike::transform_of`) that weightstream does not apply,
    /// ignoring it: their weights load as stored, untransformed.
    pub ignore_transforms: bool,
}

pub fn open_with(path: &Path, opener: SourceOpener) -> Result<Catalog> {
    open_with_options(path, opener, OpenOptions::default())
}

pub fn open_with_options(path: &Path, opener: SourceOpener, opts: OpenOptions) -> Result<Catalog> {
    let meta = std::fs::metadata(path).map_err(|e| FormatError::io(path, None, &e))?;
    if !meta.is_dir() && !meta.is_file() {
        // A FIFO, socket or device: reading one can block forever (issue 14).
        return Err(not_regular(path, "the path"));
    }
    if meta.is_dir() {
        return open_listing(&LocalDir::new(path, opener), None, opts);
    }
    // A file is opened in its directory: config.json and a split set's
    // other shards are beside it.
    let (dir, name) = match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => (dir, name),
        _ => (Path::new(""), path.as_os_str()),
    };
    open_listing(&LocalDir::new(dir, opener), Some(name), opts)
}

/// Open the checkpoint in `dir`: the whole directory (`file` None: an
/// index and its shards, unindexed shards, or one GGUF / one split set), or
/// the file `file` in it (with the `config.json` beside it, or the rest of
/// its split set). Every file is reached through `dir`, so a remote prefix
/// opens without a local copy of its listing; errors name `dir.path`s.
pub fn open_listing(dir: &dyn Listing, file: Option<&OsStr>, opts: OpenOptions) -> Result<Catalog> {
    let Some(name) = file else { return open_dir(dir, opts) };
    let path = dir.path(name);
    let src = open_source(dir, name)?;
    if is_gguf(&path, &*src) {
        open_gguf(dir, name, src, opts)
    } else {
        let config = read_config(dir)?;
        open_safetensors(&path, vec![src], None, config, &dir.path(OsStr::new(CONFIG_FILE)))
    }
}

/// A path that is not a regular file (nor, where allowed, a directory).
fn not_regular(path: &Path, what: &str) -> FormatError {
    FormatError::new(path, None, ErrorKind::NotRegularFile(what.to_string()))
}

fn open_source(dir: &dyn Listing, name: &OsStr) -> Result<SharedSource> {
    dir.open(name).map_err(|e| FormatError::io(&dir.path(name), None, &e))
}

/// Whether `name` is a regular file of `dir` (an unreadable one is not).
fn is_file(dir: &dyn Listing, name: &str) -> bool {
    matches!(dir.entry(OsStr::new(name)), Ok(Some(Entry::File { .. })))
}

/// GGUF by extension, or by magic for files without one.
fn is_gguf(path: &Path, src: &dyn weightstream_io::ByteSource) -> bool {
    match path.extension().and_then(|e| e.to_str()) {
        Some("gguf") => true,
        Some("safetensors") => false,
        _ => {
            let mut magic = [0u8; 4];
            src.read_at(0, &mut magic).is_ok() && &magic == gguf::reader::MAGIC
        }
    }
}

/// GGUF file `name` of `dir`, or the whole split set it belongs to
/// (gguf/split.rs).
fn open_gguf(dir: &dyn Listing, name: &OsStr, src: SharedSource, opts: OpenOptions) -> Result<Catalog> {
    let path = dir.path(name);
    let h = gguf::read_header(&*src)?;
    if !opts.ignore_transforms {
        gguf::lookalike::check_transforms(&path, &h.metadata)?;
    }
    let Some(info) = gguf::split::info(&path, &h)? else {
        gguf::split::check_plain_name(&path)?;
        return gguf_catalog(&path, vec![(src, h)]);
    };
    let names = gguf::split::set_names(&path, info)?;
    let mut given = Some((src, h));
    let mut parts: Vec<(SharedSource, gguf::GgufHeader)> = Vec::with_capacity(names.len());
    let mut identities: Vec<Option<(u64, u64)>> = Vec::with_capacity(names.len());
    let mut tensors_total = None;
    for (no, n) in names.iter().enumerate() {
        let n = OsStr::new(n);
        let p = dir.path(n);
        let bad = |why: String| FormatError::new(&p, None, ErrorKind::BadSplit(format!("shard {} of {} {why}", no + 1, info.count)));
        let identity = match dir.entry(n) {
            Ok(Some(Entry::File { identity, .. })) => identity,
            Ok(Some(Entry::Other)) => return Err(bad("is not a regular file".into())),
            Ok(None) => return Err(bad("is missing".into())),
            Err(e) => return Err(bad(format!("cannot be read: {e}"))),
        };
        if let Some(first) = identities.iter().position(|i| i.is_some() && *i == identity) {
            return Err(FormatError::new(
                &p,
                None,
                ErrorKind::BadSplit(format!(
                    "shard {} is the same file as shard {} ({})",
                    no + 1,
                    first + 1,
                    dir.path(OsStr::new(&names[first])).display()
                )),
            ));
        }
        identities.push(identity);
        let (s, h) = match given.take_if(|_| no as u64 == info.no) {
            Some(sh) => sh,
            None => {
                let s = open_source(dir, n)?;
                let h = gguf::read_header(&*s)?;
                if !opts.ignore_transforms {
                    gguf::lookalike::check_transforms(&p, &h.metadata)?;
                }
                (s, h)
            }
        };
        if no == 0 {
            tensors_total = gguf::split::info(&p, &h)?.and_then(|i| i.tensors);
        }
        gguf::split::check_shard(&p, &h, no as u64, info.count, tensors_total)?;
        parts.push((s, h));
    }
    let found: u64 = parts.iter().map(|(_, h)| h.tensors.len() as u64).sum();
    let first = dir.path(OsStr::new(&names[0]));
    if let Some(total) = tensors_total.filter(|&t| t != found) {
        return Err(FormatError::new(
            &first,
            None,
            ErrorKind::BadSplit(format!("'{}' is {total}, the {} shards hold {found} tensors", gguf::split::KEY_TENSORS, names.len())),
        ));
    }
    let mut cat = gguf_catalog(&first, parts)?;
    cat.root = path;
    Ok(cat)
}

/// One catalog over GGUF files (one, or a split set's shards in order):
/// metadata from the first, tensors in file then offset order.
fn gguf_catalog(root: &Path, parts: Vec<(SharedSource, gguf::GgufHeader)>) -> Result<Catalog> {
    let mut tensors = Vec::new();
    for (fi, (_, h)) in parts.iter().enumerate() {
        let mut these: Vec<TensorInfo> = h
            .tensors
            .iter()
            .map(|t| TensorInfo {
                name: t.name.clone(),
                dtype: Dtype::Ggml(t.ggml_type),
                shape: t.ne.iter().rev().copied().collect(),
                file: fi,
                offset: h.data_offset + t.offset,
                nbytes: t.nbytes,
                role: Role::Data,
                scale: None,
                packed: None,
            })
            .collect();
        these.sort_by_key(|t| t.offset);
        tensors.extend(these);
    }
    // The same name in two shards (each header already refused repeats).
    if let Some((i, _)) = first_duplicate(&tensors, |t| &t.name) {
        let t = &tensors[i];
        return Err(FormatError::at(parts[t.file].0.path(), t.offset, ErrorKind::DuplicateTensor).with_tensor(&t.name));
    }
    let mut parts = parts.into_iter();
    let (first_src, first) = parts.next().expect("at least one file");
    let mut files = vec![CatalogFile { path: first_src.path().to_path_buf(), source: first_src }];
    files.extend(parts.map(|(s, _)| CatalogFile { path: s.path().to_path_buf(), source: s }));
    Ok(Catalog {
        format: Format::Gguf,
        root: root.to_path_buf(),
        files,
        metadata: Metadata::Gguf { version: first.version, alignment: first.alignment, kv: first.metadata },
        tensors,
        config: None,
    })
}

fn read_config(dir: &dyn Listing) -> Result<Option<Json>> {
    if !is_file(dir, CONFIG_FILE) {
        return Ok(None);
    }
    let json = read_json(dir, CONFIG_FILE, MAX_CONFIG_LEN, ErrorKind::BadConfig)?;
    if !json.is_object() {
        return Err(FormatError::new(&dir.path(OsStr::new(CONFIG_FILE)), None, ErrorKind::BadConfig("not a JSON object".into())));
    }
    Ok(Some(json))
}

fn open_dir(dir: &dyn Listing, opts: OpenOptions) -> Result<Catalog> {
    let root = dir.path(OsStr::new(""));
    let config_path = dir.path(OsStr::new(CONFIG_FILE));
    let config = read_config(dir)?;
    if is_file(dir, INDEX_FILE) {
        let index_path = dir.path(OsStr::new(INDEX_FILE));
        let weight_map = read_index(dir, INDEX_FILE)?;
        if weight_map.is_empty() {
            // Loading zero tensors from a directory of shards is never what
            // was meant (issue 14).
            return Err(FormatError::new(&index_path, None, ErrorKind::BadIndex("its weight_map maps no tensors".into())));
        }
        let shard_names: Vec<String> = weight_map.values().cloned().collect::<std::collections::BTreeSet<_>>().into_iter().collect();
        let mut sources = Vec::with_capacity(shard_names.len());
        for name in &shard_names {
            let n = OsStr::new(name);
            match dir.entry(n) {
                Ok(Some(Entry::File { .. })) => {}
                Ok(Some(Entry::Other)) => return Err(not_regular(&dir.path(n), &format!("shard '{name}' named by the index"))),
                _ => return Err(FormatError::new(&index_path, None, ErrorKind::BadIndex(format!("shard '{name}' is missing")))),
            }
            sources.push(open_source(dir, n)?);
        }
        return open_safetensors(&root, sources, Some((&index_path, &weight_map)), config, &config_path);
    }
    let mut st = Vec::new();
    let mut gg = Vec::new();
    for name in dir.files().map_err(|e| FormatError::io(&root, None, &e))? {
        // Hidden files are not shards: editors' and our own `.x.partial-PID`
        // leftovers would otherwise be loaded as part of the model.
        if name.as_encoded_bytes().starts_with(b".") {
            continue;
        }
        match Path::new(&name).extension().and_then(|e| e.to_str()) {
            Some("safetensors") => st.push(name),
            Some("gguf") => gg.push(name),
            _ => {}
        }
    }
    st.sort();
    gg.sort();
    if !st.is_empty() {
        let sources = st.iter().map(|n| open_source(dir, n)).collect::<Result<Vec<_>>>()?;
        return open_safetensors(&root, sources, None, config, &config_path);
    }
    match gg.as_slice() {
        [one] => open_gguf(dir, one, open_source(dir, one)?, opts),
        [] => Err(FormatError::new(&root, None, ErrorKind::NoCheckpoint("no *.safetensors or *.gguf files".into()))),
        many => {
            // One split set and nothing else opens as that set (from its
            // first shard: a missing one is reported by name).
            let names: Vec<Option<gguf::split::SplitName>> = many.iter().map(|n| gguf::split::SplitName::parse(Path::new(n))).collect();
            let sets: std::collections::BTreeSet<(String, u64)> = names.iter().flatten().map(|n| (n.prefix.clone(), n.count)).collect();
            if names.iter().all(Option::is_some) && sets.len() == 1 {
                let n = names[0].as_ref().expect("all parsed");
                let first = OsString::from(n.file_name(0));
                let start = if matches!(dir.entry(&first), Ok(Some(_))) { first.as_os_str() } else { many[0].as_os_str() };
                return open_gguf(dir, start, open_source(dir, start)?, opts);
            }
            let paths: Vec<PathBuf> = many.iter().map(|n| dir.path(n)).collect();
            Err(FormatError::new(&root, None, ErrorKind::NoCheckpoint(gguf::split::which_to_pass(&paths, &names))))
        }
    }
}

/// A catalog of safetensors sources already open (any byte source), with
/// the checkpoint's config.json if any: what `open` does after finding the
/// files. Used by the fuzzers and by callers with their own sources.
pub fn safetensors_catalog(root: &Path, sources: Vec<SharedSource>, config: Option<Json>) -> Result<Catalog> {
    // Beside the shards: in the directory, or beside the single file.
    let config_dir = if root.is_dir() { root } else { root.parent().unwrap_or(Path::new(".")) };
    open_safetensors(root, sources, None, config, &config_dir.join(CONFIG_FILE))
}

fn open_safetensors(
    root: &Path,
    sources: Vec<SharedSource>,
    index: Option<(&Path, &BTreeMap<String, String>)>,
    config: Option<Json>,
    config_path: &Path,
) -> Result<Catalog> {
    let mut tensors = Vec::new();
    let mut metadata = BTreeMap::new();
    for (fi, src) in sources.iter().enumerate() {
        let h = safetensors::read_header(&**src)?;
        for (k, v) in h.metadata {
            metadata.entry(k).or_insert(v);
        }
        tensors.extend(h.tensors.into_iter().map(|t| TensorInfo {
            name: t.name,
            dtype: Dtype::St(t.dtype),
            shape: t.shape,
            file: fi,
            offset: t.start,
            nbytes: t.end - t.start,
            role: Role::Data,
            scale: None,
            packed: None,
        }));
    }
    // The same name in two shards (each header already refused repeats).
    if let Some((i, _)) = first_duplicate(&tensors, |t| &t.name) {
        let t = &tensors[i];
        return Err(FormatError::at(sources[t.file].path(), t.offset, ErrorKind::DuplicateTensor).with_tensor(&t.name));
    }
    if let Some((index_path, map)) = index {
        check_index(index_path, map, &sources, &tensors)?;
    }
    crate::features::refuse_config(config.as_ref(), config_path)?;
    let quant = crate::quant_config::QuantConfig::parse(config.as_ref(), config_path)?;
    let blocks = quant.as_ref().map(|q| q.fp8_blocks(&tensors)).unwrap_or_default();
    let paths: Vec<PathBuf> = sources.iter().map(|s| s.path().to_path_buf()).collect();
    crate::features::refuse_tensors(&tensors, |i| paths[i].as_path())?;
    pair_scales(&mut tensors, &|name| blocks.get(name).copied(), |i| paths[i].as_path())?;
    let read_small = |t: &TensorInfo| {
        let mut b = vec![0u8; t.nbytes.min(crate::packed::MAX_READ) as usize];
        sources[t.file].read_at(t.offset, &mut b)?;
        Ok(b)
    };
    pair_packed(&mut tensors, &read_small, |i| paths[i].as_path())?;
    crate::packed::check_against_config(config.as_ref(), config_path, &tensors, |i| paths[i].as_path())?;
    if let Some(q) = &quant {
        crate::quant_config::check(q, config_path, &tensors, |i| paths[i].as_path())?;
    }
    Ok(Catalog {
        format: Format::Safetensors,
        root: root.to_path_buf(),
        files: sources.into_iter().map(|s| CatalogFile { path: s.path().to_path_buf(), source: s }).collect(),
        metadata: Metadata::Safetensors(metadata),
        tensors,
        config,
    })
}

/// Every tensor the index names is in the shard it names, and every tensor
/// of those shards is in the index (an unmapped one would be loaded by us and
/// ignored by loaders that follow the index).
fn check_index(index_path: &Path, map: &BTreeMap<String, String>, sources: &[SharedSource], tensors: &[TensorInfo]) -> Result<()> {
    let file_names: Vec<Option<String>> = sources.iter().map(|s| s.path().file_name().map(|n| n.to_string_lossy().into_owned())).collect();
    let found: HashMap<&str, usize> = tensors.iter().map(|t| (t.name.as_str(), t.file)).collect();
    for (name, shard) in map {
        let actual = found.get(name.as_str()).and_then(|&fi| file_names[fi].as_deref());
        if actual != Some(shard.as_str()) {
            let reason = match actual {
                None => format!("tensor '{name}' is listed in shard '{shard}' but is in no shard"),
                Some(a) => format!("tensor '{name}' is listed in shard '{shard}' but is in '{a}'"),
            };
            return Err(FormatError::new(index_path, None, ErrorKind::BadIndex(reason)).with_tensor(name));
        }
    }
    if let Some(t) = tensors.iter().find(|t| !map.contains_key(&t.name)) {
        let shard = file_names[t.file].as_deref().unwrap_or("?");
        return Err(FormatError::new(
            index_path,
            None,
            ErrorKind::BadIndex(format!("tensor '{}' of shard '{shard}' is not in the weight_map", t.name)),
        )
        .with_tensor(&t.name));
    }
    Ok(())
}
