//! A progress bar on stderr when it is a terminal (never under --json).

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};
use weightstream::Progress;

pub struct Bar(Option<ProgressBar>);

impl Bar {
    pub fn new(label: &str, json: bool) -> Bar {
        if json || !std::io::stderr().is_terminal() {
            return Bar(None);
        }
        let pb = ProgressBar::new(0);
        pb.set_style(
            ProgressStyle::with_template("{prefix} {bar:32.cyan/blue} {bytes}/{total_bytes} {msg} ({binary_bytes_per_sec}, eta {eta})")
                .expect("valid template")
                .progress_chars("=> "),
        );
        pb.set_prefix(label.to_string());
        Bar(Some(pb))
    }

    pub fn update(&self, p: Progress) {
        if let Some(pb) = &self.0 {
            pb.set_length(p.bytes_total);
            pb.set_position(p.bytes_done);
            pb.set_message(format!("{}/{} tensors", p.tensors_done, p.tensors_total));
        }
    }

    pub fn finish(&self) {
        if let Some(pb) = &self.0 {
            pb.finish_and_clear();
        }
    }
}
