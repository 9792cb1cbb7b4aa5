//! The Google Cloud Storage and Azure Blob Storage spellings of a
//! checkpoint URL, as each cloud's own tools write them:
//!
//! - `gs://bucket/key`, `gs://bucket/prefix/` (gcloud, gsutil);
//! - `az://container/key`, `abfs://container/key`, `abfss://container/key`
//!   (fsspec/adlfs), `abfs[s]://container@ACCOUNT.dfs.core.windows.net/key`
//!   (Hadoop, Spark), `https://ACCOUNT.blob.core.windows.net/container/key`
//!   (the portal, azcopy; a `?sv=...&sig=...` query is a SAS token).
//!
//! Keys after `gs://bucket/` and `az://container/` are literal, as for
//! `s3://` (the clouds' CLIs take them so); an `https://` URL is a URL, so
//! its path is percent-decoded. Unlike S3 (rawkey.rs), a key object_store's
//! `Path` cannot hold is refused: GCS's and Azure's signatures cover the
//! request path, and no stand-in is re-signed for them.

use crate::error::{RemoteError, RemoteErrorKind};
use crate::url_types::{has_dot_segment, shown, RemoteUrl, Scheme, DOT_SEGMENT};

/// The Azure hosts of a storage account: Blob and Data Lake (the same
/// objects through the Blob API).
const AZURE_HOSTS: [&str; 2] = [".blob.core.windows.net", ".dfs.core.windows.net"];

/// `Some` when `s` (scheme `scheme_lc`, the rest after `://`) is a GCS or
/// Azure URL; `None` leaves it to the S3 and HTTP parser.
pub(crate) fn parse(s: &str, scheme_lc: &str, rest: &str) -> Option<Result<RemoteUrl, RemoteError>> {
    let bad = |why: &str| RemoteError::new(RemoteErrorKind::BadUrl, shown(s), why.to_string());
    match scheme_lc {
        "gs" => Some(gcs(rest, &bad)),
        "az" | "abfs" | "abfss" => Some(azure_scheme(scheme_lc, rest, &bad)),
        "https" => {
            let host = rest.split(['/', '?', '#']).next().unwrap_or("");
            account_of(host).map(|account| azure_https(host, account, rest, &bad))
        }
        _ => None,
    }
}

type Bad<'a> = &'a dyn Fn(&str) -> RemoteError;

fn gcs(rest: &str, bad: Bad) -> Result<RemoteUrl, RemoteError> {
    let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(bad("no bucket"));
    }
    if bucket.contains('@') {
        return Err(bad("credentials in the URL are not taken: use GOOGLE_APPLICATION_CREDENTIALS or the metadata server"));
    }
    // GCS bucket names: lowercase letters, digits, '-', '_', '.'.
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.');
    if !bucket.chars().all(ok) {
        return Err(bad("not a GCS bucket name (lowercase letters, digits, '-', '_', '.')"));
    }
    check_key(key, bad)?;
    Ok(RemoteUrl {
        scheme: Scheme::Gcs,
        bucket: bucket.to_string(),
        key: key.to_string(),
        query: None,
        account: None,
        base: format!("gs://{bucket}"),
    })
}

/// `az://container/key`, `abfs[s]://container/key`,
/// `abfs[s]://container@ACCOUNT.dfs.core.windows.net/key`.
fn azure_scheme(scheme: &str, rest: &str, bad: Bad) -> Result<RemoteUrl, RemoteError> {
    let (head, key) = rest.split_once('/').unwrap_or((rest, ""));
    let (container, account) = match head.split_once('@') {
        Some((user, _)) if user.contains(':') => {
            return Err(bad("credentials in the URL are not taken: use AZURE_STORAGE_KEY, a SAS token or a connection string"))
        }
        Some((container, host)) => {
            let account =
                account_of(host).ok_or_else(|| bad("after '@': an ACCOUNT.blob.core.windows.net or ACCOUNT.dfs.core.windows.net host"))?;
            (container, Some(account))
        }
        None => (head, None),
    };
    check_container(container, bad)?;
    check_key(key, bad)?;
    Ok(RemoteUrl {
        scheme: Scheme::Azure,
        bucket: container.to_string(),
        key: key.to_string(),
        query: None,
        account: account.map(str::to_string),
        base: format!("{scheme}://{head}"),
    })
}

