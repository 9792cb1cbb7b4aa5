//! Opening a remote checkpoint with the format crate's own opener: the
//! object, or the prefix's objects, are listed once; a private temporary
//! directory mirrors the listing (the small JSON files the opener reads —
//! `config.json`, a safetensors index — downloaded; an empty placeholder
//! per weight file); the opener maps each placeholder to a
//! [`RemoteSource`]. The directory is gone when `open` returns: tensor data
//! is only ever read from the store.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use object_store::path::Path as ObjectPath;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt};
use weightstream_format::{Catalog, FormatError};
use weightstream_io::SharedSource;

use crate::error::{RemoteError, RemoteErrorKind};
use crate::options::RemoteOptions;
use crate::source::{proves_pin, Pin, RemoteSource};
use crate::store::{build, classify, runtime};
use crate::url::{is_plain_name, location, RemoteUrl, Scheme};

/// Largest JSON file fetched beside the weights.
const MAX_JSON: u64 = 16 << 20;
const INDEX_SUFFIX: &str = ".safetensors.index.json";

/// Why a remote open failed: the store, or the checkpoint it holds.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Remote(#[from] RemoteError),
    #[error(transparent)]
    Format(#[from] FormatError),
}

/// The catalog of the checkpoint at `url` (object or prefix), its tensor
/// data read from the store; `format_opts` as for a local file
/// (`weightstream_format::open_with_options`).
pub fn open(url: &str, opts: &RemoteOptions, format_opts: weightstream_format::OpenOptions) -> Result<Catalog, OpenError> {
    let url = RemoteUrl::parse(url)?;
    let store = build(&url, opts)?;
    let (location_of, objects) = list(&url, &*store)?;
    let dir = Listing::create(&url)?;
    let mut remote: HashMap<PathBuf, ObjectMeta> = HashMap::new();
    for (name, meta) in &objects {
        let local = dir.path.join(name);
        let io = |e: std::io::Error| RemoteError::new(RemoteErrorKind::Server, url.object(), format!("temporary listing directory: {e}"));
        if name == "config.json" || name.ends_with(INDEX_SUFFIX) {
            let bytes = get_small(&*store, &location_of(name), &url.sibling(name)?.object(), meta)?;
            if name.ends_with(INDEX_SUFFIX) {
                check_index_names(&url, name, &bytes)?;
            }
            std::fs::write(&local, &bytes).map_err(io)?;
        } else {
            std::fs::File::create(&local).map_err(io)?;
            remote.insert(local, meta.clone());
        }
    }
    let kind = if url.scheme == Scheme::S3 { "s3" } else { "http" };
    let opened: Mutex<Vec<Arc<RemoteSource>>> = Mutex::new(Vec::new());
    // A name the opener refused (an index naming config.json as a shard).
    let refused: Mutex<Option<RemoteError>> = Mutex::new(None);
    let opener = |p: &Path| -> std::io::Result<SharedSource> {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        match remote.get(p) {
            Some(meta) => {
                let object = url.sibling(name).map_err(RemoteError::into_io)?.object();
                let src = Arc::new(RemoteSource::new(store.clone(), location_of(name), object, meta, opts, kind));
                opened.lock().unwrap_or_else(|p| p.into_inner()).push(src.clone());
                Ok(src)
            }
            // Named by its object: the listing directory is private.
            None => {
                let object = url.sibling(name).map_or_else(|_| url.object(), |u| u.object());
                let e = RemoteError::new(RemoteErrorKind::Outside, object, "not a weight file of this checkpoint");
                *refused.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.clone());
                Err(e.into_io())
            }
        }
    };
    let target = if url.is_prefix() { dir.path.clone() } else { dir.path.join(url.file_name()) };
    let opened_result = weightstream_format::open::open_with_options(&target, &opener, format_opts);
    let sources = opened.into_inner().unwrap_or_else(|p| p.into_inner());
    let mut cat = match opened_result {
        Ok(cat) => cat,
        // A failed read of the store: its typed error, not the text of it.
        Err(e) if matches!(e.kind, weightstream_format::ErrorKind::Io(_)) => {
            let refused = refused.into_inner().unwrap_or_else(|p| p.into_inner());
            let failure = refused.or_else(|| sources.iter().find_map(|s| s.failure()));
            return Err(failure.map(OpenError::Remote).unwrap_or_else(|| rename(e, &dir.path, &url)));
        }
        Err(e) => return Err(rename(e, &dir.path, &url)),
    };
    cat.root = PathBuf::from(url.object());
    for src in &sources {
        src.seal();
    }
    Ok(cat)
}

