//! weightstream-io: where a checkpoint's bytes come from.
//!
//! Everything above this crate sees a [`ByteSource`]: a length, positioned
//! reads, a zero-copy view where the source has one, and staged reads into
//! aligned buffers (what direct I/O needs). The sources:
//!
//! | kind     | how                                   | when                                  |
//! |----------|---------------------------------------|---------------------------------------|
//! | `read`   | `pread` through the page cache        | warm files; the safe default          |
//! | `mmap`   | a private read-only mapping           | warm files, zero-copy on the CPU      |
//! | `direct` | `O_DIRECT` reads of 4 KiB-aligned ranges | cold files: no page-cache copy      |
//! | `gds`    | `direct` on the host; cuFile on a GPU | cold files straight into device memory |
//!
//! [`SourceKind::Auto`] measures before it chooses (how much of the file is
//! in the page cache, whether the filesystem takes `O_DIRECT`) and every
//! source says why it was chosen ([`ByteSource::note`]). [`ordered`] is the
//! read-ahead ring both executors use: several reader threads fill slots
//! ahead of a consumer that takes them in order.

pub mod aligned;
pub mod direct;
pub mod file;
pub mod kind;
pub mod memory;
pub mod mmap;
pub mod ordered;
pub mod residency;
pub mod source;
#[cfg(feature = "testing")]
pub mod testing;

pub use aligned::{AlignedBuf, DIRECT_ALIGN};
pub use direct::{DirectOpen, DirectSource};
pub use file::FileSource;
pub use kind::{SourceKind, WARM_FRACTION};
pub use memory::MemorySource;
pub use mmap::MmapSource;
pub use residency::{cached_fraction, evict};
pub use source::{ByteSource, Fetched, GdsUse, SharedSource};
