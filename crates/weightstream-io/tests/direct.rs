//! The direct-I/O source against the mmap source, bit for bit: every start
//! residue within a 4 KiB block, lengths that end on and off the grid, the
//! file's partial last block, one-byte reads, reads larger than the bounce
//! buffer; a filesystem that refuses O_DIRECT; a file that shrinks; and the
//! page-cache measurement `auto` decides on.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use weightstream_io::testing::{random_bytes, DirectDir};

use weightstream_io::{
    cached_fraction, evict, AlignedBuf, ByteSource, DirectOpen, DirectSource, GdsUse, MmapSource, SourceKind, DIRECT_ALIGN,
};

fn dir(test: &str) -> DirectDir {
    DirectDir::new(Path::new(env!("CARGO_TARGET_TMPDIR")), test)
}

fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    let mut f = File::create(&p).unwrap();
    f.write_all(bytes).unwrap();
    f.sync_all().unwrap();
    p
}

fn open_direct(p: &Path) -> DirectSource {
    match DirectSource::open(p).unwrap() {
        DirectOpen::Opened(d) => d,
        DirectOpen::Refused(why) => panic!("{}: {why}", p.display()),
    }
}

/// Read `len` at `offset` both ways and compare with the mmap source.
fn check(direct: &DirectSource, mmap: &MmapSource, staging: &mut AlignedBuf, offset: u64, len: usize) {
    let want = mmap.slice(offset..offset + len as u64).unwrap();
    let r = direct.read_staged(offset, len, staging.as_mut_slice()).unwrap_or_else(|e| panic!("staged {len} at {offset}: {e}"));
    assert_eq!(r.len(), len);
    assert!(staging.as_slice()[r] == *want, "staged read of {len} bytes at {offset} differs");
    let mut got = vec![0u8; len];
    direct.read_at(offset, &mut got).unwrap_or_else(|e| panic!("read_at {len} at {offset}: {e}"));
    assert!(got == want, "read_at of {len} bytes at {offset} differs");
}

#[test]
fn direct_matches_mmap_at_every_alignment_residue() {
    let dir = dir("residues");
    let len = 3 * DIRECT_ALIGN + 1234; // ends inside a block
    let p = write_file(&dir, "residues.bin", &random_bytes(len, 1));
    let (direct, mmap) = (open_direct(&p), MmapSource::open(&p).unwrap());
    let mut staging = AlignedBuf::new(4 * DIRECT_ALIGN).unwrap();
    for r in 0..DIRECT_ALIGN as u64 {
        let offset = DIRECT_ALIGN as u64 + r;
        for n in [1, 7, 32, DIRECT_ALIGN - r as usize, DIRECT_ALIGN, DIRECT_ALIGN + 1] {
            check(&direct, &mmap, &mut staging, offset, n);
        }
    }
}

#[test]
fn direct_reads_the_partial_last_block_and_stops_at_the_end() {
    let dir = dir("tail");
    for len in [1usize, 100, DIRECT_ALIGN - 1, DIRECT_ALIGN, DIRECT_ALIGN + 1, 2 * DIRECT_ALIGN + 17] {
        let p = write_file(&dir, &format!("tail-{len}.bin"), &random_bytes(len, len as u64));
        let (direct, mmap) = (open_direct(&p), MmapSource::open(&p).unwrap());
        let mut staging = AlignedBuf::new(4 * DIRECT_ALIGN).unwrap();
        check(&direct, &mmap, &mut staging, 0, len); // the whole file
        check(&direct, &mmap, &mut staging, len as u64 - 1, 1); // the last byte
        let last_block = (len as u64 - 1) / DIRECT_ALIGN as u64 * DIRECT_ALIGN as u64;
        check(&direct, &mmap, &mut staging, last_block, len - last_block as usize);
        check(&direct, &mmap, &mut staging, len as u64, 0); // empty, at the end
        for (offset, n) in [(0, len + 1), (len as u64, 1), (u64::MAX - 1, 4)] {
            let e = direct.read_staged(offset, n, staging.as_mut_slice()).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "{n} at {offset}");
            let mut b = vec![0u8; n];
            assert_eq!(direct.read_at(offset, &mut b).unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
        }
    }
}

#[test]
fn large_unaligned_reads_go_through_the_bounce_buffer_intact() {
    let dir = dir("large");
    let len = 20 << 20;
    let p = write_file(&dir, "large.bin", &random_bytes(len, 7));
    let (direct, mmap) = (open_direct(&p), MmapSource::open(&p).unwrap());
    for (offset, n) in [(12345u64, 17 << 20), (8, (8 << 20) + 3), (len as u64 - (9 << 20) - 1, 9 << 20), (64, 64 << 10)] {
        let mut got = vec![0u8; n];
        direct.read_at(offset, &mut got).unwrap();
        assert!(got == mmap.slice(offset..offset + n as u64).unwrap(), "{n} bytes at {offset}");
    }
    // Staged reads of a whole ring slot, from a GGUF-like 32-byte-aligned offset.
    let mut staging = AlignedBuf::new(direct.staged_len(4096 * 5 + 32, 16 << 20)).unwrap();
    check(&direct, &mmap, &mut staging, 4096 * 5 + 32, 16 << 20);
}

