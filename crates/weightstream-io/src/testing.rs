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
        let candidates = [first.to_path_buf(), PathBuf::from("/var/tmp"), PathBuf::from("/tmp")];
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
