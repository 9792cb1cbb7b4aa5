//! What every convert shares: its options, its report, and the output
//! written under a temporary name and renamed into place only when
//! complete (a failed or cancelled convert leaves nothing under the final
//! name). convert.rs writes safetensors, convert_gguf.rs GGUF.

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::plan::Skipped;
use crate::staging::Staging;
use crate::tensor::LoadStats;

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io { path: path.to_path_buf(), source }
}

#[derive(Debug, Clone, Default)]
pub struct ConvertOptions {
    /// Largest shard in bytes (directory output); default 5 GB.
    pub max_shard_bytes: Option<u64>,
    pub skip_unsupported: bool,
    /// Replace an existing output.
    pub force: bool,
    /// CPU threads and read-ahead (convert dequantizes on the CPU).
    pub staging: Staging,
    pub source: weightstream_format::SourceKind,
    /// What opening the input accepts (`OpenOptions::ignore_transforms`).
    pub open: weightstream_format::OpenOptions,
    /// A URL input's local cache directory (`crate::open_with_cache`).
    pub cache: Option<PathBuf>,
    /// The output dtype: BF16 (the default) or float16.
    pub out: weightstream_dequant::OutDtype,
    /// Stops a URL input's requests once set (`crate::open_cancellable`):
    /// the flag `control` carries, shared, since the open's sources keep it.
    pub cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// Write a BF16 GGUF for llama.cpp (as convert_hf_to_gguf.py does) from
    /// a Hugging Face checkpoint directory; also chosen by an output ending
    /// in `.gguf`.
    pub to_gguf: bool,
}

#[derive(Debug, Clone)]
pub struct ConvertReport {
    pub output: PathBuf,
    pub files: Vec<PathBuf>,
    pub skipped: Vec<Skipped>,
    pub stats: LoadStats,
}

/// Run `write` on a temporary path beside `output` and rename the result
/// into place only when it succeeded: a failed or cancelled convert leaves
/// nothing under the final name. One writer per output (crate::output_lock);
/// an existing output is replaced only with `force`.
pub(crate) fn write_output<T>(output: &Path, force: bool, write: impl FnOnce(&Path) -> Result<T>) -> Result<T> {
    if output.exists() && !force {
        return Err(Error::OutputExists { path: output.to_path_buf() });
    }
    // One writer per output; partials of converts that died are removed.
    let (_lock, _reclaimed) = crate::output_lock::claim(output)?;
    let parent = output.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let tmp = parent.join(format!(
        ".{}.partial-{}",
        output.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "out".into()),
        std::process::id()
    ));
    let written = match write(&tmp) {
        Ok(w) => w,
        Err(e) => {
            remove(&tmp);
            return Err(e);
        }
    };
    if output.exists() {
        let old = parent.join(format!(".{}.old-{}", output.file_name().unwrap_or_default().to_string_lossy(), std::process::id()));
        fs::rename(output, &old).map_err(io_err(output))?;
        remove(&old);
    }
    fs::rename(&tmp, output).map_err(io_err(output))?;
    Ok(written)
}

fn remove(p: &Path) {
    let _ = if p.is_dir() { fs::remove_dir_all(p) } else { fs::remove_file(p) };
}
