//! The directory a checkpoint is opened from, as the opener sees it: file
//! names, their sizes, small files read whole, and a byte source per file.
//! A local directory is one ([`LocalDir`]); an object-store prefix is
//! another (weightstream-remote implements it over its listing), so a remote
//! checkpoint opens through the same code as a local one without mirroring
//! its listing on the local filesystem.

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Path, PathBuf};

use weightstream_io::SharedSource;

/// Opens one file as a byte source (mmap by default; the load path may pass
/// another).
pub type SourceOpener<'a> = &'a dyn Fn(&Path) -> io::Result<SharedSource>;

/// What a name in a [`Listing`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// A regular file (through a symlink counts): its length and, where the
    /// listing has one, its `(device, inode)`: two names of one file are one
    /// file (a split set must not count a shard twice).
    File { len: u64, identity: Option<(u64, u64)> },
    /// A directory, FIFO, socket or device: never read (a FIFO can block
    /// forever).
    Other,
}

/// A directory of checkpoint files. Names are single components; the
/// opener only asks for names it listed, that an index names (already
/// checked to be plain file names) or that it derives from them (a split
/// set's siblings, `config.json`).
pub trait Listing {
    /// How errors and the catalog name `name` in this directory (`""`: the
    /// directory itself): a path, or an object's URL without its query.
    fn path(&self, name: &OsStr) -> PathBuf;
    /// What `name` is; `Ok(None)` when the directory has no such name.
    fn entry(&self, name: &OsStr) -> io::Result<Option<Entry>>;
    /// The names of the directory's regular files, in any order.
    fn files(&self) -> io::Result<Vec<OsString>>;
    /// The whole of file `name` (small JSON files: callers check its
    /// [`Entry::File`] length against their cap first).
    fn read(&self, name: &OsStr) -> io::Result<Vec<u8>>;
    /// File `name` as a byte source for its headers and tensor data.
    fn open(&self, name: &OsStr) -> io::Result<SharedSource>;
}

/// A directory on a local filesystem, its files opened with `opener`.
pub struct LocalDir<'a> {
    dir: PathBuf,
    opener: SourceOpener<'a>,
}

impl<'a> LocalDir<'a> {
    pub fn new(dir: &Path, opener: SourceOpener<'a>) -> Self {
        LocalDir { dir: dir.to_path_buf(), opener }
    }
}

impl Listing for LocalDir<'_> {
    fn path(&self, name: &OsStr) -> PathBuf {
        if name.is_empty() {
            self.dir.clone()
        } else {
            self.dir.join(name)
        }
    }

    fn entry(&self, name: &OsStr) -> io::Result<Option<Entry>> {
        use std::os::unix::fs::MetadataExt;
        match std::fs::metadata(self.path(name)) {
            Ok(m) if m.is_file() => Ok(Some(Entry::File { len: m.len(), identity: Some((m.dev(), m.ino())) })),
            Ok(_) => Ok(Some(Entry::Other)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn files(&self) -> io::Result<Vec<OsString>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(&self.dir)? {
            let entry = entry?;
            // `is_file` follows symlinks: a link to a shard is a shard.
            if entry.path().is_file() {
                out.push(entry.file_name());
            }
        }
        Ok(out)
    }

    fn read(&self, name: &OsStr) -> io::Result<Vec<u8>> {
        std::fs::read(self.path(name))
    }

    fn open(&self, name: &OsStr) -> io::Result<SharedSource> {
        (self.opener)(&self.path(name))
    }
}
