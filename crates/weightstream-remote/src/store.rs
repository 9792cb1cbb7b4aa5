//! The object store behind a URL: S3 (credentials and endpoint from the
//! standard AWS environment, path-style addressing), GCS (gcs.rs), Azure
//! (azure.rs) or plain HTTP(S), with the retry, timeout and redirect policy
//! of every load, and the mapping of `object_store` failures to
//! [`RemoteError`]s.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::client::{HttpClient, HttpConnector};
use object_store::http::HttpBuilder;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, RetryConfig};

use crate::error::{RemoteError, RemoteErrorKind};
use crate::options::RemoteOptions;
use crate::rawkey::{RawKeys, Signer};
use crate::url::{RemoteUrl, Scheme};

/// The runtime every remote read blocks on (reads come from the loaders'
/// own threads, never from inside it).
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("weightstream-remote")
            .enable_all()
            .build()
            .expect("a tokio runtime starts")
    })
}

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
    allow_http: bool,
    opts: RemoteOptions,
    raw_keys: Option<Arc<OnceLock<Option<Signer>>>>,
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

/// The store holding `url`'s objects, configured from the process's
/// environment.
pub fn build(url: &RemoteUrl, opts: &RemoteOptions) -> Result<Arc<dyn ObjectStore>, RemoteError> {
    build_with(url, opts, &crate::env::Env::process())
}

/// [`build`] from the variables in `env`.
pub fn build_with(url: &RemoteUrl, opts: &RemoteOptions, env: &crate::env::Env) -> Result<Arc<dyn ObjectStore>, RemoteError> {
    let bad = |e: object_store::Error| RemoteError::new(RemoteErrorKind::BadUrl, url.object(), e.to_string());
    match url.scheme {
        Scheme::Gcs => crate::gcs::build(url, opts, env),
        Scheme::Azure => crate::azure::build(url, opts, env),
        Scheme::S3 => {
            let endpoint = ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT"].iter().find_map(|k| std::env::var(k).ok());
            let allow_http = endpoint.as_deref().is_some_and(|e| e.starts_with("http://"));
            let mut b = AmazonS3Builder::from_env().with_bucket_name(&url.bucket);
            if let Some(e) = endpoint {
                // S3-compatible stores: path-style unless asked otherwise.
                b = b
                    .with_endpoint(e)
                    .with_virtual_hosted_style_request(std::env::var("AWS_VIRTUAL_HOSTED_STYLE_REQUEST").is_ok_and(|v| v == "true"));
            }
            if std::env::var("AWS_REGION").is_err() && std::env::var("AWS_DEFAULT_REGION").is_err() {
                b = b.with_region("us-east-1");
            }
            if std::env::var("AWS_ACCESS_KEY_ID").is_err() {
                if let Some(p) = crate::profile::from_files() {
                    b = p.apply(b);
                }
            }
            let signer = Arc::new(OnceLock::new());
            let config = |k: AmazonS3ConfigKey| b.get_config_value(&k);
            let (region, skip) = (config(AmazonS3ConfigKey::Region), config(AmazonS3ConfigKey::SkipSignature));
            let (unsigned, payer) = (config(AmazonS3ConfigKey::UnsignedPayload), config(AmazonS3ConfigKey::RequestPayer));
            let connector = NoRedirects { allow_http, opts: opts.clone(), raw_keys: Some(signer.clone()) };
            let s3 = b.with_retry(retry(opts)).with_http_connector(connector).build().map_err(bad)?;
            let _ = signer.set((skip.as_deref() != Some("true")).then(|| Signer {
                credentials: s3.credentials().clone(),
                region: region.unwrap_or_else(|| "us-east-1".to_string()),
                sign_payload: unsigned.as_deref() != Some("true"),
                request_payer: payer.as_deref() == Some("true"),
            }));
            Ok(Arc::new(s3))
        }
        Scheme::Http => {
            let allow_http = url.bucket.starts_with("http://");
            // The file's own URL, query included: objects are read at the
            // empty path under it.
            let full = match &url.query {
                Some(q) => format!("{}?{q}", url.object()),
                None => url.object(),
            };
            let b = HttpBuilder::new().with_url(full).with_retry(retry(opts)).with_http_connector(NoRedirects {
                allow_http,
                opts: opts.clone(),
                raw_keys: None,
            });
            Ok(Arc::new(b.build().map_err(bad)?))
        }
    }
}

/// `e`, about `object`, as a typed error without the library's URL (which
/// for a presigned URL holds its signature).
pub fn classify(object: &str, e: &object_store::Error) -> RemoteError {
    use object_store::Error as E;
    let (kind, reason) = match e {
        E::NotFound { .. } => (RemoteErrorKind::NotFound, String::new()),
        E::PermissionDenied { .. } | E::Unauthenticated { .. } => {
            (RemoteErrorKind::Denied, "the credentials were refused or lack read permission".to_string())
        }
        E::Precondition { .. } | E::NotModified { .. } => {
            (RemoteErrorKind::Changed, "the server refused the pinned ETag (412): the object was replaced".to_string())
        }
        // object_store names the URL it asked, which here is an empty path:
        // its message would end "not supported by ".
        _ if chain(e).contains("Range request not supported") => {
            (RemoteErrorKind::Server, "the server does not answer range requests (it sent the whole file to a ranged GET)".to_string())
        }
        _ => {
            let text = chain(e);
            let reason = text.split_once(" - ").map_or(text.as_str(), |(_, r)| r).to_string();
            let status = text.split_once("status code: ").and_then(|(_, r)| r.get(..3)).and_then(|s| s.parse::<u16>().ok());
            let unreach = is_unreachable(e);
            let kind = match status {
                Some(304) | Some(412) => RemoteErrorKind::Changed,
                Some(300..=399) => RemoteErrorKind::Redirect,
                Some(401) | Some(403) => RemoteErrorKind::Denied,
                Some(404) => RemoteErrorKind::NotFound,
                _ if unreach => RemoteErrorKind::Unreachable,
                _ => RemoteErrorKind::Server,
            };
            (kind, reason)
        }
    };
    RemoteError::new(kind, object, reason)
}

/// Every message down the source chain, joined.
fn chain(e: &dyn std::error::Error) -> String {
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

/// A connect failure or a timeout anywhere down the chain.
fn is_unreachable(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cur {
        if let Some(h) = c.downcast_ref::<object_store::client::HttpError>() {
            if matches!(h.kind(), object_store::client::HttpErrorKind::Connect | object_store::client::HttpErrorKind::Timeout) {
                return true;
            }
        }
        cur = c.source();
    }
    false
}
