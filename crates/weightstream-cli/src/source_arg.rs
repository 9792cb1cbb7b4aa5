//! `--source auto|read|mmap`.

use weightstream::SourceKind;

pub fn parse(s: &str) -> Result<SourceKind, String> {
    match s {
        // Measured choice comes with the direct-I/O sources; until then the
        // safe default.
        "auto" => Ok(SourceKind::default()),
        _ => SourceKind::parse(s).ok_or_else(|| format!("'{s}': use auto, {}", SourceKind::NAMES.join(", "))),
    }
}
