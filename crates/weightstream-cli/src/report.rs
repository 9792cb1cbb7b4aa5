//! How a failed command tells the user: one line on stderr, or a JSON object
//! under `--json`, and exit status 1.

use std::process::ExitCode;

use serde_json::json;
use weightstream::Error;

pub struct Failure {
    pub error: Error,
    pub json: bool,
}

pub type CmdResult = Result<(), Failure>;

pub trait OrFail<T> {
    fn or_fail(self, json: bool) -> Result<T, Failure>;
}

impl<T, E: Into<Error>> OrFail<T> for Result<T, E> {
    fn or_fail(self, json: bool) -> Result<T, Failure> {
        self.map_err(|e| Failure { error: e.into(), json })
    }
}

impl Failure {
    pub fn report(&self) -> ExitCode {
        let e = &self.error;
        if self.json {
            let mut obj = json!({"kind": e.code(), "message": message(e)});
            let (file, tensor, offset) = e.location();
            if let Some(file) = file {
                obj["file"] = json!(file.display().to_string());
            }
            if tensor.is_some() || offset.is_some() {
                obj["tensor"] = json!(tensor);
                obj["offset"] = json!(offset);
            }
            eprintln!("{}", json!({ "error": obj }));
        } else {
            eprintln!("error: {}", crate::human::printable(&message(e)));
        }
        ExitCode::FAILURE
    }
}

/// The command-line way out of an error, where there is one: the library's
/// messages name no flags, each front words its own hint.
fn hint(e: &Error) -> Option<&'static str> {
    match e {
        Error::Unsupported { .. } => Some("--skip-unsupported leaves it out"),
        Error::OutputExists { .. } => Some("pass --force to replace it"),
        Error::OutputTooLarge { .. } => Some("or raise --max-shard-size"),
        _ => None,
    }
}

/// The error's message with the command-line hint, as the user reads it.
fn message(e: &Error) -> String {
    match hint(e) {
        Some(h) => format!("{e}; {h}"),
        None => e.to_string(),
    }
}