/// One object (`s3://bucket/key` or an HTTP URL) as a [`RemoteSource`],
/// pinned to the version its HEAD (over HTTP, a one-byte ranged GET) shows:
/// the source the fuzz target `http_responses` drives, without a format.
pub fn open_object(url: &str, opts: &RemoteOptions) -> Result<RemoteSource, RemoteError> {
    let url = RemoteUrl::parse(url)?;
    if url.is_prefix() {
        return Err(RemoteError::new(RemoteErrorKind::BadUrl, url.object(), "names a prefix, not one object"));
    }
    let store = build(&url, opts)?;
    let (location_of, objects) = list(&url, &*store)?;
    let (name, meta) = objects.into_iter().next().ok_or_else(|| RemoteError::new(RemoteErrorKind::NotFound, url.object(), ""))?;
    let kind = if url.scheme == Scheme::S3 { "s3" } else { "http" };
    let src = RemoteSource::new(store, location_of(&name), url.object(), &meta, opts, kind);
    src.seal();
    Ok(src)
}

/// The objects of the checkpoint (name, meta), and how a name maps to its
/// location in the store. A key: that object (HEAD) and its siblings where
/// the store lists them (the rest of a split GGUF set, `config.json`). A
/// prefix: the objects directly under it.
fn list<'u>(
    url: &'u RemoteUrl,
    store: &dyn ObjectStore,
) -> Result<(impl Fn(&str) -> ObjectPath + 'u, Vec<(String, ObjectMeta)>), RemoteError> {
    let location_of = move |name: &str| match url.scheme {
        Scheme::S3 => location(&format!("{}{name}", url.dir())),
        // The store's base URL is the file's own URL (query included).
        Scheme::Http => ObjectPath::default(),
    };
    let named = (!url.is_prefix()).then(|| url.file_name().to_string());
    let mut objects: Vec<(String, ObjectMeta)> = Vec::new();
    if let Some(name) = &named {
        let meta = runtime().block_on(head(store, &location_of(name), &url.scheme)).map_err(|e| classify(&url.object(), &e))?;
        objects.push((name.clone(), meta));
    }
    if url.scheme == Scheme::S3 {
        let prefix = location(url.dir().trim_end_matches('/'));
        let prefix = (!url.dir().is_empty()).then_some(&prefix);
        let listed = runtime().block_on(store.list_with_delimiter(prefix)).map(|l| l.objects);
        let listed = match (listed, &named) {
            (Ok(l), _) => l,
            // A key readable but not listable: that key alone.
            (Err(_), Some(_)) => Vec::new(),
            (Err(e), None) => return Err(classify(&url.object(), &e)),
        };
        let dir = url.dir();
        for meta in listed {
            let key = meta.location.as_ref().to_string();
            let Some(name) = key.strip_prefix(dir.trim_end_matches('/')).map(|n| n.trim_start_matches('/')) else { continue };
            let wanted = name.ends_with(".gguf") || name.ends_with(".safetensors") || name == "config.json" || name.ends_with(INDEX_SUFFIX);
            if !is_plain_name(name) || name.starts_with('.') || !wanted || named.as_deref() == Some(name) {
                continue;
            }
            objects.push((name.to_string(), meta));
        }
        if named.is_none() && objects.is_empty() {
            return Err(RemoteError::new(RemoteErrorKind::NotFound, url.object(), "no *.safetensors or *.gguf objects under this prefix"));
        }
    }
    Ok((location_of, objects))
}

