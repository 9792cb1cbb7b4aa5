//! A whole small object (config.json, an index, a tokenizer file or
//! README beside a checkpoint), read like every other read: pinned to the
//! version its HEAD or listing showed, and no more bytes than that version
//! holds. Side files were once fetched with a plain GET after a size
//! probe, so a replacement between the two was read (any size) as if it
//! were the probed object (issue 55).

use std::sync::atomic::AtomicBool;

use futures::StreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectMeta, ObjectStore};

use crate::error::{RemoteError, RemoteErrorKind};
use crate::pin::{gone_is_changed, proves_pin, Pin};
use crate::store::classify;

/// The object `meta` describes, whole; refused unread when it is larger
/// than `max` bytes (`what` says what the limit is for).
pub fn get_whole(
    store: &dyn ObjectStore,
    location: &ObjectPath,
    object: &str,
    meta: &ObjectMeta,
    (max, what): (u64, &str),
    cancel: Option<&AtomicBool>,
) -> Result<Vec<u8>, RemoteError> {
    if meta.size > max {
        return Err(RemoteError::new(
            RemoteErrorKind::Server,
            object,
            format!("{} bytes: larger than the {max}-byte limit for {what}", meta.size),
        ));
    }
    let pin = Pin::of(meta);
    crate::cancel::request(cancel, object, async {
        let got = store.get_opts(location, pin.get_options(None)).await.map_err(|e| gone_is_changed(&pin, classify(object, &e)))?;
        // The precondition may be ignored: the answer itself must show the
        // version, its length included.
        proves_pin(&pin, meta.size, &got.meta).map_err(|why| RemoteError::new(RemoteErrorKind::Changed, object, why))?;
        // Never more than the pinned length is kept, whatever the body.
        let mut out = Vec::with_capacity(meta.size as usize);
        let mut body = got.into_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| classify(object, &e))?;
            if (out.len() + chunk.len()) as u64 > meta.size {
                return Err(RemoteError::new(
                    RemoteErrorKind::Truncated,
                    object,
                    format!("the server sent more than the object's {} bytes", meta.size),
                ));
            }
            out.extend_from_slice(&chunk);
        }
        if out.len() as u64 != meta.size {
            return Err(RemoteError::new(
                RemoteErrorKind::Truncated,
                object,
                format!("the server sent {} of {} bytes", out.len(), meta.size),
            ));
        }
        Ok(out)
    })
}
