//! Credentials never printed: every [`RemoteError`](crate::RemoteError)
//! reason goes through [`scrub`] (error.rs), which removes each credential
//! a store was configured with (registered here by the store builders) and
//! anything shaped like one (a SAS `sig=`, a connection string's
//! `AccountKey=`), wherever a library message put it.

use std::sync::{Mutex, OnceLock};

fn registry() -> &'static Mutex<Vec<String>> {
    static R: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    R.get_or_init(Default::default)
}

/// Shorter values are not scrubbed by value (a 1-character "key" would
/// erase every message); the shape rules below still apply to them.
const MIN_LEN: usize = 6;

/// Remember `value` (and its percent-decoded form, as a SAS token may be
/// written either way) as a credential.
pub fn register(value: &str) {
    let mut r = registry().lock().unwrap_or_else(|p| p.into_inner());
    for v in [value.trim().to_string(), decoded(value.trim())] {
        if v.len() >= MIN_LEN && !r.contains(&v) {
            r.push(v);
        }
    }
    // Longest first: a token is removed whole before a part of it is.
    r.sort_by_key(|v| std::cmp::Reverse(v.len()));
}

/// A SAS token's or query's parts worth registering: the whole and each
/// value of a `sig`/`signature` parameter.
pub fn register_query(query: &str) {
    register(query);
    for pair in query.trim_start_matches('?').split('&') {
        if let Some((k, v)) = pair.split_once('=') {
            if k.eq_ignore_ascii_case("sig") || k.to_ascii_lowercase().contains("signature") {
                register(v);
            }
        }
    }
}

/// Parameters whose values are credentials in any message.
const SHAPES: [&str; 4] = ["sig=", "accountkey=", "sharedaccesssignature=", "x-amz-signature="];

/// `text` without any registered credential, nor the value after a
/// credential-shaped name (up to `&`, `;`, a quote or whitespace).
pub fn scrub(text: &str) -> String {
    let mut out = text.to_string();
    for v in registry().lock().unwrap_or_else(|p| p.into_inner()).iter() {
        if out.contains(v.as_str()) {
            out = out.replace(v.as_str(), "<secret>");
        }
    }
    for shape in SHAPES {
        out = redact_after(&out, shape);
    }
    out
}

fn redact_after(text: &str, name: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while let Some(i) = lower[at..].find(name).map(|i| at + i + name.len()) {
        out.push_str(&text[at..i]);
        let end = text[i..].find(|c: char| matches!(c, '&' | ';' | '"' | '\'' | ',') || c.is_whitespace()).map_or(text.len(), |e| i + e);
        if end > i && !text[i..end].starts_with("<secret>") {
            out.push_str("<secret>");
        } else {
            out.push_str(&text[i..end]);
        }
        at = end;
    }
    out.push_str(&text[at..]);
    out
}

fn decoded(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match (b[i], b.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_values_and_shapes_are_removed() {
        register("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsu");
        register_query("sv=2021-06-08&ss=b&sig=abc%2Bdef%3D&se=2030");
        let t = scrub("key Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsu; sas abc+def= sv=1&sig=OTHER&x=1 AccountKey=K2;x");
        for s in ["Eby8vd", "abc+def", "abc%2B", "OTHER", "K2"] {
            assert!(!t.contains(s), "{s}: {t}");
        }
        assert!(t.contains("sig=<secret>&x=1") && t.contains("AccountKey=<secret>;x"), "{t}");
        // Ordinary text stays.
        assert_eq!(scrub("az://c/m.gguf: not found"), "az://c/m.gguf: not found");
    }
}
