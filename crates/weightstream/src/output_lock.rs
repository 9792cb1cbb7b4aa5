//! Claiming a convert's output: one writer per output path, and the debris
//! of writers that died reclaimed.
//!
//! A convert writes `.<name>.partial-<pid>` beside the output and renames it
//! when complete. A process killed outright (SIGKILL, a crash, a power cut)
//! leaves that partial behind, possibly gigabytes; the next convert to the
//! same place removes partials whose process no longer exists. Two converts
//! to the same output at once would race for the final rename: the second
//! to claim `.<name>.lock` (created with O_EXCL, holding the owner's pid)
//! loses with an error naming the first, unless that owner is dead.

use std::fs::{self, OpenOptions};
use std::io::{ErrorKind as IoKind, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Held while a convert writes; removes the lock file when dropped.
pub struct OutputLock {
    path: PathBuf,
}

impl Drop for OutputLock {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// Whether process `pid` exists (signal 0 probes without signalling).
fn alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else { return false };
    if pid <= 0 {
        return false;
    }
    // SAFETY: kill with signal 0 only checks that the process exists and we
    // may signal it; it has no other effect.
    let r = unsafe { libc::kill(pid, 0) };
    // EPERM: it exists but belongs to someone else.
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// The output's hidden sibling names: (prefix of partials, lock file).
fn names(output: &Path) -> (PathBuf, String, PathBuf) {
    let parent = output.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf();
    let name = output.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "out".into());
    let lock = parent.join(format!(".{name}.lock"));
    (parent, format!(".{name}.partial-"), lock)
}

/// Claim `output` for this process: take its lock (or fail naming the live
/// owner), then remove partials left by dead processes. Returns the lock and
/// the partial files reclaimed.
pub fn claim(output: &Path) -> Result<(OutputLock, Vec<PathBuf>)> {
    let (parent, partial_prefix, lock) = names(output);
    let me = std::process::id();
    for _attempt in 0..2 {
        match OpenOptions::new().write(true).create_new(true).open(&lock) {
            Ok(mut f) => {
                f.write_all(me.to_string().as_bytes()).map_err(|source| Error::Io { path: lock.clone(), source })?;
                let reclaimed = reclaim(&parent, &partial_prefix);
                return Ok((OutputLock { path: lock }, reclaimed));
            }
            Err(e) if e.kind() == IoKind::AlreadyExists => {
                let owner = fs::read_to_string(&lock).ok().and_then(|s| s.trim().parse::<u32>().ok());
                match owner {
                    Some(pid) if pid != me && alive(pid) => {
                        return Err(Error::OutputBusy {
                            path: output.to_path_buf(),
                            reason: format!(
                                "another convert (process {pid}) is writing this output; wait for it, or choose another output ({} holds the claim)",
                                lock.display()
                            ),
                        })
                    }
                    // A dead owner's lock (or an unreadable one): take it over.
                    _ => {
                        let _ = fs::remove_file(&lock);
                    }
                }
            }
            Err(source) => return Err(Error::Io { path: lock, source }),
        }
    }
    Err(Error::OutputBusy {
        path: output.to_path_buf(),
        reason: format!("could not claim {} (another process keeps re-creating it)", lock.display()),
    })
}

/// Remove `<prefix><pid>` entries of `parent` whose process is gone.
fn reclaim(parent: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let Ok(entries) = fs::read_dir(parent) else { return removed };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix(prefix).and_then(|p| p.parse::<u32>().ok()) else { continue };
        if pid == std::process::id() || alive(pid) {
            continue;
        }
        let p = e.path();
        let ok = if p.is_dir() { fs::remove_dir_all(&p) } else { fs::remove_file(&p) };
        if ok.is_ok() {
            removed.push(p);
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_owner_keeps_the_claim_and_dead_ones_are_reclaimed() {
        let d = std::env::temp_dir().join(format!("ws-lock-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        let out = d.join("m.safetensors");
        // A partial of a process that cannot exist (pid above pid_max).
        let stale = d.join(".m.safetensors.partial-4194999");
        fs::write(&stale, b"debris").unwrap();
        let (lock, reclaimed) = claim(&out).unwrap();
        assert_eq!(reclaimed, vec![stale.clone()]);
        assert!(!stale.exists());
        // While held, a second claim from "another" live process fails: fake
        // the owner as our parent process, which is alive.
        fs::write(d.join(".m.safetensors.lock"), std::os::unix::process::parent_id().to_string()).unwrap();
        let e = claim(&out).err().expect("a live owner keeps the output");
        assert!(e.to_string().contains("another convert"), "{e}");
        // A dead owner's lock is taken over.
        fs::write(d.join(".m.safetensors.lock"), "4194999").unwrap();
        drop(lock);
        fs::write(d.join(".m.safetensors.lock"), "4194999").unwrap();
        let (lock2, _) = claim(&out).unwrap();
        drop(lock2);
        assert!(!d.join(".m.safetensors.lock").exists(), "the lock goes with its holder");
        fs::remove_dir_all(&d).unwrap();
    }
}
