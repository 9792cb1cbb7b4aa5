//! Typed object-store failures. Each names the object (`s3://bucket/key`,
//! `gs://bucket/key`, `az://container/key`, or an HTTP URL without its
//! query string) and never a credential: the reasons are built here from
//! status codes and error classes, any URL inside a library message loses
//! its query (a presigned URL's signature, a SAS token), and every
//! credential a store was configured with is scrubbed (secret.rs).

use std::fmt;
use std::io;

/// What went wrong, by class: fronts and tests match on these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteErrorKind {
    /// Not a URL this crate reads (`s3://bucket/key`, `gs://`, `az://`,
    /// `http(s)://...`), or a store configuration object_store refuses.
    BadUrl,
    /// 404: no such object, bucket or container.
    NotFound,
    /// 401/403: the credentials are refused or lack the permission.
    Denied,
    /// No connection to the endpoint, or every retry timed out.
    Unreachable,
    /// 412, a new ETag/version, or the pinned GCS generation gone: the
    /// object was replaced during the load.
    Changed,
    /// A body shorter than the range asked for.
    Truncated,
    /// The server answered with a redirect, which is never followed (it
    /// would carry the request's credentials to another host).
    Redirect,
    /// An index names a shard outside the checkpoint's prefix.
    Outside,
    /// 5xx or throttling after every retry, or another server answer (a
    /// listing that would never end, an object over a size limit).
    Server,
    /// The object holds no bytes: no checkpoint file is empty, and the
    /// format readers would call it `truncated` without saying that the
    /// store sent nothing.
    Empty,
    /// The caller asked the operation to stop (Ctrl-C, SIGTERM, a Python
    /// KeyboardInterrupt) while it waited on the store. An `Other` I/O
    /// error, never `Interrupted`, which readers retry.
    Cancelled,
}

impl RemoteErrorKind {
    /// The error code fronts report (`WeightstreamError.kind`, `ws_` codes).
    pub fn code(self) -> &'static str {
        match self {
            RemoteErrorKind::BadUrl => "remote_bad_url",
            RemoteErrorKind::NotFound => "remote_not_found",
            RemoteErrorKind::Denied => "remote_denied",
            RemoteErrorKind::Unreachable => "remote_unreachable",
            RemoteErrorKind::Changed => "remote_changed",
            RemoteErrorKind::Truncated => "remote_truncated",
            RemoteErrorKind::Redirect => "remote_redirect",
            RemoteErrorKind::Outside => "remote_outside",
            RemoteErrorKind::Server => "remote_server",
            RemoteErrorKind::Empty => "remote_empty",
            // The code every front already gives a stopped operation.
            RemoteErrorKind::Cancelled => "cancelled",
        }
    }
}

/// An object-store failure about one object.
#[derive(Debug, Clone)]
pub struct RemoteError {
    pub kind: RemoteErrorKind,
    /// The object, as `s3://bucket/key`, `gs://bucket/key`,
    /// `az://container/key` (as the URL spelled it) or `https://host/path`.
    pub object: String,
    pub reason: String,
}

impl RemoteError {
    pub fn new(kind: RemoteErrorKind, object: impl Into<String>, reason: impl Into<String>) -> Self {
        RemoteError { kind, object: object.into(), reason: redact(&reason.into()) }
    }

    pub fn code(&self) -> &'static str {
        self.kind.code()
    }

    /// As an `io::Error` for [`ByteSource`](weightstream_io::ByteSource)
    /// reads; [`RemoteError::from_io`] finds it again.
    pub fn into_io(self) -> io::Error {
        let kind = match self.kind {
            RemoteErrorKind::NotFound => io::ErrorKind::NotFound,
            RemoteErrorKind::Denied => io::ErrorKind::PermissionDenied,
            RemoteErrorKind::Unreachable => io::ErrorKind::TimedOut,
            RemoteErrorKind::Truncated => io::ErrorKind::UnexpectedEof,
            RemoteErrorKind::BadUrl | RemoteErrorKind::Outside => io::ErrorKind::InvalidInput,
            _ => io::ErrorKind::Other,
        };
        io::Error::new(kind, self)
    }

    /// The remote error inside an `io::Error`, if it is one.
    pub fn from_io(e: &io::Error) -> Option<&RemoteError> {
        e.get_ref().and_then(|r| r.downcast_ref::<RemoteError>())
    }
}

impl fmt::Display for RemoteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            RemoteErrorKind::BadUrl => "bad URL",
            RemoteErrorKind::NotFound => "not found",
            RemoteErrorKind::Denied => "access denied",
            RemoteErrorKind::Unreachable => "endpoint unreachable",
            RemoteErrorKind::Changed => "object changed during the load",
            RemoteErrorKind::Truncated => "body cut short",
            RemoteErrorKind::Redirect => "redirect refused",
            RemoteErrorKind::Outside => "outside the checkpoint",
            RemoteErrorKind::Server => "server error",
            RemoteErrorKind::Empty => "empty object",
            RemoteErrorKind::Cancelled => "cancelled",
        };
        write!(f, "{}: {what}", self.object)?;
        if !self.reason.is_empty() {
            write!(f, ": {}", self.reason)?;
        }
        Ok(())
    }
}

impl std::error::Error for RemoteError {}

/// `text` with the query string of every URL in it and every credential
/// (secret.rs) removed, and at most 400 characters long.
pub fn redact(text: &str) -> String {
    let text = &crate::secret::scrub(text);
    let mut out = String::with_capacity(text.len());
    let mut in_query = false;
    let mut word_is_url = false;
    for (i, c) in text.char_indices() {
        if c.is_whitespace() {
            in_query = false;
            word_is_url = false;
        } else if !word_is_url && (text[i..].starts_with("http://") || text[i..].starts_with("https://")) {
            word_is_url = true;
        }
        if word_is_url && c == '?' && !in_query {
            in_query = true;
            out.push_str("?<redacted>");
        }
        if !in_query {
            out.push(c);
        }
    }
    if out.chars().count() > 400 {
        out = out.chars().take(400).collect::<String>() + "...";
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_drops_queries_of_urls_only() {
        let s = redact("GET https://h/b/k?X-Amz-Signature=abc&X-Amz-Credential=AK failed? yes");
        assert_eq!(s, "GET https://h/b/k?<redacted> failed? yes");
        assert!(!s.contains("abc") && !s.contains("AK"));
    }

    #[test]
    fn io_round_trip_keeps_the_kind() {
        let e = RemoteError::new(RemoteErrorKind::Changed, "s3://b/k", "ETag \"1\" is now \"2\"").into_io();
        let r = RemoteError::from_io(&e).expect("remote inside");
        assert_eq!(r.kind, RemoteErrorKind::Changed);
        assert!(e.to_string().starts_with("s3://b/k: object changed"));
    }
}
