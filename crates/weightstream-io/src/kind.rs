//! Which source reads a file: the user's choice, or `auto`'s measured one.

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::Arc;

use crate::direct::{DirectOpen, DirectSource};
use crate::file::FileSource;
use crate::mmap::MmapSource;
use crate::residency::cached_fraction;
use crate::source::{GdsUse, SharedSource};

/// `auto` reads through the page cache when at least this fraction of the
/// file is already there, and with direct I/O below it. (Direct I/O never
/// uses cached pages, so on a warm file it would go back to the drive.)
pub const WARM_FRACTION: f64 = 0.5;

/// How tensor bytes are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SourceKind {
    /// Measure, then choose: `read` for a file mostly in the page cache,
    /// `direct` for a cold one (where the filesystem takes `O_DIRECT`); on a
    /// GPU with the nvidia-fs driver, cold files go through cuFile.
    #[default]
    Auto,
    /// Positioned reads (`pread`) through the page cache. A file that
    /// shrinks while it is being loaded gives a read error naming file,
    /// tensor and offset.
    Read,
    /// Memory-mapped: zero-copy on the CPU path. A file truncated by another
    /// process during the load makes the kernel send SIGBUS, which kills the
    /// process; choose it only for files nothing else writes.
    Mmap,
    /// `O_DIRECT` reads into aligned buffers, bypassing the page cache; falls
    /// back to `read`, with the reason noted, where the filesystem refuses.
    Direct,
    /// GPUDirect Storage: cuFile reads straight into device memory on a GPU
    /// load (`direct` on the CPU path).
    Gds,
}

impl SourceKind {
    pub const NAMES: &'static [&'static str] = &["auto", "read", "mmap", "direct", "gds"];

    pub fn name(self) -> &'static str {
        match self {
            SourceKind::Auto => "auto",
            SourceKind::Read => "read",
            SourceKind::Mmap => "mmap",
            SourceKind::Direct => "direct",
            SourceKind::Gds => "gds",
        }
    }

    pub fn parse(s: &str) -> Option<SourceKind> {
        match s {
            "auto" => Some(SourceKind::Auto),
            "read" => Some(SourceKind::Read),
            "mmap" => Some(SourceKind::Mmap),
            "direct" => Some(SourceKind::Direct),
            "gds" => Some(SourceKind::Gds),
            _ => None,
        }
    }

    /// Open `path` with this kind of source. The source's
    /// [`note`](crate::ByteSource::note) says why, when `auto` chose or a
    /// refusal changed the kind.
    pub fn open(self, path: &Path) -> io::Result<SharedSource> {
        match self {
            SourceKind::Read => Ok(Arc::new(FileSource::open(path)?)),
            SourceKind::Mmap => Ok(Arc::new(MmapSource::open(path)?)),
            SourceKind::Direct => direct_or_read(path, GdsUse::Never, None),
            SourceKind::Gds => direct_or_read(path, GdsUse::Always, None),
            SourceKind::Auto => {
                let measured = File::open(path).and_then(|f| cached_fraction(&f));
                match measured {
                    Ok(f) if f >= WARM_FRACTION => Ok(Arc::new(
                        FileSource::open(path)?
                            .with_note(format!("auto: {:.0}% of the file is in the page cache, reading through it", f * 100.0)),
                    )),
                    Ok(f) => direct_or_read(
                        path,
                        GdsUse::IfNative,
                        Some(format!("auto: {:.0}% of the file is in the page cache, reading around it (O_DIRECT)", f * 100.0)),
                    ),
                    Err(e) => Ok(Arc::new(
                        FileSource::open(path)?
                            .with_note(format!("auto: page-cache residency unknown ({e}), reading through the page cache")),
                    )),
                }
            }
        }
    }
}

fn direct_or_read(path: &Path, gds: GdsUse, why: Option<String>) -> io::Result<SharedSource> {
    match DirectSource::open(path)? {
        DirectOpen::Opened(d) => Ok(Arc::new(d.with_gds(gds).with_note(why))),
        DirectOpen::Refused(reason) => {
            let why = why.map(|w| format!("{w}; ")).unwrap_or_default();
            Ok(Arc::new(
                FileSource::open(path)?.as_fallback(format!("{why}direct I/O refused: {reason}; reading through the page cache instead")),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for &n in SourceKind::NAMES {
            assert_eq!(SourceKind::parse(n).unwrap().name(), n);
        }
        assert!(SourceKind::parse("dma").is_none());
        assert_eq!(SourceKind::default(), SourceKind::Auto);
    }
}
