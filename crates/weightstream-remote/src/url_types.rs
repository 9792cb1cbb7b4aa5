//! The URL types and the rules every spelling shares (url.rs parses S3
//! and HTTP URLs, cloud_url.rs the Google Cloud Storage and Azure ones):
//! the scheme, the parsed URL, dot segments, and how outputs show a URL.

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scheme {
    S3,
    Http,
    /// Google Cloud Storage: `gs://bucket/key`.
    Gcs,
    /// Azure Blob Storage: `az://`, `abfs(s)://`, `https://ACCOUNT.blob.core.windows.net/`.
    Azure,
}

impl Scheme {
    /// An object store with buckets (containers) that can be listed: keys
    /// and prefixes, not one HTTP file.
    pub fn is_store(&self) -> bool {
        !matches!(self, Scheme::Http)
    }

    /// How sources and reports name the store (`ByteSource::name`).
    pub fn kind(&self) -> &'static str {
        match self {
            Scheme::S3 => "s3",
            Scheme::Http => "http",
            Scheme::Gcs => "gcs",
            Scheme::Azure => "azure",
        }
    }
}

/// A parsed URL. For a store, `key` is the object key or, ending in `/`, a
/// prefix naming a checkpoint directory.
#[derive(Clone, PartialEq, Eq)]
pub struct RemoteUrl {
    pub scheme: Scheme,
    /// The bucket (S3, GCS), the container (Azure), or `http(s)://host[:port]` (HTTP).
    pub bucket: String,
    /// The key or prefix (a store), or the path without its leading `/` (HTTP).
    pub key: String,
    /// The query string: HTTP's (a presigned URL's signature) or an Azure
    /// SAS token. A credential: kept out of every message and of `Debug`.
    pub query: Option<String>,
    /// Azure only: the storage account the URL names, if it names one.
    pub account: Option<String>,
    /// How messages spell the bucket: `s3://b`, `gs://b`, `az://c`,
    /// `abfss://c@a.dfs.core.windows.net`, `https://a.blob.core.windows.net/c`,
    /// `https://host`; an object is named `{base}/{key}`.
    pub base: String,
}

/// By hand: the query (a signature, a SAS token) never shows.
impl std::fmt::Debug for RemoteUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteUrl")
            .field("scheme", &self.scheme)
            .field("bucket", &self.bucket)
            .field("key", &self.key)
            .field("query", &self.query.as_ref().map(|_| "<redacted>"))
            .field("account", &self.account)
            .field("base", &self.base)
            .finish()
    }
}

/// The schemes whose keys are literal (no query, no fragment, no escapes).
pub(crate) fn literal_keys(scheme: &str) -> bool {
    matches!(scheme.to_ascii_lowercase().as_str(), "s3" | "s3a" | "gs" | "az" | "abfs" | "abfss")
}

/// Why a `.`/`..` component is refused, in every store. S3, GCS and Azure
/// store such keys, but no request can name them: URL parsers (RFC 3986,
/// WHATWG, so reqwest's) resolve `.` and `..` path segments,
/// percent-encoded ones included, so the GET would name another key (or
/// leave a prefix). SeaweedFS refuses to store them at all (PutObject:
/// InvalidRequest).
pub(crate) const DOT_SEGMENT: &str =
    "a '.' or '..' key component cannot be requested: URL parsers resolve it as a dot segment, so the request would name another key";

pub(crate) fn has_dot_segment(key: &str) -> bool {
    key.split('/').any(|c| c == ".." || c == ".")
}

/// `s` as every output names it (messages, CLI text and JSON, Python
/// `path`): no user info and, for HTTP, no query string or fragment (a
/// presigned URL's signature, an Azure SAS token). An s3://, gs://, az://
/// or abfs(s):// key is literal (`?` and `#` are key characters there), and
/// an abfs(s)/az `container@account` keeps its container (only a
/// `user:password@` is hidden). A string without `://` (a local path) is kept.
pub fn shown(s: &str) -> String {
    let Some((scheme, rest)) = s.split_once("://") else { return s.to_string() };
    let literal = literal_keys(scheme);
    let rest = if literal { rest } else { rest.split(['?', '#']).next().unwrap_or("") };
    let (head, path) = rest.split_once('/').map_or((rest, None), |(h, p)| (h, Some(p)));
    let head = match head.rsplit_once('@') {
        Some((user, host)) if !literal || user.contains(':') => format!("<user>@{host}"),
        _ => head.to_string(),
    };
    match path {
        Some(p) => format!("{scheme}://{head}/{p}"),
        None => format!("{scheme}://{head}"),
    }
}
