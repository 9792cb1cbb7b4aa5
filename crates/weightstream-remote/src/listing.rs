//! A remote checkpoint's listing as the format crate's [`Listing`]: the
//! objects listed at open (a prefix's, or a key and its siblings), each
//! named by its object (`s3://bucket/key`, `gs://`, `az://`, an HTTP URL
//! without its query).
//! The opener reads `config.json` and the index through it and opens each
//! weight file as a [`RemoteSource`]; nothing touches the local filesystem.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use object_store::path::Path as ObjectPath;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt};
use weightstream_format::listing::{Entry, Listing};
use weightstream_io::SharedSource;

use crate::cache::Cached;
use crate::error::{RemoteError, RemoteErrorKind};
use crate::options::RemoteOptions;
use crate::source::{Pin, RemoteSource};
use crate::store::classify;
use crate::url::{is_plain_name, RemoteUrl};
use crate::whole::get_whole;

/// Largest JSON file fetched beside the weights.
const MAX_JSON: u64 = 16 << 20;
pub(crate) const INDEX_SUFFIX: &str = ".safetensors.index.json";

pub struct Prefix<'a> {
    url: &'a RemoteUrl,
    store: Arc<dyn ObjectStore>,
    location_of: &'a dyn Fn(&str) -> ObjectPath,
    /// As listed; an object in `unpinned` is replaced by its HEAD when
    /// first read.
    objects: Mutex<BTreeMap<String, ObjectMeta>>,
    /// Listed objects whose listing entry does not show what a read is
    /// pinned to (GCS, Azure: [`Prefix::pinned`]).
    unpinned: Mutex<BTreeSet<String>>,
    opts: &'a RemoteOptions,
    opened: Mutex<Vec<Arc<RemoteSource>>>,
    /// The first read or open this listing refused, typed (the format crate
    /// keeps only the text of an I/O error).
    refused: Mutex<Option<RemoteError>>,
}

impl<'a> Prefix<'a> {
    pub fn new(
        url: &'a RemoteUrl,
        store: Arc<dyn ObjectStore>,
        location_of: &'a dyn Fn(&str) -> ObjectPath,
        objects: Vec<(String, ObjectMeta)>,
        unpinned: BTreeSet<String>,
        opts: &'a RemoteOptions,
    ) -> Self {
        Prefix {
            url,
            store,
            location_of,
            objects: Mutex::new(objects.into_iter().collect()),
            unpinned: Mutex::new(unpinned),
            opts,
            opened: Mutex::new(Vec::new()),
            refused: Mutex::new(None),
        }
    }

    /// Why the open failed, typed: a refusal of this listing's, else the
    /// failure of a read of an opened object.
    pub fn failure(&self) -> Option<RemoteError> {
        let refused = self.refused.lock().unwrap_or_else(|p| p.into_inner()).clone();
        refused.or_else(|| self.opened.lock().unwrap_or_else(|p| p.into_inner()).iter().find_map(|s| s.failure()))
    }

