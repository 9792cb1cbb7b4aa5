//! Opening a remote checkpoint with the format crate's own opener: the
//! object, or the prefix's objects, are listed once, and the opener reads
//! that listing through [`Prefix`] (the format crate's `Listing`): the
//! small JSON files it reads (`config.json`, a safetensors index) are
//! fetched whole, each weight file is a [`RemoteSource`]. Nothing is
//! written to the local filesystem, and every error names an object.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use object_store::path::Path as ObjectPath;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt};
use weightstream_format::{Catalog, FormatError};

use crate::error::{RemoteError, RemoteErrorKind};
use crate::listing::{Prefix, INDEX_SUFFIX};
use crate::options::RemoteOptions;
use crate::paging::{list_dir, ListError};
use crate::source::RemoteSource;
use crate::store::{build, classify, Store};
use crate::url::{is_listed_name, location, RemoteUrl, Scheme};
use crate::whole::get_whole;

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
    let (location_of, objects) = list(&url, &store, opts.cancel_flag())?;
    // GCS and Azure listings do not show a read's pin: what was listed
    // (not the named key, HEADed) is HEADed when first read (listing.rs).
    let named = (!url.is_prefix()).then(|| url.file_name());
    let unpinned = match url.scheme {
        Scheme::Gcs | Scheme::Azure => objects.iter().map(|(n, _)| n.clone()).filter(|n| Some(n.as_str()) != named).collect(),
        _ => Default::default(),
    };
    let prefix = Prefix::new(&url, store.objects, &location_of, objects, unpinned, opts);
    let file = (!url.is_prefix()).then(|| OsStr::new(url.file_name()));
    let mut cat = match weightstream_format::open_listing(&prefix, file, format_opts) {
        Ok(cat) => cat,
        // A failed read of the store: its typed error, not the text of it.
        Err(e) if matches!(e.kind, weightstream_format::ErrorKind::Io(_)) => {
            return Err(prefix.failure().map(OpenError::Remote).unwrap_or(OpenError::Format(e)));
        }
        Err(e) => return Err(OpenError::Format(e)),
    };
    cat.root = PathBuf::from(url.object());
    prefix.seal();
    Ok(cat)
}

/// One object (`s3://bucket/key`, `gs://`, `az://` or an HTTP URL) as a [`RemoteSource`],
/// pinned to the version its HEAD (over HTTP, a one-byte ranged GET) shows:
/// the source the fuzz target `http_responses` drives, without a format.
pub fn open_object(url: &str, opts: &RemoteOptions) -> Result<RemoteSource, RemoteError> {
    let url = RemoteUrl::parse(url)?;
    if url.is_prefix() {
        return Err(RemoteError::new(RemoteErrorKind::BadUrl, url.object(), "names a prefix, not one object"));
    }
    let store = build(&url, opts)?;
    let (location_of, objects) = list(&url, &store, opts.cancel_flag())?;
    let (name, meta) = objects.into_iter().next().ok_or_else(|| RemoteError::new(RemoteErrorKind::NotFound, url.object(), ""))?;
    let src = RemoteSource::new(store.objects, location_of(&name), url.object(), &meta, opts, url.scheme.kind());
    src.seal();
    Ok(src)
}

