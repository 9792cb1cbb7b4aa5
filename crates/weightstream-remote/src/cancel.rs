//! Waiting on the store in a way the caller can stop: the CLI's Ctrl-C /
//! SIGTERM flag and the Python binding's KeyboardInterrupt set an
//! `AtomicBool` (`RemoteOptions::cancel`), and every request an open or a
//! read blocks on (a listing page, a HEAD, a header or data GET) gives up
//! once it is set. Without this a request that never ends (a hostile
//! listing, a server that stops answering) kept the process going after
//! "interrupted" was printed (issue 55).

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::future::{select, Either};

use crate::error::{RemoteError, RemoteErrorKind};
use crate::store::runtime;

/// How often a pending request looks at the flag: a signal handler sets
/// it and can wake nothing, so it is polled. 20 ms costs nothing next to
/// a round trip and is well under what a person notices.
const POLL: Duration = Duration::from_millis(20);

/// `fut` run on the remote runtime to its end, or `None` once `cancel` is
/// set (before it starts, or while it runs: the future is then dropped,
/// which closes its connection).
pub fn block_on<F: Future>(cancel: Option<&AtomicBool>, fut: F) -> Option<F::Output> {
    let Some(flag) = cancel else { return Some(runtime().block_on(fut)) };
    if flag.load(Ordering::Relaxed) {
        return None;
    }
    runtime().block_on(async {
        let stop = async {
            while !flag.load(Ordering::Relaxed) {
                tokio::time::sleep(POLL).await;
            }
        };
        match select(std::pin::pin!(fut), std::pin::pin!(stop)).await {
            Either::Left((out, _)) => Some(out),
            Either::Right(_) => None,
        }
    })
}

/// [`block_on`] of a request about `object`: its result, or `Cancelled`
/// naming the object it was waiting on.
pub fn request<T, F: Future<Output = Result<T, RemoteError>>>(cancel: Option<&AtomicBool>, object: &str, fut: F) -> Result<T, RemoteError> {
    block_on(cancel, fut).unwrap_or_else(|| Err(cancelled(object)))
}

pub fn cancelled(object: &str) -> RemoteError {
    RemoteError::new(RemoteErrorKind::Cancelled, object, "stopped on request while waiting on the store")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_flag_stops_a_request_that_never_ends() {
        let flag = AtomicBool::new(false);
        std::thread::scope(|s| {
            let waiting = s.spawn(|| block_on(Some(&flag), futures::future::pending::<()>()));
            flag.store(true, Ordering::Relaxed);
            assert_eq!(waiting.join().unwrap(), None);
        });
        assert_eq!(block_on(Some(&AtomicBool::new(false)), async { 7 }), Some(7));
        assert_eq!(block_on(None, async { 7 }), Some(7));
        assert_eq!(request(Some(&flag), "s3://b/k", async { Ok(1) }).unwrap_err().code(), "cancelled");
    }
}