/// `https://ACCOUNT.blob.core.windows.net/container/key[?SAS]`.
fn azure_https(host: &str, account: &str, rest: &str, bad: Bad) -> Result<RemoteUrl, RemoteError> {
    let rest = rest.split('#').next().unwrap_or("");
    let (rest, query) = match rest.split_once('?') {
        Some((r, q)) => (r, Some(q.to_string()).filter(|q| !q.is_empty())),
        None => (rest, None),
    };
    let path = rest.strip_prefix(host).unwrap_or("").trim_start_matches('/');
    let (container, key) = path.split_once('/').unwrap_or((path, ""));
    if container.is_empty() {
        return Err(bad("no container: https://ACCOUNT.blob.core.windows.net/CONTAINER/KEY"));
    }
    check_container(container, bad)?;
    let key = percent_decoded(key).ok_or_else(|| bad("the path is not valid percent-encoded UTF-8"))?;
    check_key(&key, bad)?;
    Ok(RemoteUrl {
        scheme: Scheme::Azure,
        bucket: container.to_string(),
        key,
        query,
        account: Some(account.to_string()),
        base: format!("https://{}/{container}", host.to_ascii_lowercase()),
    })
}

/// The account of an Azure storage host, if `host` is one.
fn account_of(host: &str) -> Option<&str> {
    let lower = host.to_ascii_lowercase();
    let suffix = AZURE_HOSTS.iter().find(|h| lower.ends_with(*h))?;
    let account = &host[..host.len() - suffix.len()];
    // Account names: 3 to 24 lowercase letters and digits.
    (!account.is_empty() && account.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())).then_some(account)
}

fn check_container(c: &str, bad: Bad) -> Result<(), RemoteError> {
    if c.is_empty() {
        return Err(bad("no container"));
    }
    // Container names: lowercase letters, digits and '-'; `$root`, `$web`.
    let name = c.strip_prefix('$').unwrap_or(c);
    if name.is_empty() || !name.chars().all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '-') {
        return Err(bad("not an Azure container name (lowercase letters, digits, '-')"));
    }
    Ok(())
}

fn check_key(key: &str, bad: Bad) -> Result<(), RemoteError> {
    if key.is_empty() {
        return Err(bad("no key: name an object or a prefix ending in '/'"));
    }
    if has_dot_segment(key) {
        return Err(bad(DOT_SEGMENT));
    }
    if !crate::rawkey::listable(key.strip_suffix('/').unwrap_or(key)) {
        return Err(bad("a key with an empty component ('//', a leading '/') or a control character cannot be requested: \
             object_store cannot name it, and this store's signature covers the path"));
    }
    Ok(())
}

