//! What every store's HTTP client shares (store.rs builds S3 and HTTP
//! stores, gcs.rs and azure.rs theirs): reqwest without redirects, one
//! client per policy, the retry policy, and the typed error of a store
//! object_store would not build.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use object_store::client::{HttpClient, HttpConnector};
use object_store::{BackoffConfig, ClientOptions, RetryConfig};

use crate::error::{RemoteError, RemoteErrorKind};
use crate::options::RemoteOptions;
use crate::rawkey::{RawKeys, Signer};
use crate::url::RemoteUrl;

/// reqwest without redirects: object_store would follow one with the
/// request's signed headers (an STS session token is not among the headers
/// reqwest strips), and a presigned URL's redirect could leave the host. A
/// 3xx becomes [`RemoteErrorKind::Redirect`].
/// For an S3 store, `raw_keys` puts keys `Path` cannot hold back into
/// requests (rawkey.rs).
/// Plain `http://` is allowed where the store's endpoint is one, and on the
/// connections object_store opens to a metadata server (GCE, Azure IMDS,
/// EC2: plain HTTP on a link-local address), which it marks by allowing
/// HTTP in their options.
#[derive(Debug)]
pub(crate) struct NoRedirects {
    pub(crate) allow_http: bool,
    pub(crate) opts: RemoteOptions,
    pub(crate) raw_keys: Option<Arc<OnceLock<Option<Signer>>>>,
}

impl NoRedirects {
    pub(crate) fn new(allow_http: bool, opts: &RemoteOptions) -> Self {
        NoRedirects { allow_http, opts: opts.clone(), raw_keys: None }
    }
}

impl HttpConnector for NoRedirects {
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        let metadata = options.get_config_value(&object_store::ClientConfigKey::AllowHttp).as_deref() == Some("true");
        let client = client(self.allow_http || metadata, &self.opts)
            .map_err(|e| object_store::Error::Generic { store: "HTTP client", source: Box::new(e) })?;
        Ok(match &self.raw_keys {
            Some(signer) => HttpClient::new(RawKeys { client, signer: signer.clone() }),
            None => HttpClient::new(client),
        })
    }
}

/// One reqwest client per distinct policy in the process: building one
/// reads and parses every system root certificate (about 5 ms here,
/// 80% of an HTTP fuzz input's time), and a shared client also keeps
/// its connections for the next store of the same host. A client holds
/// no per-store state (the S3 signer wraps it, above).
fn client(allow_http: bool, opts: &RemoteOptions) -> reqwest::Result<reqwest::Client> {
    type Key = (bool, Duration, Duration, Duration);
    static CLIENTS: OnceLock<Mutex<HashMap<Key, reqwest::Client>>> = OnceLock::new();
    let key = (allow_http, opts.connect_timeout, opts.read_timeout, opts.request_timeout);
    let clients = CLIENTS.get_or_init(Default::default);
    if let Some(c) = clients.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return Ok(c.clone());
    }
    let built = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(opts.connect_timeout)
        .read_timeout(opts.read_timeout)
        .timeout(opts.request_timeout)
        .https_only(!allow_http)
        .no_gzip()
        .no_brotli()
        .no_zstd()
        .no_deflate()
        .user_agent(concat!("weightstream/", env!("CARGO_PKG_VERSION")))
        .build()?;
    Ok(clients.lock().unwrap_or_else(|p| p.into_inner()).entry(key).or_insert(built).clone())
}

pub(crate) fn retry(opts: &RemoteOptions) -> RetryConfig {
    RetryConfig {
        backoff: BackoffConfig { init_backoff: Duration::from_millis(100), max_backoff: Duration::from_secs(2), base: 2.0 },
        max_retries: opts.retries,
        retry_timeout: opts.retry_timeout,
    }
}

/// A store object_store would not build: credentials it cannot use (a
/// malformed key, service account or SAS token) are `Denied`, anything else
/// (a missing account, a bad endpoint) `BadUrl`. The reason is scrubbed of
/// every credential (error.rs).
pub(crate) fn build_error(url: &RemoteUrl, e: &object_store::Error) -> RemoteError {
    let text = chain(e);
    let lower = text.to_ascii_lowercase();
    if ["credential", "key", "token", "sas"].iter().any(|w| lower.contains(w)) {
        RemoteError::new(RemoteErrorKind::Denied, url.object(), format!("the credentials cannot be used: {text}"))
    } else {
        RemoteError::new(RemoteErrorKind::BadUrl, url.object(), format!("the store cannot be configured: {text}"))
    }
}

/// Every message down the source chain, joined.
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let m = c.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        cur = c.source();
    }
    s
}
