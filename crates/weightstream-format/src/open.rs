//! Opening a checkpoint: a GGUF file, a safetensors file, or a directory of
//! shards. Touches only headers (and small JSON files).

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value as Json;

use crate::catalog::{Catalog, CatalogFile, Dtype, Format, Metadata, Role, TensorInfo};
use crate::error::{ErrorKind, FormatError, Result};
use crate::fp8::{config_block_size, pair_scales};
use crate::gguf::reader::first_duplicate;
use crate::safetensors::index::{read_index, read_json_file, INDEX_FILE};
use weightstream_io::{MmapSource, SharedSource, SourceKind};
use crate::{gguf, safetensors};

/// Opens one file as a byte source (mmap by default; the load path may pass
/// another).
pub type SourceOpener<'a> = &'a dyn Fn(&Path) -> io::Result<SharedSource>;

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

pub fn open_with(path: &Path, opener: SourceOpener) -> Result<Catalog> {
    let meta = std::fs::metadata(path).map_err(|e| FormatError::io(path, None, &e))?;
    if meta.is_dir() {
        open_dir(path, opener)
    } else {
        let src = open_source(path, opener)?;
        if is_gguf(path, &*src) {
            open_gguf(path, src)
        } else {
            let config = read_config(path.parent().unwrap_or(Path::new(".")))?;
            open_safetensors(path, vec![src], None, config)
        }
    }
}

fn open_source(path: &Path, opener: SourceOpener) -> Result<SharedSource> {
    opener(path).map_err(|e| FormatError::io(path, None, &e))
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

fn open_gguf(path: &Path, src: SharedSource) -> Result<Catalog> {
    let h = gguf::read_header(&*src)?;
    let tensors = h
        .tensors
        .iter()
        .map(|t| TensorInfo {
            name: t.name.clone(),
            dtype: Dtype::Ggml(t.ggml_type),
            shape: t.ne.iter().rev().copied().collect(),
            file: 0,
            offset: h.data_offset + t.offset,
            nbytes: t.nbytes,
            role: Role::Data,
            scale: None,
        })
        .collect::<Vec<_>>();
    let mut tensors = tensors;
    tensors.sort_by_key(|t| t.offset);
    Ok(Catalog {
        format: Format::Gguf,
        root: path.to_path_buf(),
        files: vec![CatalogFile { path: path.to_path_buf(), source: src }],
        metadata: Metadata::Gguf { version: h.version, alignment: h.alignment, kv: h.metadata },
        tensors,
        config: None,
    })
}

fn read_config(dir: &Path) -> Result<Option<Json>> {
    let p = dir.join(CONFIG_FILE);
    if !p.is_file() {
        return Ok(None);
    }
    let json = read_json_file(&p, MAX_CONFIG_LEN, ErrorKind::BadConfig)?;
    if !json.is_object() {
        return Err(FormatError::new(&p, None, ErrorKind::BadConfig("not a JSON object".into())));
    }
    Ok(Some(json))
}

fn open_dir(dir: &Path, opener: SourceOpener) -> Result<Catalog> {
    let index_path = dir.join(INDEX_FILE);
    let config = read_config(dir)?;
    if index_path.is_file() {
        let weight_map = read_index(&index_path)?;
        let shard_names: Vec<String> = weight_map.values().cloned().collect::<std::collections::BTreeSet<_>>().into_iter().collect();
        let mut sources = Vec::with_capacity(shard_names.len());
        for name in &shard_names {
            let p = dir.join(name);
            if !p.is_file() {
                return Err(FormatError::new(&index_path, None, ErrorKind::BadIndex(format!("shard '{name}' is missing"))));
            }
            sources.push(open_source(&p, opener)?);
        }
        return open_safetensors(dir, sources, Some((&index_path, &weight_map)), config);
    }
    let mut st = Vec::new();
    let mut gg = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| FormatError::io(dir, None, &e))? {
        let p = entry.map_err(|e| FormatError::io(dir, None, &e))?.path();
        if !p.is_file() {
            continue;
        }
        match p.extension().and_then(|e| e.to_str()) {
            Some("safetensors") => st.push(p),
            Some("gguf") => gg.push(p),
            _ => {}
        }
    }
    st.sort();
    gg.sort();
    if !st.is_empty() {
        let sources = st.iter().map(|p| open_source(p, opener)).collect::<Result<Vec<_>>>()?;
        return open_safetensors(dir, sources, None, config);
    }
    match gg.as_slice() {
        [one] => open_gguf(one, open_source(one, opener)?),
        [] => Err(FormatError::new(dir, None, ErrorKind::NoCheckpoint("no *.safetensors or *.gguf files".into()))),
        many => Err(FormatError::new(
            dir,
            None,
            ErrorKind::NoCheckpoint(format!("{} GGUF files; pass the one to load", many.len())),
        )),
    }
}

/// A catalog of safetensors sources already open (any byte source), with
/// the checkpoint's config.json if any: what `open` does after finding the
/// files. Used by the fuzzers and by callers with their own sources.
pub fn safetensors_catalog(root: &Path, sources: Vec<SharedSource>, config: Option<Json>) -> Result<Catalog> {
    open_safetensors(root, sources, None, config)
}

fn open_safetensors(
    root: &Path,
    sources: Vec<SharedSource>,
    index: Option<(&Path, &BTreeMap<String, String>)>,
    config: Option<Json>,
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
    let config_path = root.join(CONFIG_FILE);
    let block = config_block_size(config.as_ref(), &config_path)?;
    let paths: Vec<PathBuf> = sources.iter().map(|s| s.path().to_path_buf()).collect();
    pair_scales(&mut tensors, block, |i| paths[i].as_path())?;
    Ok(Catalog {
        format: Format::Safetensors,
        root: root.to_path_buf(),
        files: sources.into_iter().map(|s| CatalogFile { path: s.path().to_path_buf(), source: s }).collect(),
        metadata: Metadata::Safetensors(metadata),
        tensors,
        config,
    })
}

/// Every tensor the index names is in the shard it names.
fn check_index(index_path: &Path, map: &BTreeMap<String, String>, sources: &[SharedSource], tensors: &[TensorInfo]) -> Result<()> {
    let file_names: Vec<Option<String>> =
        sources.iter().map(|s| s.path().file_name().map(|n| n.to_string_lossy().into_owned())).collect();
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
    Ok(())
}
