//! What every GET of one object is pinned to (the version seen when it
//! was opened), and whether a response shows that version: shared by the
//! source's reads (source.rs) and the local cache's keys (cache.rs).

use object_store::{GetOptions, GetRange, ObjectMeta};

use crate::error::{RemoteError, RemoteErrorKind};

/// What every GET of one object is pinned to.
#[derive(Debug, Clone)]
pub struct Pin {
    pub e_tag: Option<String>,
    pub version: Option<String>,
    pub last_modified: chrono::DateTime<chrono::Utc>,
}

impl Pin {
    /// The version `meta` (a HEAD, a listing entry or a first GET) shows.
    /// S3's version id `null` (a bucket whose versioning is suspended, or
    /// an object written before it was enabled) names no version: it is
    /// whatever was written last, so a GET of `versionId=null` serves a
    /// replacement, and every answer carries `null` again. Such an object
    /// is pinned by its ETag (else its modification time), as one in an
    /// unversioned bucket is (issue 55).
    pub fn of(meta: &ObjectMeta) -> Pin {
        let version = meta.version.clone().filter(|v| !is_null_version(v));
        Pin { e_tag: meta.e_tag.clone(), version, last_modified: meta.last_modified }
    }

    /// A GET of `range` (`None`: the whole object) of this version: the
    /// version id where one was pinned (S3's `versionId`, GCS's
    /// `?generation=N`, Azure's `versionid`: a request for that version,
    /// which servers that ignore preconditions still honour), else
    /// `If-Match` on the ETag, else `If-Unmodified-Since`.
    pub fn get_options(&self, range: Option<std::ops::Range<u64>>) -> GetOptions {
        let mut o = GetOptions { range: range.map(GetRange::Bounded), ..Default::default() };
        if self.version.is_some() {
            o.version = self.version.clone();
        } else if self.e_tag.is_some() {
            o.if_match = self.e_tag.clone();
        } else {
            o.if_unmodified_since = Some(self.last_modified);
        }
        o
    }
}

/// S3's stand-in version id for an unversioned object (its documented
/// spelling is `null`; compared without case, as a proxy may change it).
fn is_null_version(v: &str) -> bool {
    v.eq_ignore_ascii_case("null")
}

/// A 404 for a pinned version id: the object existed at open, and that
/// version is gone (GCS drops a replaced object's generation unless the
/// bucket keeps versions), so the object was replaced.
pub fn gone_is_changed(pin: &Pin, e: RemoteError) -> RemoteError {
    match (&pin.version, e.kind) {
        (Some(v), RemoteErrorKind::NotFound) => RemoteError::new(
            RemoteErrorKind::Changed,
            e.object,
            format!("the version pinned at open ({v:?}) is gone: the object was replaced or deleted"),
        ),
        _ => e,
    }
}

/// `Ok` when a GET's `meta` shows the pinned version: the same version id
/// where one was pinned; else the same ETag where one was pinned (a
/// missing ETag proves nothing); else the same `Last-Modified`. In every
/// case the same total length (object_store takes it from
/// `Content-Range`). `Err` says what differs.
pub fn proves_pin(pin: &Pin, len: u64, meta: &ObjectMeta) -> Result<(), String> {
    let show = |v: &Option<String>| v.as_deref().map_or("none".to_string(), |v| format!("{v:?}"));
    if meta.size != len {
        return Err(format!("opened as {len} bytes; a response says {} bytes", meta.size));
    }
    if pin.version.is_some() {
        if meta.version != pin.version {
            return Err(format!("opened as version {}; a response carries version {}", show(&pin.version), show(&meta.version)));
        }
    } else if pin.e_tag.is_some() {
        if meta.e_tag != pin.e_tag {
            return Err(format!("opened as ETag {}; a response carries ETag {}", show(&pin.e_tag), show(&meta.e_tag)));
        }
    } else if meta.last_modified != pin.last_modified || meta.e_tag.is_some() {
        return Err(format!(
            "opened with no ETag, Last-Modified {}; a response carries ETag {}, Last-Modified {}",
            pin.last_modified.to_rfc2822(),
            show(&meta.e_tag),
            meta.last_modified.to_rfc2822()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(e_tag: Option<&str>, version: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            location: Default::default(),
            last_modified: Default::default(),
            size: 10,
            e_tag: e_tag.map(Into::into),
            version: version.map(Into::into),
        }
    }

    #[test]
    fn a_null_version_id_pins_the_etag() {
        let pin = Pin::of(&meta(Some("\"a\""), Some("null")));
        assert_eq!(pin.version, None);
        let o = pin.get_options(Some(0..4));
        assert_eq!((o.version, o.if_match.as_deref()), (None, Some("\"a\"")));
        // A replacement answers `null` again, with another ETag: refused.
        assert!(proves_pin(&pin, 10, &meta(Some("\"b\""), Some("null"))).is_err());
        assert!(proves_pin(&pin, 10, &meta(Some("\"a\""), Some("null"))).is_ok());
        // A real version id still pins the version.
        assert_eq!(Pin::of(&meta(Some("\"a\""), Some("3HL4kqtJ"))).version.as_deref(), Some("3HL4kqtJ"));
    }
}