/// The objects of the checkpoint (name, meta), and how a name maps to its
/// location in the store. A key: that object (HEAD) and its siblings where
/// the store lists them (the rest of a split GGUF set, `config.json`). A
/// prefix: the objects directly under it. Every request stops when
/// `cancel` is set; the listing is bounded (paging.rs).
fn list<'u>(
    url: &'u RemoteUrl,
    store: &Store,
    cancel: Option<&AtomicBool>,
) -> Result<(impl Fn(&str) -> ObjectPath + 'u, Vec<(String, ObjectMeta)>), RemoteError> {
    let location_of = move |name: &str| match url.scheme {
        // The store's base URL is the file's own URL (query included).
        Scheme::Http => ObjectPath::default(),
        _ => location(&format!("{}{name}", url.dir())),
    };
    let named = (!url.is_prefix()).then(|| url.file_name().to_string());
    let mut objects: Vec<(String, ObjectMeta)> = Vec::new();
    if let Some(name) = &named {
        let object = url.object();
        let meta = async { head(&*store.objects, &location_of(name), &url.scheme).await.map_err(|e| classify(&object, &e)) };
        let meta = crate::cancel::request(cancel, &object, meta)?;
        objects.push((name.clone(), meta));
    }
    // A key under a directory object_store cannot list as written (an
    // empty component, a control character): that key alone, never the
    // listing of another directory (`a/` for `a//`). A prefix is always
    // listable (RemoteUrl::parse refuses one that is not).
    let dir_listable = url.dir().is_empty() || url.dir().strip_suffix('/').is_some_and(crate::rawkey::listable);
    if let Some(pages) = store.pages.as_ref().filter(|_| dir_listable) {
        let prefix = location(url.dir().trim_end_matches('/'));
        let prefix = (!url.dir().is_empty()).then(|| prefix.as_ref().to_string());
        let listed = match (list_dir(&**pages, prefix.as_deref(), &url.object(), cancel), &named) {
            (Ok(l), _) => l,
            // A key readable but not listable: that key alone. A listing
            // stopped (endless, cancelled) is an answer, and is given.
            (Err(ListError::Request(_)), Some(_)) => Vec::new(),
            (Err(ListError::Request(e) | ListError::Stopped(e)), _) => return Err(e),
        };
        let dir = url.dir();
        for meta in listed {
            let key = meta.location.as_ref().to_string();
            let Some(name) = key.strip_prefix(dir.trim_end_matches('/')).map(|n| n.trim_start_matches('/')) else { continue };
            let wanted = name.ends_with(".gguf") || name.ends_with(".safetensors") || name == "config.json" || name.ends_with(INDEX_SUFFIX);
            if !is_listed_name(name) || name.starts_with('.') || !wanted || named.as_deref() == Some(name) {
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
        Scheme::S3 | Scheme::Gcs | Scheme::Azure => store.head(location).await,
        Scheme::Http => {
            let opts = object_store::GetOptions { range: Some(object_store::GetRange::Bounded(0..1)), ..Default::default() };
            Ok(store.get_opts(location, opts).await?.meta)
        }
    }
}

/// Small files beside a checkpoint's weights under the prefix `url`, or
/// beside the object `url` names (what `convert --to gguf` reads: the
/// tokenizer files, a README; the transformers front's config.json), each
/// fetched whole; `None` where the directory holds no such object, and a
/// file larger than `max` bytes refused before it is fetched. Only a
/// store's URL: an HTTP URL (presigned) reads its own file alone.
pub fn read_side_files(url: &str, names: &[&str], max: u64, opts: &RemoteOptions) -> Result<Vec<Option<Vec<u8>>>, RemoteError> {
    let url = RemoteUrl::parse(url)?;
    if !url.scheme.is_store() {
        return Err(RemoteError::new(
            RemoteErrorKind::BadUrl,
            url.object(),
            "an HTTP URL names one file, with no directory to read beside it",
        ));
    }
    if let Some(bad) = names.iter().find(|n| !crate::url::is_plain_name(n)) {
        // The directory's own files only (prefix confinement).
        return Err(RemoteError::new(
            RemoteErrorKind::Outside,
            url.object_in_dir(""),
            format!("'{}' is not a file name in this prefix", bad.escape_debug()),
        ));
    }
    let store = build(&url, opts)?;
    let cancel = opts.cancel_flag();
    names
        .iter()
        .map(|name| {
            let (loc, object) = (location(&format!("{}{name}", url.dir())), url.object_in_dir(name));
            let head = async {
                match store.objects.head(&loc).await {
                    Err(object_store::Error::NotFound { .. }) => Ok(None),
                    Err(e) => Err(classify(&object, &e)),
                    Ok(meta) => Ok(Some(meta)),
                }
            };
            let Some(meta) = crate::cancel::request(cancel, &object, head)? else { return Ok(None) };
            // Pinned to the version the HEAD saw, and no larger than it
            // (whole.rs): a replacement in between is `remote_changed`.
            get_whole(&*store.objects, &loc, &object, &meta, (max, "a checkpoint's side file"), cancel).map(Some)
        })
        .collect()
}
