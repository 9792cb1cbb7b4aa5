//! Ctrl-C, SIGTERM and SIGHUP (the `termination` feature of ctrlc): the
//! first asks the running operation to stop (it cleans up, removing a
//! convert's partial output, and returns `cancelled`); a second exits at
//! once. SIGKILL cannot be caught: its partial output is reclaimed by the
//! next convert to the same place.

use std::sync::atomic::{AtomicBool, Ordering};

pub static CANCEL: AtomicBool = AtomicBool::new(false);

pub fn install() {
    // An error here means a handler is already installed: nothing to do.
    let _ = ctrlc::set_handler(|| {
        if CANCEL.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
        eprintln!("\ninterrupted: stopping and cleaning up (Ctrl-C again to exit at once)");
    });
}
