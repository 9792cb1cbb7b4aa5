//! The object store behind a URL: S3 (credentials and endpoint from the
//! standard AWS environment, path-style addressing), GCS (gcs.rs), Azure
//! (azure.rs) or plain HTTP(S), with the retry, timeout and redirect policy
//! of every load, and the mapping of `object_store` failures to
//! [`RemoteError`]s.

use std::sync::{Arc, OnceLock};

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::http::HttpBuilder;
use object_store::list::PaginatedListStore;
use object_store::ObjectStore;

use crate::client::{chain, retry, NoRedirects};
use crate::error::{RemoteError, RemoteErrorKind};
use crate::options::RemoteOptions;
use crate::rawkey::Signer;
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

/// A store's objects, and its listing page by page (S3, GCS and Azure;
/// an HTTP URL lists nothing): `object_store`'s own whole listing follows
/// continuation tokens for as long as the server sends them, so opens
/// list through the pages, bounded (paging.rs).
#[derive(Clone)]
pub struct Store {
    pub objects: Arc<dyn ObjectStore>,
    pub pages: Option<Arc<dyn PaginatedListStore>>,
}

impl<T: ObjectStore + PaginatedListStore> From<Arc<T>> for Store {
    fn from(s: Arc<T>) -> Store {
        Store { objects: s.clone(), pages: Some(s) }
    }
}

/// The store holding `url`'s objects, configured from the process's
/// environment.
pub fn build(url: &RemoteUrl, opts: &RemoteOptions) -> Result<Store, RemoteError> {
    build_store_with(url, opts, &crate::env::Env::process())
}

/// [`build`]'s objects, from the variables in `env`.
pub fn build_with(url: &RemoteUrl, opts: &RemoteOptions, env: &crate::env::Env) -> Result<Arc<dyn ObjectStore>, RemoteError> {
    build_store_with(url, opts, env).map(|s| s.objects)
}

/// [`build`] from the variables in `env`.
pub fn build_store_with(url: &RemoteUrl, opts: &RemoteOptions, env: &crate::env::Env) -> Result<Store, RemoteError> {
    let bad = |e: object_store::Error| RemoteError::new(RemoteErrorKind::BadUrl, url.object(), e.to_string());
    match url.scheme {
        Scheme::Gcs => crate::gcs::build(url, opts, env).map(Store::from),
        Scheme::Azure => crate::azure::build(url, opts, env).map(Store::from),
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
            Ok(Store::from(Arc::new(s3)))
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
            Ok(Store { objects: Arc::new(b.build().map_err(bad)?), pages: None })
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