/// The object's size and version. Over HTTP a one-byte ranged GET: a
/// presigned URL is signed for GET only, and it also shows that the server
/// honours ranges.
async fn head(store: &dyn ObjectStore, location: &ObjectPath, scheme: &Scheme) -> object_store::Result<ObjectMeta> {
    match scheme {
        Scheme::S3 => store.head(location).await,
        Scheme::Http => {
            let opts = object_store::GetOptions { range: Some(object_store::GetRange::Bounded(0..1)), ..Default::default() };
            Ok(store.get_opts(location, opts).await?.meta)
        }
    }
}

/// A whole small object, pinned like every read.
fn get_small(store: &dyn ObjectStore, location: &ObjectPath, object: &str, meta: &ObjectMeta) -> Result<Vec<u8>, RemoteError> {
    if meta.size > MAX_JSON {
        return Err(RemoteError::new(
            RemoteErrorKind::Server,
            object,
            format!("{} bytes: larger than the {MAX_JSON}-byte limit for JSON", meta.size),
        ));
    }
    let opts = object_store::GetOptions { if_match: meta.e_tag.clone(), ..Default::default() };
    let got = runtime().block_on(async {
        let got = store.get_opts(location, opts).await.map_err(|e| classify(object, &e))?;
        // The precondition may be ignored: the answer itself must show the version.
        proves_pin(&Pin::of(meta), meta.size, &got.meta).map_err(|why| RemoteError::new(RemoteErrorKind::Changed, object, why))?;
        got.bytes().await.map_err(|e| classify(object, &e))
    })?;
    if got.len() as u64 != meta.size {
        return Err(RemoteError::new(RemoteErrorKind::Truncated, object, format!("the server sent {} of {} bytes", got.len(), meta.size)));
    }
    Ok(got.to_vec())
}

/// Every shard an index names is a plain file name in the same prefix.
fn check_index_names(url: &RemoteUrl, name: &str, bytes: &[u8]) -> Result<(), RemoteError> {
    let index = url.sibling(name)?.object();
    // A malformed index is the format crate's to report, with its reason.
    let Ok(json) = serde_json::from_slice::<serde_json::Value>(bytes) else { return Ok(()) };
    let Some(map) = json.get("weight_map").and_then(|m| m.as_object()) else { return Ok(()) };
    for shard in map.values().filter_map(|v| v.as_str()) {
        if !is_plain_name(shard) {
            return Err(RemoteError::new(
                RemoteErrorKind::Outside,
                index,
                format!("shard '{}' is not in this prefix (no '/', '..', scheme or host)", shard.escape_debug()),
            ));
        }
    }
    Ok(())
}

/// Format errors name the temporary listing's paths: name the objects.
fn rename(e: FormatError, dir: &Path, url: &RemoteUrl) -> OpenError {
    let mut e = e;
    if let Ok(rest) = e.file.strip_prefix(dir) {
        let name = rest.to_string_lossy();
        e.file = if name.is_empty() {
            PathBuf::from(url.object())
        } else {
            url.sibling(&name).map(|u| PathBuf::from(u.object())).unwrap_or_else(|_| PathBuf::from(url.object()))
        };
    }
    OpenError::Format(e)
}

/// A private temporary directory, removed on drop.
struct Listing {
    path: PathBuf,
}

impl Listing {
    /// A new directory under the temporary directory, its name random (the
    /// hasher's per-process keys): another local user cannot pre-create it
    /// to block loads. A name that exists is skipped, never reused.
    fn create(url: &RemoteUrl) -> Result<Listing, RemoteError> {
        use std::hash::{BuildHasher, RandomState};
        static N: AtomicU64 = AtomicU64::new(0);
        let mut last = None;
        for _ in 0..16 {
            let salt = RandomState::new().hash_one((std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
            let path = std::env::temp_dir().join(format!(".weightstream-listing-{salt:016x}"));
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(Listing { path }),
                Err(e) => last = Some(e),
            }
        }
        let e = last.map_or_else(String::new, |e| e.to_string());
        Err(RemoteError::new(RemoteErrorKind::Server, url.object(), format!("cannot make a temporary listing directory: {e}")))
    }
}

impl Drop for Listing {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
