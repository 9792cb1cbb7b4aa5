//! S3 keys that object_store's `Path` cannot hold: an empty component
//! (`a//b.gguf`, a leading `/`) or a control character. S3 stores them and
//! boto3 writes them, but `Path` refuses both (and `Path::from` would
//! percent-encode them into another key), so no request could name them.
//!
//! Such a key goes to object_store as a stand-in location,
//! `<marker>/<the key in hex>`; the HTTP service under every S3 store
//! ([`RawKeys`], installed by store.rs) puts the key back into the request
//! path, percent-encoded as S3 expects, and signs the request again with
//! object_store's own signer (`AwsAuthorizer`, the store's credentials).
//! Everything else (retries, ranges, preconditions, version checks,
//! response parsing) stays object_store's.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use object_store::aws::{AwsAuthorizer, AwsCredentialProvider};
use object_store::client::{HttpError, HttpErrorKind, HttpRequest, HttpResponse, HttpService};
use object_store::path::Path;

/// The stand-in's first component: random per process, so that no real
/// key is taken for a stand-in.
fn marker() -> &'static str {
    static M: OnceLock<String> = OnceLock::new();
    M.get_or_init(|| {
        use std::hash::{BuildHasher, RandomState};
        format!(".weightstream-raw-key-{:016x}", RandomState::new().hash_one(std::process::id()))
    })
}

/// Whether `Path` holds `key` exactly (so a request names it as written).
pub fn path_holds(key: &str) -> bool {
    Path::parse(key).is_ok_and(|p| p.as_ref() == key)
}

/// Whether a prefix (`dir`, without its trailing `/`) can be listed as
/// written: `Path` holds it, and it is not the empty name of a key's
/// leading `/` (which `Path` would take for the bucket's root).
pub fn listable(dir: &str) -> bool {
    !dir.is_empty() && path_holds(dir)
}

/// The location object_store is given for `key`: the key itself where
/// `Path` holds it, else the stand-in [`RawKeys`] turns back into it.
pub fn location(key: &str) -> Path {
    match Path::parse(key) {
        Ok(p) if p.as_ref() == key => p,
        _ => {
            let hex: String = key.bytes().map(|b| format!("{b:02x}")).collect();
            Path::parse(format!("{}/{hex}", marker())).unwrap_or_default()
        }
    }
}

/// The request path with a stand-in location replaced by its key,
/// percent-encoded as S3 wants a path (everything but unreserved
/// characters and `/`); `None` when the path holds no stand-in.
fn restored(path: &str) -> Option<String> {
    let (before, hex) = path.split_once(&format!("/{}/", marker()))?;
    if hex.len() % 2 != 0 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let key: Vec<u8> = (0..hex.len()).step_by(2).filter_map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok()).collect();
    let mut out = format!("{before}/");
    for b in key {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    Some(out)
}

/// How the store signs: what object_store's own S3 client is configured
/// with. `None` in [`RawKeys::signer`]: requests go unsigned.
#[derive(Debug)]
pub struct Signer {
    pub credentials: AwsCredentialProvider,
    pub region: String,
    pub sign_payload: bool,
    pub request_payer: bool,
}

/// `client`, with stand-in locations put back into keys (module doc).
#[derive(Debug)]
pub struct RawKeys {
    pub client: reqwest::Client,
    /// Set once the store is built (its credentials come from it).
    pub signer: Arc<OnceLock<Option<Signer>>>,
}

impl RawKeys {
    async fn send(&self, mut req: HttpRequest) -> Result<HttpResponse, HttpError> {
        if let Some(path) = restored(req.uri().path()) {
            let uri = req.uri();
            let query = uri.query().map_or(String::new(), |q| format!("?{q}"));
            let authority = uri.authority().map_or("", |a| a.as_str());
            let full = format!("{}://{authority}{path}{query}", uri.scheme_str().unwrap_or("https"));
            *req.uri_mut() = full.parse().map_err(|e| HttpError::new(HttpErrorKind::Request, e))?;
            // object_store signed the stand-in's path: sign the real one.
            match self.signer.get() {
                Some(Some(s)) => {
                    let credential = s.credentials.get_credential().await.map_err(|e| HttpError::new(HttpErrorKind::Request, e))?;
                    AwsAuthorizer::new(&credential, "s3", &s.region)
                        .with_sign_payload(s.sign_payload)
                        .with_request_payer(s.request_payer)
                        .try_authorize(&mut req, None)
                        .map_err(|e| HttpError::new(HttpErrorKind::Request, e))?;
                }
                Some(None) => {}
                None => return Err(HttpError::new(HttpErrorKind::Request, std::io::Error::other("the store is not built yet"))),
            }
        }
        HttpService::call(&self.client, req).await
    }
}

impl HttpService for RawKeys {
    // The trait is `#[async_trait]`: this is the signature it expands to.
    fn call<'s, 'f>(&'s self, req: HttpRequest) -> Pin<Box<dyn Future<Output = Result<HttpResponse, HttpError>> + Send + 'f>>
    where
        's: 'f,
        Self: 'f,
    {
        Box::pin(self.send(req))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stand_ins_come_back_as_their_keys() {
        for key in ["a//b.gguf", "/lead.gguf", "c/m\u{1}.gguf", "t/m\t é.gguf"] {
            assert!(!path_holds(key), "{key:?}");
            let loc = location(key);
            let path = format!("/bucket/{}", loc.as_ref());
            let want = match key {
                "a//b.gguf" => "/bucket/a//b.gguf",
                "/lead.gguf" => "/bucket//lead.gguf",
                "c/m\u{1}.gguf" => "/bucket/c/m%01.gguf",
                _ => "/bucket/t/m%09%20%C3%A9.gguf",
            };
            assert_eq!(restored(&path).as_deref(), Some(want), "{key:?}");
        }
        assert!(path_holds("a/é%20~#.gguf"));
        assert_eq!(location("a/é%20~#.gguf").as_ref(), "a/é%20~#.gguf");
        assert_eq!(restored("/bucket/a/b.gguf"), None);
    }
}
