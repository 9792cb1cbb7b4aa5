//! weightstream-remote: checkpoints in object storage.
//!
//! `s3://bucket/key`, `s3://bucket/prefix/` (a directory of safetensors
//! shards with its index, or a split GGUF set), the same for Google Cloud
//! Storage (`gs://`) and Azure Blob Storage (`az://`, `abfs(s)://`,
//! `https://ACCOUNT.blob.core.windows.net/`), and `http(s)://` URLs open
//! into the same [`Catalog`] a local path does; their tensor data is read
//! by [`RemoteSource`]s:
//!
//! - ranged GETs, cut into parts of [`RemoteOptions::part_size`] fetched
//!   [`RemoteOptions::concurrency`] at a time, feeding the loaders'
//!   read-ahead ring ([`ByteSource::read_ahead`](weightstream_io::ByteSource::read_ahead));
//! - every GET pinned to the version seen at open (`If-Match` ETag, the
//!   version id, or GCS's generation): a replaced object fails with
//!   [`RemoteErrorKind::Changed`], never a mix of two versions;
//! - retries with backoff (5xx, SlowDown, resets, timeouts, short bodies),
//!   timeouts, no redirects followed;
//! - headers from a cached head that grows by doubling (a few round trips);
//! - optionally, a local cache directory ([`cache`]): fetched bytes are
//!   kept on disk, keyed by URL and pinned version, and a later load of the
//!   same version reads them from there.
//!
//! Protocol and credentials are the `object_store` crate's: the AWS
//! environment (`AWS_ACCESS_KEY_ID`, `AWS_ENDPOINT_URL`, web identity,
//! instance metadata), plus the shared `~/.aws` files ([`profile`]); the
//! Google chain ([`gcs`]) and the Azure one ([`azure`]).

pub mod azure;
pub mod cache;
pub mod cache_entry;
pub mod cancel;
mod client;
pub mod cloud_url;
pub mod env;
pub mod error;
pub mod fill_lock;
pub mod gcs;
pub mod listing;
pub mod open;
pub mod options;
pub mod paging;
pub mod pin;
pub mod profile;
pub mod rawkey;
pub mod secret;
pub mod source;
pub mod store;
pub mod url;
mod url_types;
mod whole;

pub use error::{RemoteError, RemoteErrorKind};
pub use open::{open, open_object, read_side_files, OpenError};
pub use options::RemoteOptions;
pub use source::{fetched_total, RemoteSource};
pub use url::{is_url, shown, RemoteUrl};