/// `%XX` escapes decoded; `None` for a bad escape or bytes that are not UTF-8.
fn percent_decoded(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use crate::error::RemoteErrorKind;
    use crate::url_types::{shown, RemoteUrl, Scheme};

    fn parts(u: &str) -> (Scheme, String, String, Option<String>, String) {
        let p = RemoteUrl::parse(u).unwrap_or_else(|e| panic!("{u}: {e}"));
        let object = p.object();
        (p.scheme, p.bucket, p.key, p.account, object)
    }

    #[test]
    fn every_spelling_parses() {
        let gs = parts("gs://models/qwen/m.gguf");
        assert_eq!(gs, (Scheme::Gcs, "models".into(), "qwen/m.gguf".into(), None, "gs://models/qwen/m.gguf".into()));
        let az = |u: &str, acct: Option<&str>| {
            let (s, c, k, a, o) = parts(u);
            assert_eq!((s, c.as_str(), k.as_str(), a.as_deref()), (Scheme::Azure, "models", "qwen/m.gguf", acct), "{u}");
            assert_eq!(o, u.split('?').next().unwrap(), "{u}");
        };
        az("az://models/qwen/m.gguf", None);
        az("abfs://models/qwen/m.gguf", None);
        az("abfss://models/qwen/m.gguf", None);
        az("abfss://models@acct1.dfs.core.windows.net/qwen/m.gguf", Some("acct1"));
        az("az://models@acct1.blob.core.windows.net/qwen/m.gguf", Some("acct1"));
        az("https://acct1.blob.core.windows.net/models/qwen/m.gguf", Some("acct1"));
        az("https://acct1.dfs.core.windows.net/models/qwen/m.gguf?sv=2021&sig=SECRET", Some("acct1"));
        // Case-insensitive schemes and hosts, as URLs are.
        assert_eq!(parts("GS://models/m.gguf").0, Scheme::Gcs);
        assert_eq!(parts("https://acct1.BLOB.core.windows.net/models/m.gguf").0, Scheme::Azure);
        // Other https hosts stay plain HTTP files.
        assert_eq!(parts("https://example.com/models/m.gguf").0, Scheme::Http);
        assert_eq!(parts("https://blob.core.windows.net.example.com/c/m.gguf").0, Scheme::Http);
    }

    #[test]
    fn prefixes_keys_and_confinement() {
        for u in ["gs://b/qwen/", "az://c/qwen/", "https://a1.blob.core.windows.net/c/qwen/?sig=x"] {
            let p = RemoteUrl::parse(u).unwrap();
            assert!(p.is_prefix(), "{u}");
            let s = p.sibling("m-00001-of-00002.safetensors").unwrap();
            assert!(s.object().ends_with("/qwen/m-00001-of-00002.safetensors"), "{}", s.object());
            for bad in ["../x.safetensors", "/etc/passwd", "gs://other/x", "a/b", "..", "az://c/x", "https:x"] {
                assert_eq!(p.sibling(bad).unwrap_err().kind, RemoteErrorKind::Outside, "{u} {bad}");
            }
        }
        // A SAS token is the container's credential: siblings keep it.
        let p = RemoteUrl::parse("https://a1.blob.core.windows.net/c/qwen/?sv=1&sig=x").unwrap();
        assert_eq!(p.sibling("m.gguf").unwrap().query.as_deref(), Some("sv=1&sig=x"));
        // Literal keys after gs:// and az://; an https path is decoded.
        for key in ["m?x.gguf", "m#1.gguf", "é/m%20~.gguf"] {
            assert_eq!(RemoteUrl::parse(&format!("gs://b/{key}")).unwrap().key, key);
            assert_eq!(RemoteUrl::parse(&format!("az://c/{key}")).unwrap().key, key);
        }
        assert_eq!(RemoteUrl::parse("https://a1.blob.core.windows.net/c/m%20%C3%A9.gguf").unwrap().key, "m é.gguf");
    }

    #[test]
    fn bad_urls_are_refused_saying_why() {
        let why = |u: &str| {
            let e = RemoteUrl::parse(u).unwrap_err();
            assert_eq!(e.kind, RemoteErrorKind::BadUrl, "{u}");
            assert!(!e.to_string().contains("SECRET"), "{e}");
            e.reason
        };
        assert!(why("gs://").contains("no bucket"));
        assert!(why("gs://b").contains("no key"));
        assert!(why("gs://b/").contains("no key"));
        assert!(why("gs://B/k").contains("bucket name"));
        assert!(why("gs://u:SECRET@b/k").contains("credentials"));
        assert!(why("gs://b/a/../k").contains("dot segment"));
        assert!(why("gs://b/a//k").contains("empty component"));
        assert!(why("az://b/a\u{1}k").contains("control character"));
        assert!(why("az://").contains("no container"));
        assert!(why("az://Models/k").contains("container name"));
        assert!(why("az://c/./k").contains("dot segment"));
        assert!(why("abfss://c@example.com/k").contains("ACCOUNT.blob.core.windows.net"));
        assert!(why("abfss://c:SECRET@a1.dfs.core.windows.net/k").contains("credentials"));
        assert!(why("https://a1.blob.core.windows.net/").contains("no container"));
        assert!(why("https://a1.blob.core.windows.net/c?sig=SECRET").contains("no key"));
        assert!(why("https://a1.blob.core.windows.net/c/%ZZ?sig=SECRET").contains("percent"));
        assert!(why("https://a1.blob.core.windows.net/c/a/%2E%2E/k").contains("dot segment"));
    }

    #[test]
    fn sas_tokens_never_show() {
        let u = "https://a1.blob.core.windows.net/c/m.gguf?sv=2021-06-08&sig=SECRET%3D";
        let p = RemoteUrl::parse(u).unwrap();
        assert_eq!(p.query.as_deref(), Some("sv=2021-06-08&sig=SECRET%3D"));
        for text in [p.object(), format!("{p:?}"), shown(u), p.sibling("x.gguf").unwrap().object()] {
            assert!(!text.contains("SECRET"), "{text}");
        }
        assert_eq!(shown(u), "https://a1.blob.core.windows.net/c/m.gguf");
        // A container@account keeps its container; user:password does not show.
        assert_eq!(shown("abfss://c@a1.dfs.core.windows.net/m?x.gguf"), "abfss://c@a1.dfs.core.windows.net/m?x.gguf");
        assert_eq!(shown("abfss://c:SECRET@a1.dfs.core.windows.net/m.gguf"), "abfss://<user>@a1.dfs.core.windows.net/m.gguf");
        assert_eq!(shown("gs://b/m?x#1.gguf"), "gs://b/m?x#1.gguf");
    }
}
