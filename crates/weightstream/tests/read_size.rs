//! A read-ahead source's read size (`ByteSource::read_size`: object storage
//! asks for two 8 MiB ranged GETs per read) raises the CPU ring's slot for
//! that load, unless a slot size was set; either way the bits are those of
//! the mapped file.

mod common;

use std::io;
use std::ops::Range;
use std::path::Path;
use std::sync::{Arc, Mutex};

use common::{dir, safetensors_bytes, stream_all};
use weightstream::format::io::testing::random_bytes;
use weightstream::format::io::{ByteSource, SharedSource};
use weightstream::{SourceKind, Staging};

/// The file through a plain source, reading ahead and asking for `size`
/// bytes per read, with every read's length kept.
struct Asking {
    inner: SharedSource,
    size: usize,
    reads: Mutex<Vec<usize>>,
}

impl ByteSource for Asking {
    fn path(&self) -> &Path {
        self.inner.path()
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.reads.lock().unwrap().push(buf.len());
        self.inner.read_at(offset, buf)
    }
    fn slice(&self, _range: Range<u64>) -> Option<&[u8]> {
        None
    }
    fn read_ahead(&self) -> bool {
        true
    }
    fn read_size(&self) -> Option<usize> {
        Some(self.size)
    }
}

#[test]
fn a_sources_read_size_raises_the_slot_unless_one_was_set() {
    const MIB: usize = 1 << 20;
    let d = dir("read_size");
    // One 24 MiB BF16 matrix: six reads of the default 4 MiB slot.
    let mut header = serde_json::Map::new();
    header.insert("w".into(), serde_json::json!({"dtype": "BF16", "shape": [3072, 4096], "data_offsets": [0, 24 * MIB]}));
    let path = d.join("big.safetensors");
    std::fs::write(&path, safetensors_bytes(&header, random_bytes(24 * MIB, 7))).unwrap();
    let reference = stream_all(&weightstream::open_with_source(&path, SourceKind::Mmap).unwrap(), &Staging::default());

    for (set, want) in [(None, 16 * MIB), (Some(4 * MIB), 4 * MIB), (Some(MIB), MIB)] {
        let mut cat = weightstream::open_with_source(&path, SourceKind::Read).unwrap();
        let asking = Arc::new(Asking { inner: cat.files[0].source.clone(), size: 16 * MIB, reads: Mutex::new(vec![]) });
        cat.files[0].source = asking.clone();
        let got = stream_all(&cat, &Staging { slot_bytes: set, ..Default::default() });
        assert!(got == reference, "slot {set:?}: the bits differ from the mapped file's");
        let reads = asking.reads.lock().unwrap();
        assert_eq!(reads.iter().copied().max(), Some(want), "slot {set:?}: reads {reads:?}");
        assert_eq!(reads.iter().sum::<usize>(), 24 * MIB, "slot {set:?}: every byte once");
    }
}
