//! Test support (feature `testing`): a scratch directory where direct I/O
//! really happens, shared by every crate's direct-I/O tests.

use std::fs;
use std::path::{Path, PathBuf};

use crate::direct::{DirectOpen, DirectSource};

/// A test's own directory on a filesystem that takes `O_DIRECT`, removed on
/// drop. The candidates are tried in order (pass the crate's
/// `CARGO_TARGET_TMPDIR` first; /var/tmp and /tmp follow). Panics, naming
/// the places tried, when none does: a direct-I/O test must exercise direct
/// I/O, not skip it.
pub struct DirectDir(PathBuf);

impl DirectDir {
    pub fn new(first: &Path, test: &str) -> DirectDir {
        // WEIGHTSTREAM_TEST_DIR first, where set: the GPU round puts the
        // cuFile test's files on another file system with it (/dev/shm).
        let chosen = std::env::var_os("WEIGHTSTREAM_TEST_DIR").map(PathBuf::from);
        let candidates: Vec<PathBuf> =
            chosen.into_iter().chain([first.to_path_buf(), PathBuf::from("/var/tmp"), PathBuf::from("/tmp")]).collect();
        for base in &candidates {
            let dir = base.join(format!("ws-direct-{}-{test}", std::process::id()));
            if fs::create_dir_all(&dir).is_err() {
                continue;
            }
            let probe = dir.join("probe");
            if fs::write(&probe, vec![1u8; 8192]).is_ok() && matches!(DirectSource::open(&probe), Ok(DirectOpen::Opened(_))) {
                return DirectDir(dir);
            }
            let _ = fs::remove_dir_all(&dir);
        }
        panic!("no filesystem here takes O_DIRECT (tried {candidates:?})");
    }
}

impl std::ops::Deref for DirectDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for DirectDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Deterministic pseudo-random bytes (xorshift64) for test data.
pub fn random_bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// A seeded generator for test data (splitmix64): a fresh seed per run
/// unless `WEIGHTSTREAM_SEED` is set, printed so a failure can be replayed.
/// The one copy every crate's tests use.
pub struct SeededRng(u64);

impl SeededRng {
    pub fn from_env(test: &str) -> SeededRng {
        let seed = std::env::var("WEIGHTSTREAM_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            t.as_nanos() as u64 ^ ((std::process::id() as u64) << 32)
        });
        eprintln!("{test}: WEIGHTSTREAM_SEED={seed}");
        SeededRng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (0 for n = 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
}

/// A source that fails every read touching bytes `bad` of `inner`: for
/// tests of read-error paths (names, cleanup, no panic).
pub struct FailingSource<S> {
    pub inner: S,
    pub bad: std::ops::Range<u64>,
}

impl<S: crate::ByteSource> crate::ByteSource for FailingSource<S> {
    fn path(&self) -> &Path {
        self.inner.path()
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        if offset < self.bad.end && offset + buf.len() as u64 > self.bad.start {
            return Err(std::io::Error::other("injected read failure"));
        }
        self.inner.read_at(offset, buf)
    }
}
