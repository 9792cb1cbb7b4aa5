//! Ctrl-C, SIGTERM and SIGHUP (the `termination` feature of ctrlc): the
//! first asks the running operation to stop (it cleans up, removing a
//! convert's partial output, and returns `cancelled`); a second exits at
//! once. SIGKILL cannot be caught: its partial output is reclaimed by the
//! next convert to the same place.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};

/// Shared (an `Arc`): the sources a remote open makes keep it, so that
/// their requests (a listing, a HEAD, a header read) stop too.
static CANCEL: LazyLock<Arc<AtomicBool>> = LazyLock::new(Default::default);

/// The flag operations watch.
pub fn flag() -> &'static AtomicBool {
    &CANCEL
}

/// The same flag, for what outlives a borrow of it (a remote open).
pub fn shared() -> Arc<AtomicBool> {
    CANCEL.clone()
}

pub fn install() {
    // An error here means a handler is already installed: nothing to do.
    let _ = ctrlc::set_handler(|| {
        if CANCEL.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
        eprintln!("\ninterrupted: stopping and cleaning up (Ctrl-C again to exit at once)");
    });
}