#[test]
fn staging_buffers_must_be_large_enough_and_aligned() {
    let dir = dir("staging");
    let p = write_file(&dir, "staging.bin", &random_bytes(3 * DIRECT_ALIGN, 3));
    let direct = open_direct(&p);
    assert_eq!(direct.staged_len(100, 10), DIRECT_ALIGN);
    assert_eq!(direct.staged_len(4090, 10), 2 * DIRECT_ALIGN);
    assert_eq!(direct.staged_len(4096, 4096), DIRECT_ALIGN);
    let mut small = AlignedBuf::new(DIRECT_ALIGN).unwrap();
    assert_eq!(direct.read_staged(4090, 10, small.as_mut_slice()).unwrap_err().kind(), io::ErrorKind::InvalidInput);
    let mut big = AlignedBuf::new(3 * DIRECT_ALIGN).unwrap();
    let unaligned = &mut big.as_mut_slice()[8..];
    assert_eq!(direct.read_staged(0, 10, unaligned).unwrap_err().kind(), io::ErrorKind::InvalidInput);
}

#[test]
fn a_file_that_shrinks_gives_an_error() {
    let dir = dir("shrinks");
    let p = write_file(&dir, "shrinks.bin", &random_bytes(5 * DIRECT_ALIGN, 5));
    let direct = open_direct(&p);
    File::options().write(true).open(&p).unwrap().set_len(DIRECT_ALIGN as u64 + 10).unwrap();
    let mut staging = AlignedBuf::new(8 * DIRECT_ALIGN).unwrap();
    let e = direct.read_staged(2 * DIRECT_ALIGN as u64 + 3, 2 * DIRECT_ALIGN, staging.as_mut_slice()).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    assert!(e.to_string().contains("shrink"), "{e}");
}

#[test]
fn a_refused_o_direct_is_reported_not_fatal() {
    let dir = dir("refused");
    let p = write_file(&dir, "refused.bin", &random_bytes(100, 9));
    let refuse = |_: &Path| -> io::Result<File> { Err(io::Error::from_raw_os_error(libc::EINVAL)) };
    match DirectSource::open_with(&p, &refuse).unwrap() {
        DirectOpen::Refused(why) => assert!(why.contains("O_DIRECT"), "{why}"),
        DirectOpen::Opened(_) => panic!("opened although O_DIRECT was refused"),
    }
    // Other errors stay errors.
    let missing = |_: &Path| -> io::Result<File> { Err(io::Error::from(io::ErrorKind::PermissionDenied)) };
    assert!(DirectSource::open_with(&p, &missing).is_err());
    assert!(DirectSource::open(&dir.join("does-not-exist")).is_err());
}

#[test]
fn the_direct_kind_on_tmpfs_reads_correctly_whichever_way_it_goes() {
    // tmpfs refuses O_DIRECT before Linux 6.6 and takes it since: either way
    // the bytes are right and a fallback says why.
    let shm = Path::new("/dev/shm");
    if !shm.is_dir() {
        return;
    }
    let p = shm.join(format!("ws-direct-{}.bin", std::process::id()));
    fs::write(&p, random_bytes(10_000, 11)).unwrap();
    let src = SourceKind::Direct.open(&p).unwrap();
    match src.name() {
        "direct" => assert!(src.note().is_none() && !src.fallback()),
        "read" => assert!(src.note().unwrap().contains("refused") && src.fallback(), "{:?}", src.note()),
        other => panic!("unexpected source {other}"),
    }
    let mut b = vec![0u8; 10_000];
    src.read_at(0, &mut b).unwrap();
    assert_eq!(b, random_bytes(10_000, 11));
    fs::remove_file(&p).unwrap();
}

#[test]
fn residency_is_measured_and_auto_follows_it() {
    let dir = dir("residency");
    let p = write_file(&dir, "residency.bin", &random_bytes(8 << 20, 13));
    let f = File::open(&p).unwrap();
    evict(&f).unwrap();
    let cold = cached_fraction(&f).unwrap();
    assert!(cold < 0.5, "{cold} of a just-evicted file is cached");
    let auto = SourceKind::Auto.open(&p).unwrap();
    assert_eq!(auto.name(), "direct", "{:?}", auto.note());
    assert!(auto.note().unwrap().starts_with("auto:"));
    assert!(!auto.fallback(), "auto's choice is not a stand-in");
    assert_eq!(auto.direct_file().map(|(_, g)| g), Some(GdsUse::IfNative));

    let _ = fs::read(&p).unwrap();
    let warm = cached_fraction(&f).unwrap();
    assert!(warm > 0.99, "{warm} of a just-read file is cached");
    let auto = SourceKind::Auto.open(&p).unwrap();
    assert_eq!(auto.name(), "read", "{:?}", auto.note());
    assert!(auto.note().unwrap().contains("100%"), "{:?}", auto.note());

    // Explicit kinds carry no note and say what they are.
    assert_eq!(SourceKind::Gds.open(&p).unwrap().name(), "gds");
    assert_eq!(SourceKind::Gds.open(&p).unwrap().direct_file().map(|(_, g)| g), Some(GdsUse::Always));
    assert_eq!(SourceKind::Direct.open(&p).unwrap().direct_file().map(|(_, g)| g), Some(GdsUse::Never));
    assert!(SourceKind::Mmap.open(&p).unwrap().note().is_none());

    // An empty file needs no reading: cached.
    let empty = write_file(&dir, "empty.bin", &[]);
    assert_eq!(cached_fraction(&File::open(&empty).unwrap()).unwrap(), 1.0);
    assert_eq!(SourceKind::Auto.open(&empty).unwrap().name(), "read");
    assert!(matches!(DirectSource::open(&empty).unwrap(), DirectOpen::Opened(_)));
}
