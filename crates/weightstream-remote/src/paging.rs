//! Listings that end. A listing is a run of pages, each naming the token
//! of the next; `object_store`'s whole listing follows the tokens for as
//! long as the server sends them, so a buggy or hostile store (or proxy)
//! that sends one token forever made an open loop forever, its memory
//! growing (issue 55). Here a token that comes back a second time is an
//! error, and so are more pages or entries than any checkpoint's directory
//! has; each page is a request the caller can stop (cancel.rs).

use std::collections::HashSet;
use std::future::Future;
use std::sync::atomic::AtomicBool;

use object_store::list::{PaginatedListOptions, PaginatedListResult, PaginatedListStore};
use object_store::ObjectMeta;

use crate::cache_entry::fnv64;
use crate::error::{RemoteError, RemoteErrorKind};
use crate::store::classify;

/// How long a listing may be.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// Pages (requests): S3 and GCS send up to 1,000 entries a page, Azure
    /// 5,000, so this holds millions of entries at their page sizes.
    pub pages: usize,
    /// Objects and sub-prefixes together: a checkpoint of thousands of
    /// shards is three orders of magnitude below it; a directory above it
    /// is no checkpoint directory, and listing it would take minutes.
    pub entries: usize,
}

pub const BOUNDS: Bounds = Bounds { pages: 10_000, entries: 1_000_000 };

/// Why a listing failed.
#[derive(Debug)]
pub enum ListError {
    /// A page's request failed (as `classify` says).
    Request(RemoteError),
    /// The listing was stopped: a repeated token, past [`BOUNDS`], or
    /// cancelled. Never taken for "this store does not list".
    Stopped(RemoteError),
}

/// The objects directly under `prefix` (`None`: the bucket's top level;
/// else a directory, without its trailing `/`), listed page by page
/// within [`BOUNDS`]; errors name `object`, what was being opened.
pub fn list_dir(
    pages: &dyn PaginatedListStore,
    prefix: Option<&str>,
    object: &str,
    cancel: Option<&AtomicBool>,
) -> Result<Vec<ObjectMeta>, ListError> {
    // As object_store's own listing asks: the directory with its `/`.
    let prefix = prefix.filter(|p| !p.is_empty()).map(|p| format!("{p}/"));
    collect(object, BOUNDS, cancel, |page_token| {
        let opts = PaginatedListOptions { delimiter: Some("/".into()), page_token, ..Default::default() };
        pages.list_paginated(prefix.as_deref(), opts)
    })
}

/// Every object of the pages `page` gives (called with the previous
/// page's token, `None` first), or the reason the listing was stopped.
pub fn collect<F, Fut>(object: &str, bounds: Bounds, cancel: Option<&AtomicBool>, mut page: F) -> Result<Vec<ObjectMeta>, ListError>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: Future<Output = object_store::Result<PaginatedListResult>>,
{
    let refuse =
        |why: String| ListError::Stopped(RemoteError::new(RemoteErrorKind::Server, object, format!("the listing was stopped: {why}")));
    // Tokens are kept as 128-bit hashes: a hostile server's tokens may be
    // large, and only their repetition matters.
    let mut seen: HashSet<(u64, u64)> = HashSet::new();
    let (mut objects, mut entries, mut token) = (Vec::new(), 0usize, None);
    for n in 1.. {
        let got = crate::cancel::block_on(cancel, page(token.take()))
            .ok_or_else(|| ListError::Stopped(crate::cancel::cancelled(object)))?
            .map_err(|e| ListError::Request(classify(object, &e)))?;
        entries = entries.saturating_add(got.result.objects.len() + got.result.common_prefixes.len());
        if entries > bounds.entries {
            return Err(refuse(format!("more than {} entries in {n} pages: no checkpoint directory holds that many", bounds.entries)));
        }
        objects.extend(got.result.objects);
        let Some(next) = got.page_token.filter(|t| !t.is_empty()) else { return Ok(objects) };
        let hash = (fnv64(0xcbf2_9ce4_8422_2325, next.as_bytes()), fnv64(0x6c62_272e_07bb_0142, next.as_bytes()));
        if !seen.insert(hash) {
            return Err(refuse(format!(
                "page {n} named a continuation token an earlier page named: the listing would never end (a faulty store or proxy)"
            )));
        }
        if n >= bounds.pages {
            return Err(refuse(format!("still more after {n} pages: no checkpoint directory takes that many")));
        }
        token = Some(next);
    }
    unreachable!("the loop returns")
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::ListResult;

    const SMALL: Bounds = Bounds { pages: 50, entries: 120 };

    fn meta(name: &str) -> ObjectMeta {
        ObjectMeta { location: name.into(), last_modified: Default::default(), size: 1, e_tag: None, version: None }
    }

    /// A listing whose page `n` (from 0) holds `per_page` objects and
    /// names `next(n)` as the next page's token.
    fn pages(
        per_page: usize,
        next: impl Fn(usize) -> Option<String>,
    ) -> impl FnMut(Option<String>) -> std::future::Ready<object_store::Result<PaginatedListResult>> {
        let mut n = 0;
        move |_| {
            let objects = (0..per_page).map(|i| meta(&format!("p{n}-{i}.safetensors"))).collect();
            let r = PaginatedListResult {
                result: ListResult { common_prefixes: vec![], objects, extensions: Default::default() },
                page_token: next(n),
            };
            n += 1;
            std::future::ready(Ok(r))
        }
    }

    fn why(e: ListError) -> String {
        let ListError::Stopped(e) = e else { panic!("{e:?}") };
        assert_eq!(e.kind, RemoteErrorKind::Server, "{e}");
        assert_eq!(e.object, "s3://b/p/");
        e.reason
    }

    #[test]
    fn a_listing_of_several_pages_is_whole() {
        let got = collect("s3://b/p/", SMALL, None, pages(3, |n| (n < 4).then(|| format!("t{n}")))).unwrap();
        assert_eq!(got.len(), 15);
    }

    #[test]
    fn a_repeated_token_stops_the_listing() {
        let e = collect("s3://b/p/", SMALL, None, pages(1, |_| Some("same".into()))).unwrap_err();
        assert!(why(e).contains("page 2 named a continuation token an earlier page named"));
        // A cycle of two tokens, too.
        let e = collect("s3://b/p/", SMALL, None, pages(0, |n| Some(format!("t{}", n % 2)))).unwrap_err();
        assert!(why(e).contains("page 3 named"));
    }

    #[test]
    fn fresh_tokens_forever_stop_at_the_bounds() {
        let e = collect("s3://b/p/", SMALL, None, pages(0, |n| Some(format!("t{n}")))).unwrap_err();
        assert!(why(e).contains("still more after 50 pages"));
        let e = collect("s3://b/p/", SMALL, None, pages(7, |n| Some(format!("t{n}")))).unwrap_err();
        assert!(why(e).contains("more than 120 entries in 18 pages"));
    }

    #[test]
    fn a_set_cancel_flag_stops_the_listing() {
        let stop = AtomicBool::new(true);
        let e = collect("s3://b/p/", SMALL, Some(&stop), pages(1, |_| Some("same".into()))).unwrap_err();
        assert!(matches!(e, ListError::Stopped(RemoteError { kind: RemoteErrorKind::Cancelled, .. })), "{e:?}");
    }
}
