//! Small files beside a checkpoint in object storage (the transformers
//! front's config.json), read by weightstream-remote with what every other
//! remote read uses: the options and credentials of the environment, and
//! its typed errors (the object named, no secret).

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use weightstream::remote::{self, RemoteOptions};
use weightstream::Error;

/// The objects `names` beside the checkpoint at `url` (under its prefix,
/// or in the directory of the object it names), each whole: bytes, or None
/// where there is no such object; one over `max` bytes is refused unread.
#[pyfunction]
pub(crate) fn read_side_files<'py>(py: Python<'py>, url: &str, names: Vec<String>, max: u64) -> PyResult<Vec<Option<Bound<'py, PyBytes>>>> {
    let mut opts = RemoteOptions::from_env().map_err(|e| crate::to_py(py, Error::InvalidArgument(e)))?;
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    // Network round trips, off the GIL (other Python threads run
    // meanwhile) and stopped by Ctrl-C (a server that never answers).
    let files = crate::interrupt::interruptible_shared(py, |cancel| {
        opts.cancel = Some(cancel);
        remote::read_side_files(url, &names, max, &opts).map_err(Error::from_remote)
    })?;
    Ok(files.into_iter().map(|f| f.map(|b| PyBytes::new(py, &b))).collect())
}

/// Whether `path` is a URL weightstream reads remotely (`s3://`, `gs://`,
/// `az://`, `abfs(s)://`, `http(s)://`) rather than a local path: the
/// library's own rule, so that the Python fronts never disagree with it.
#[pyfunction]
pub(crate) fn is_url(path: &str) -> bool {
    remote::is_url(path)
}
