//! Remote checkpoint URLs: `s3://bucket/key`, `s3://bucket/prefix/` and
//! `http(s)://host/path` (with any query, e.g. a presigned URL's); the
//! Google Cloud Storage and Azure spellings are parsed in cloud_url.rs.

use crate::error::{RemoteError, RemoteErrorKind};
use crate::url_types::{has_dot_segment, DOT_SEGMENT};
pub use crate::url_types::{shown, RemoteUrl, Scheme};

/// Whether `s` names a remote checkpoint (and so goes to [`RemoteUrl::parse`]).
pub fn is_url(s: &str) -> bool {
    ["s3://", "s3a://", "gs://", "az://", "abfs://", "abfss://", "http://", "https://"]
        .iter()
        .any(|p| s.len() >= p.len() && s.as_bytes()[..p.len()].eq_ignore_ascii_case(p.as_bytes()))
}

impl RemoteUrl {
    pub fn parse(s: &str) -> Result<RemoteUrl, RemoteError> {
        let bad = |why: &str| RemoteError::new(RemoteErrorKind::BadUrl, shown(s), why.to_string());
        let (scheme, rest) = s.split_once("://").ok_or_else(|| bad("no scheme"))?;
        let scheme_lc = scheme.to_ascii_lowercase();
        if let Some(parsed) = crate::cloud_url::parse(s, &scheme_lc, rest) {
            return parsed;
        }
        let (head, key) = rest.split_once('/').unwrap_or((rest, ""));
        if head.is_empty() {
            return Err(bad(if scheme_lc.starts_with("s3") { "no bucket" } else { "no host" }));
        }
        if head.contains('@') {
            return Err(bad("credentials in the URL are not taken: use the AWS environment or a presigned URL"));
        }
        if has_dot_segment(key) {
            return Err(bad(DOT_SEGMENT));
        }
        match scheme_lc.as_str() {
            "s3" | "s3a" => {
                if key.is_empty() {
                    return Err(bad("no key: name an object or a prefix ending in '/'"));
                }
                // Keys are literal, as the AWS CLI takes them: `?`, `#`, `%`
                // are key characters, never a query or an escape.
                // An empty component (`a//b`, a leading `/`) or a control
                // character: an object is read through a stand-in location
                // (rawkey.rs), but object_store cannot list such a prefix.
                if key.strip_suffix('/').is_some_and(|dir| !crate::rawkey::listable(dir)) {
                    return Err(bad("a prefix with an empty component ('//') or a control character cannot be listed: the S3 client \
                         weightstream uses (object_store) cannot list it as written; name the objects under it instead"));
                }
                if !head.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_') {
                    return Err(bad("not a bucket name"));
                }
                Ok(RemoteUrl {
                    scheme: Scheme::S3,
                    bucket: head.to_string(),
                    key: key.to_string(),
                    query: None,
                    account: None,
                    base: format!("s3://{head}"),
                })
            }
            "http" | "https" => {
                let (path, query) = match key.split_once('?') {
                    Some((p, q)) => (p, Some(q.to_string())),
                    None => (key, None),
                };
                let path = path.split('#').next().unwrap_or("");
                if path.is_empty() || path.ends_with('/') {
                    return Err(bad("an HTTP URL names one file (servers list no directories)"));
                }
                let base = format!("{scheme_lc}://{head}");
                Ok(RemoteUrl { scheme: Scheme::Http, bucket: base.clone(), key: path.to_string(), query, account: None, base })
            }
            _ => Err(bad("use s3://, gs://, az://, abfs(s):// (bucket or container, then key or prefix/), http:// or https://")),
        }
    }

    /// Whether the URL names a prefix (a checkpoint directory).
    pub fn is_prefix(&self) -> bool {
        self.key.ends_with('/')
    }

    /// The "directory" part of the key: up to and including the last `/`.
    pub fn dir(&self) -> &str {
        match self.key.rfind('/') {
            Some(i) => &self.key[..=i],
            None => "",
        }
    }

    /// The last component of the key.
    pub fn file_name(&self) -> &str {
        self.key.rsplit('/').next().unwrap_or("")
    }

    /// The object `name` in the same directory. `name` must be one plain
    /// component: an index's shard names may not leave the prefix.
    pub fn sibling(&self, name: &str) -> Result<RemoteUrl, RemoteError> {
        if !is_plain_name(name) {
            return Err(RemoteError::new(
                RemoteErrorKind::Outside,
                self.object_for(self.dir()),
                format!("'{}' is not a file name in this prefix (no '/', '..', scheme or host)", name.escape_debug()),
            ));
        }
        // An Azure SAS token is the container's credential: siblings keep
        // it. An HTTP query signs one file only.
        let query = if self.scheme == Scheme::Azure { self.query.clone() } else { None };
        Ok(RemoteUrl { key: format!("{}{name}", self.dir()), query, ..self.clone() })
    }

    /// `s3://bucket/key`, `gs://bucket/key`, `az://container/key` (as the
    /// URL spelled the store) or `https://host/path`, never the query.
    pub fn object(&self) -> String {
        self.object_for(&self.key)
    }

    /// How messages name `name` in the same directory (`""`: the directory
    /// itself). Only a name; what may be read is [`RemoteUrl::sibling`]'s
    /// to check.
    pub fn object_in_dir(&self, name: &str) -> String {
        self.object_for(&format!("{}{name}", self.dir()))
    }

    fn object_for(&self, key: &str) -> String {
        format!("{}/{key}", self.base)
    }
}