    /// The headers are parsed: every opened object's head stops growing.
    pub fn seal(&self) {
        for s in self.opened.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            s.seal();
        }
    }

    /// `e` kept as the open's typed failure, and as an `io::Error` for the
    /// format crate.
    fn refuse(&self, e: RemoteError) -> io::Error {
        self.refused.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e.clone());
        e.into_io()
    }

    /// The listed object `name`, or `NotFound` naming it.
    fn object(&self, name: &OsStr) -> Result<(String, ObjectMeta), RemoteError> {
        let objects = self.objects.lock().unwrap_or_else(|p| p.into_inner());
        name.to_str()
            .and_then(|n| objects.get_key_value(n))
            .map(|(n, m)| (n.clone(), m.clone()))
            .ok_or_else(|| RemoteError::new(RemoteErrorKind::NotFound, self.url.object_in_dir(&name.to_string_lossy()), ""))
    }

    /// The whole object `name` (a small JSON file), through the local
    /// cache where there is one.
    fn get_small(&self, name: &str, object: &str, meta: &ObjectMeta) -> Result<Vec<u8>, RemoteError> {
        let limit = (MAX_JSON, "JSON beside a checkpoint");
        let fetch = || get_whole(&*self.store, &(self.location_of)(name), object, meta, limit, self.opts.cancel_flag());
        let kind = self.url.scheme.kind();
        let cached = (meta.size <= MAX_JSON).then(|| Cached::of(self.opts.cache.as_ref(), kind, object, &Pin::of(meta), meta.size));
        // Too large (get_whole says so) or no cache.
        let Some(cached) = cached.flatten() else { return fetch() };
        let mut buf = vec![0u8; meta.size as usize];
        cached.read_through(0, &mut buf, self.opts.cancel_flag(), |at, dst| {
            let whole = fetch()?;
            dst.copy_from_slice(&whole[at as usize..at as usize + dst.len()]);
            Ok(())
        })?;
        Ok(buf)
    }

    /// `name`'s meta as a read must be pinned to. GCS and Azure listings do
    /// not show it: GCS lists no generation, and both emulators list ETags
    /// unquoted where GET and HEAD quote them (so no GET could prove the
    /// listed version). Such an object is HEADed once, when first read, so
    /// that siblings never read (the other files of a folder of GGUFs) cost
    /// nothing.
    fn pinned(&self, name: &str, listed: ObjectMeta) -> Result<ObjectMeta, RemoteError> {
        if !self.unpinned.lock().unwrap_or_else(|p| p.into_inner()).contains(name) {
            return Ok(listed);
        }
        let object = self.url.object_in_dir(name);
        let head = async { self.store.head(&(self.location_of)(name)).await.map_err(|e| classify(&object, &e)) };
        let meta = crate::cancel::request(self.opts.cancel_flag(), &object, head)?;
        self.objects.lock().unwrap_or_else(|p| p.into_inner()).insert(name.to_string(), meta.clone());
        self.unpinned.lock().unwrap_or_else(|p| p.into_inner()).remove(name);
        Ok(meta)
    }
}

impl Listing for Prefix<'_> {
    fn path(&self, name: &OsStr) -> PathBuf {
        PathBuf::from(self.url.object_in_dir(&name.to_string_lossy()))
    }

    fn entry(&self, name: &OsStr) -> io::Result<Option<Entry>> {
        Ok(self.object(name).ok().map(|(_, m)| Entry::File { len: m.size, identity: None }))
    }

    fn files(&self) -> io::Result<Vec<OsString>> {
        Ok(self.objects.lock().unwrap_or_else(|p| p.into_inner()).keys().map(OsString::from).collect())
    }

    fn read(&self, name: &OsStr) -> io::Result<Vec<u8>> {
        let (name, listed) = self.object(name).map_err(|e| self.refuse(e))?;
        let meta = self.pinned(&name, listed).map_err(|e| self.refuse(e))?;
        let object = self.url.object_in_dir(&name);
        let bytes = self.get_small(&name, &object, &meta).map_err(|e| self.refuse(e))?;
        if name.ends_with(INDEX_SUFFIX) {
            check_index_names(self.url, &name, &bytes).map_err(|e| self.refuse(e))?;
        }
        Ok(bytes)
    }

    fn open(&self, name: &OsStr) -> io::Result<SharedSource> {
        let (name, listed) = self.object(name).map_err(|e| self.refuse(e))?;
        let object = self.url.object_in_dir(&name);
        // An index naming config.json or itself as a shard.
        if name == weightstream_format::open::CONFIG_FILE || name.ends_with(INDEX_SUFFIX) {
            return Err(self.refuse(RemoteError::new(RemoteErrorKind::Outside, object, "not a weight file of this checkpoint")));
        }
        let meta = self.pinned(&name, listed).map_err(|e| self.refuse(e))?;
        if meta.size == 0 {
            // Said here, where the store is known to have sent nothing:
            // the format readers would call it `truncated` (issue 55).
            return Err(self.refuse(RemoteError::new(
                RemoteErrorKind::Empty,
                object,
                "the object is empty (0 bytes): no checkpoint file is",
            )));
        }
        let kind = self.url.scheme.kind();
        let src = Arc::new(RemoteSource::new(self.store.clone(), (self.location_of)(&name), object, &meta, self.opts, kind));
        self.opened.lock().unwrap_or_else(|p| p.into_inner()).push(src.clone());
        Ok(src)
    }
}

/// Every shard an index names is a plain file name in the same prefix.
fn check_index_names(url: &RemoteUrl, name: &str, bytes: &[u8]) -> Result<(), RemoteError> {
    let index = url.object_in_dir(name);
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
