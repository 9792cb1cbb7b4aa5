//! A checkpoint opened through a `Listing` that is not a local directory
//! (issue 40 item 10): what a remote prefix gives the opener. Every file is
//! reached through the listing, nothing through the filesystem, and errors
//! name the listing's own paths.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use weightstream_format::{open_listing, ErrorKind, Listing, ListingEntry, MemorySource, OpenOptions, SharedSource};

/// Files in memory, named `mem://bucket/dir/<name>`: a path no filesystem
/// has, so a read that went around the listing would fail.
struct Mem(BTreeMap<String, Vec<u8>>);

impl Mem {
    fn get(&self, name: &OsStr) -> io::Result<&Vec<u8>> {
        name.to_str().and_then(|n| self.0.get(n)).ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
    }
}

impl Listing for Mem {
    fn path(&self, name: &OsStr) -> PathBuf {
        PathBuf::from(format!("mem://bucket/dir/{}", name.to_string_lossy()))
    }
    fn entry(&self, name: &OsStr) -> io::Result<Option<ListingEntry>> {
        Ok(self.get(name).ok().map(|b| ListingEntry::File { len: b.len() as u64, identity: None }))
    }
    fn files(&self) -> io::Result<Vec<OsString>> {
        Ok(self.0.keys().map(OsString::from).collect())
    }
    fn read(&self, name: &OsStr) -> io::Result<Vec<u8>> {
        self.get(name).cloned()
    }
    fn open(&self, name: &OsStr) -> io::Result<SharedSource> {
        Ok(Arc::new(MemorySource::new(self.path(name), self.get(name)?.clone())))
    }
}

/// A safetensors file of F32 tensors `names`, two elements each.
fn shard(names: &[&str]) -> Vec<u8> {
    let header: Vec<String> = names
        .iter()
        .enumerate()
        .map(|(i, n)| format!("\"{n}\":{{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[{},{}]}}", i * 8, i * 8 + 8))
        .collect();
    let mut h = format!("{{{}}}", header.join(",")).into_bytes();
    while h.len() % 8 != 0 {
        h.push(b' ');
    }
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend(h);
    out.extend(std::iter::repeat_n(0u8, names.len() * 8));
    out
}

fn sharded(index: &str) -> Mem {
    let mut files = BTreeMap::new();
    files.insert("a.safetensors".to_string(), shard(&["x"]));
    files.insert("b.safetensors".to_string(), shard(&["y"]));
    files.insert("config.json".to_string(), b"{\"model_type\": \"llama\"}".to_vec());
    files.insert("model.safetensors.index.json".to_string(), index.as_bytes().to_vec());
    Mem(files)
}

#[test]
fn a_listing_opens_without_the_filesystem() {
    let dir = sharded(r#"{"weight_map": {"x": "a.safetensors", "y": "b.safetensors"}}"#);
    let cat = open_listing(&dir, None, OpenOptions::default()).unwrap();
    let files: Vec<String> = cat.files.iter().map(|f| f.path.display().to_string()).collect();
    assert_eq!(files, ["mem://bucket/dir/a.safetensors", "mem://bucket/dir/b.safetensors"]);
    assert_eq!(cat.root, PathBuf::from("mem://bucket/dir/"));
    assert_eq!(cat.config.as_ref().and_then(|c| c.get("model_type")).and_then(|v| v.as_str()), Some("llama"));
    assert_eq!(cat.tensors.len(), 2);
    // One file of the listing, with config.json beside it.
    let cat = open_listing(&dir, Some(OsStr::new("b.safetensors")), OpenOptions::default()).unwrap();
    assert_eq!(cat.root, PathBuf::from("mem://bucket/dir/b.safetensors"));
    assert!(cat.config.is_some());
}

#[test]
fn errors_name_the_listings_paths() {
    let dir = sharded(r#"{"weight_map": {"x": "a.safetensors", "y": "c.safetensors"}}"#);
    let e = open_listing(&dir, None, OpenOptions::default()).unwrap_err();
    assert_eq!(e.file, PathBuf::from("mem://bucket/dir/model.safetensors.index.json"), "{e}");
    assert!(matches!(&e.kind, ErrorKind::BadIndex(m) if m.contains("'c.safetensors' is missing")), "{e}");
    let mut dir = sharded(r#"{"weight_map": {"x": "a.safetensors", "y": "b.safetensors"}}"#);
    dir.0.insert("b.safetensors".into(), b"\x08\0\0\0\0\0\0\0not json".to_vec());
    let e = open_listing(&dir, None, OpenOptions::default()).unwrap_err();
    assert_eq!(e.file, PathBuf::from("mem://bucket/dir/b.safetensors"), "{e}");
}