/// One file name an index may name as a shard: not empty, not `.`/`..`,
/// no `/`, `\\`, `:` or control character (nothing that could read as a
/// path, scheme or host).
pub fn is_plain_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', ':']) && !name.chars().any(char::is_control)
}

/// One object name directly under a listed prefix: any key component S3
/// and the client can hold (`:`, `\\`, `#`, `%`, ... are key characters).
pub fn is_listed_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains('/') && !name.chars().any(char::is_control)
}

/// The store location of an S3 key, taken literally (object_store's
/// `Path::from` would percent-encode `%`, `~`, `#` and non-ASCII, which the
/// S3 client then encodes again); a key `Path` cannot hold (an empty
/// component, a control character) goes through a stand-in (rawkey.rs).
pub fn location(key: &str) -> object_store::path::Path {
    crate::rawkey::location(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_s3_keys_and_prefixes() {
        let u = RemoteUrl::parse("s3://models/qwen/model.gguf").unwrap();
        assert_eq!((u.bucket.as_str(), u.key.as_str(), u.is_prefix()), ("models", "qwen/model.gguf", false));
        assert_eq!(u.dir(), "qwen/");
        let p = RemoteUrl::parse("s3://models/qwen/").unwrap();
        assert!(p.is_prefix());
        assert_eq!(p.sibling("model-00001-of-00002.safetensors").unwrap().object(), "s3://models/qwen/model-00001-of-00002.safetensors");
    }

    #[test]
    fn refuses_escapes_and_bad_urls() {
        let p = RemoteUrl::parse("s3://models/qwen/").unwrap();
        for bad in ["../x.safetensors", "/etc/passwd", "s3://other/x", "a/b", "..", "http:x"] {
            assert_eq!(p.sibling(bad).unwrap_err().kind, RemoteErrorKind::Outside, "{bad}");
        }
        for bad in ["s3://", "s3:///k", "s3://b", "s3://b/", "ftp://h/x", "s3://b/a/../k", "http://h/", "https://u:p@h/x"] {
            let e = RemoteUrl::parse(bad).unwrap_err();
            assert_eq!(e.kind, RemoteErrorKind::BadUrl, "{bad}");
            assert!(!e.to_string().contains("u:p"), "{e}");
        }
    }

    #[test]
    fn http_query_stays_out_of_names() {
        let u = RemoteUrl::parse("https://h:9/b/m.gguf?X-Amz-Signature=secret").unwrap();
        assert_eq!(u.object(), "https://h:9/b/m.gguf");
        assert_eq!(u.query.as_deref(), Some("X-Amz-Signature=secret"));
        let e = RemoteUrl::parse("https://h/dir/?sig=secret").unwrap_err();
        assert!(!e.to_string().contains("secret"));
        assert_eq!(shown("http://h/m.gguf?X-Amz-Signature=secret"), "http://h/m.gguf");
        assert_eq!(shown("https://u:p@h/m.gguf#sig=secret"), "https://<user>@h/m.gguf");
        assert_eq!(shown("/local/a?b.gguf"), "/local/a?b.gguf");
        assert_eq!(shown("s3://b/k?#é%20~@x.gguf"), "s3://b/k?#é%20~@x.gguf");
    }

    #[test]
    fn s3_keys_are_literal() {
        for key in ["m?x.gguf", "m#1.gguf", "é/m%20~.gguf", "p é%20~#?/"] {
            let u = RemoteUrl::parse(&format!("s3://b/{key}")).unwrap();
            assert_eq!((u.key.as_str(), u.object()), (key, format!("s3://b/{key}")));
        }
        assert_eq!(location("é/m%20~#.gguf").as_ref(), "é/m%20~#.gguf");
        // Objects S3 holds that `Path` cannot: read through a stand-in.
        for key in ["a//k", "a\nk", "/k", "a/\u{1}/k"] {
            assert_eq!(RemoteUrl::parse(&format!("s3://b/{key}")).unwrap().key, key);
        }
        for bad in ["s3://b//", "s3://b/a//", "s3://b//k/", "s3://b/a\u{1}/", "s3://b/a/../k", "s3://b/./k"] {
            assert_eq!(RemoteUrl::parse(bad).unwrap_err().kind, RemoteErrorKind::BadUrl, "{bad}");
        }
        // Each refusal says why.
        let why = |u: &str| RemoteUrl::parse(u).unwrap_err().reason;
        assert!(why("s3://b/a//").contains("cannot be listed"));
        assert!(why("s3://b/a\u{1}/").contains("cannot be listed"));
        assert!(why("s3://b/a/../k").contains("dot segment"));
    }

    #[test]
    fn listed_names_take_every_key_character_but_a_separator() {
        for ok in ["m:1.gguf", "m\\1.gguf", "é%20~#?.gguf", "a b.gguf"] {
            assert!(is_listed_name(ok), "{ok}");
        }
        for bad in ["", ".", "..", "a/b", "a\u{1}"] {
            assert!(!is_listed_name(bad), "{bad:?}");
        }
    }
}
