//! `--cache DIR`, shared by the commands that open checkpoints.

use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone)]
pub struct CacheArg {
    /// For a URL: keep the bytes read in this directory, keyed by URL and
    /// object version, and read them from there on the next load of the
    /// same version (default: $WEIGHTSTREAM_CACHE_DIR; size limit:
    /// $WEIGHTSTREAM_CACHE_MAX_BYTES)
    #[arg(long, value_name = "DIR")]
    pub cache: Option<PathBuf>,
}
