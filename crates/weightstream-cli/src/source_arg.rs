//! `--source auto|read|mmap|direct|gds`, and reporting what each file was
//! read with.

use serde_json::{json, Value};
use weightstream::{Catalog, SourceKind};

pub const HELP: &str = "How to read the file: auto (measure how much of it is in the page cache: \
read through it when warm, O_DIRECT when cold), read (pread), mmap (zero-copy, but a file truncated \
during the load kills the process), direct (O_DIRECT, bypassing the page cache) or gds (GPUDirect \
Storage: cuFile reads into GPU memory; direct on the CPU)";

pub fn parse(s: &str) -> Result<SourceKind, String> {
    SourceKind::parse(s).ok_or_else(|| format!("'{s}': use {}", SourceKind::NAMES.join(", ")))
}

/// Per file: the source reading it and, where it was chosen or stands in
/// for a refused one, why.
pub fn json(cat: &Catalog) -> Value {
    Value::Array(
        cat.files
            .iter()
            .map(|f| json!({"path": f.path.display().to_string(), "source": f.source.name(), "note": f.source.note()}))
            .collect(),
    )
}

/// One line per distinct (source, note): "source: direct (auto: 2% ...)".
pub fn lines(cat: &Catalog) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for f in &cat.files {
        let line = match f.source.note() {
            Some(n) => format!("source: {} ({n})", f.source.name()),
            None => format!("source: {}", f.source.name()),
        };
        if !out.contains(&line) {
            out.push(line);
        }
    }
    out
}
