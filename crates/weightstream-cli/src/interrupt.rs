//! Ctrl-C: the first one asks the running operation to stop (it cleans up
//! and returns `cancelled`); a second one exits at once.

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
