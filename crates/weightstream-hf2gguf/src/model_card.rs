//! README.md's YAML front matter as gguf-py's `Metadata.load_model_card`
//! reads it: the lines between a first line `---` and the next `---`,
//! with its two text fixes (`- no` quoted, tabs as two spaces), loaded by
//! PyYAML's `safe_load`. PyYAML resolves plain scalars by YAML 1.1 rules
//! (`yes`/`on` are booleans, `2024-01-01` a date), which no Rust YAML
//! crate does: the syntax is parsed by yaml-rust2's event parser, and each
//! plain scalar typed here with PyYAML's resolver regexes. What convert
//! does with a value depends only on whether it is a string, null, a list,
//! a mapping, or something else truthy or falsy: that is what [`Node`] keeps.

use std::collections::HashMap;
use std::sync::OnceLock;

use regex::Regex;
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

use crate::error::{format_err, unsupported, Result};

pub(crate) const README: &str = "README.md";

/// A YAML value as PyYAML constructs it, reduced to what convert tells apart.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    Null,
    Str(String),
    /// A boolean, number or date: convert writes none of them as text;
    /// whether Python finds it true decides if it is skipped.
    Other {
        truthy: bool,
    },
    List(Vec<Node>),
    /// Keys in file order; a repeated key's last value wins, as in PyYAML.
    Map(Vec<(Node, Node)>),
}

impl Node {
    /// The value of string key `key` (the last, if repeated).
    pub(crate) fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map(m) => m.iter().rev().find(|(k, _)| matches!(k, Node::Str(s) if s == key)).map(|(_, v)| v),
            _ => None,
        }
    }

    pub(crate) fn truthy(&self) -> bool {
        match self {
            Node::Null => false,
            Node::Str(s) => !s.is_empty(),
            Node::Other { truthy } => *truthy,
            Node::List(l) => !l.is_empty(),
            Node::Map(m) => !m.is_empty(),
        }
    }
}

/// PyYAML's implicit resolvers (resolver.py), for plain scalars.
fn resolvers() -> &'static [Regex; 5] {
    static R: OnceLock<[Regex; 5]> = OnceLock::new();
    R.get_or_init(|| {
        let re = |p: &str| Regex::new(&format!("^(?:{p})$")).expect("a valid regex");
        [
            re("yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF"),
            re(r"[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)"),
            re(r"[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+"),
            re(r"[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?(?:[Tt]|[ \t]+)[0-9][0-9]?:[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?"),
            re("~|null|Null|NULL|"),
        ]
    })
}

/// A plain scalar as PyYAML types it.
fn plain(s: &str) -> Result<Node> {
    let [boolean, float, int, timestamp, null] = resolvers();
    if null.is_match(s) {
        return Ok(Node::Null);
    }
    if boolean.is_match(s) {
        return Ok(Node::Other { truthy: matches!(s.to_ascii_lowercase().as_str(), "yes" | "true" | "on") });
    }
    if int.is_match(s) || float.is_match(s) {
        // Zero whatever its notation: every digit of the mantissa a 0 (nan and inf are true).
        let m = s.trim_start_matches(['-', '+']);
        let m = m.strip_prefix("0x").or_else(|| m.strip_prefix("0b")).unwrap_or(m);
        let m = m.split(['e', 'E']).next().unwrap_or("");
        let zero = m.chars().all(|c| matches!(c, '0' | '_' | '.' | ':')) && m.contains('0');
        return Ok(Node::Other { truthy: !zero });
    }
    if timestamp.is_match(s) {
        return Ok(Node::Other { truthy: true });
    }
    if s == "<<" || s == "=" {
        return Err(unsupported(README, "(front matter)", format!("the YAML {s:?} key type is not supported")));
    }
    Ok(Node::Str(s.to_string()))
}

/// The most nodes a front matter may build (real model cards: hundreds).
const MAX_NODES: usize = 1 << 20;
/// The deepest nesting of lists and mappings (real model cards: 4 or 5).
const MAX_DEPTH: usize = 64;
/// The most text the built nodes may hold, aliases counted as the copies
/// they are here: this many times the front matter's own bytes (without
/// aliases its scalars hold at most those bytes, so only aliases reach it;
/// real cards use none) ...
const MAX_TEXT_PER_BYTE: usize = 4;
/// ... plus this much, so that a short card may alias a little ...
const MIN_TEXT: usize = 1 << 20;
/// ... and never more than this (real model cards: a few KiB of text). An
/// anchored 256 KiB scalar aliased 40,000 times would be 10 GiB of copies:
/// the node count alone did not bound it (issue 55).
const MAX_TEXT: usize = 64 << 20;

/// The text bound of a front matter of `len` bytes.
fn max_text(len: usize) -> usize {
    len.saturating_mul(MAX_TEXT_PER_BYTE).saturating_add(MIN_TEXT).min(MAX_TEXT)
}

/// A node's size: its nodes and the bytes of text they hold.
fn size(n: &Node) -> (usize, usize) {
    let add = |a: (usize, usize), b: (usize, usize)| (a.0 + b.0, a.1 + b.1);
    match n {
        Node::List(l) => l.iter().map(size).fold((1, 0), add),
        Node::Map(m) => m.iter().map(|(k, v)| add(size(k), size(v))).fold((1, 0), add),
        Node::Str(s) => (1, s.len()),
        _ => (1, 0),
    }
}

/// Builds [`Node`]s from the parser's events.
#[derive(Default)]
struct Builder {
    /// Open lists and mappings (a mapping's entries flattened, key then value).
    stack: Vec<(bool, Vec<Node>, usize)>,
    /// Anchored nodes and their sizes (nodes, bytes of text).
    anchors: HashMap<usize, (Node, (usize, usize))>,
    /// Nodes built so far, aliases counted as the copies they are here.
    nodes: usize,
    /// Bytes of text in them, counted so too; at most `max_text`.
    text: usize,
    max_text: usize,
    root: Option<Node>,
    error: Option<crate::HfError>,
}

impl Builder {
    /// Counts `nodes` more nodes holding `text` more bytes: false (and the
    /// error set) past a bound.
    fn charge(&mut self, (nodes, text): (usize, usize)) -> bool {
        self.nodes = self.nodes.saturating_add(nodes);
        self.text = self.text.saturating_add(text);
        if self.nodes > MAX_NODES {
            self.error = Some(format_err(README, "(front matter)", format!("more than {MAX_NODES} YAML nodes")));
        } else if self.text > self.max_text {
            let why = format!(
                "its values, aliases expanded, hold more than {} bytes of text \
                 ({MAX_TEXT_PER_BYTE} times the front matter's size plus {} MiB, at most {} MiB)",
                self.max_text,
                MIN_TEXT >> 20,
                MAX_TEXT >> 20
            );
            self.error = Some(format_err(README, "(front matter)", why));
        }
        self.error.is_none()
    }

    fn push(&mut self, node: Node, anchor: usize) {
        if anchor > 0 {
            // The anchor's copy is counted too: anchors nested 64 deep
            // would otherwise hold 64 copies of one counted scalar.
            let size = size(&node);
            if !self.charge(size) {
                return;
            }
            self.anchors.insert(anchor, (node.clone(), size));
        }
        match self.stack.last_mut() {
            Some((_, items, _)) => items.push(node),
            None => self.root = Some(node),
        }
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, _mark: Marker) {
        if self.error.is_some() {
            return;
        }
        let tagged = || unsupported(README, "(front matter)", "explicit YAML tags are not supported");
        // PyYAML shares an aliased node; copies here: a front matter of
        // aliases of aliases ("billion laughs") is refused before it grows.
        // Counted before the copy is made: a refused alias costs nothing.
        let (nodes, text) = match &ev {
            Event::Alias(id) => self.anchors.get(id).map_or((1, 0), |a| a.1),
            Event::Scalar(s, ..) => (1, s.len()),
            _ => (1, 0),
        };
        if !self.charge((nodes, text)) {
            return;
        }
        match ev {
            Event::Scalar(_, _, _, Some(_)) | Event::SequenceStart(_, Some(_)) | Event::MappingStart(_, Some(_)) => {
                self.error = Some(tagged());
            }
            Event::Scalar(s, style, anchor, None) => match if style == TScalarStyle::Plain { plain(&s) } else { Ok(Node::Str(s)) } {
                Ok(n) => self.push(n, anchor),
                Err(e) => self.error = Some(e),
            },
            // Nesting bounded: the recursive size and drop of a Node stay shallow.
            Event::SequenceStart(..) | Event::MappingStart(..) if self.stack.len() >= MAX_DEPTH => {
                self.error = Some(format_err(README, "(front matter)", format!("nested deeper than {MAX_DEPTH}")));
            }
            Event::SequenceStart(anchor, None) => self.stack.push((false, vec![], anchor)),
            Event::MappingStart(anchor, None) => self.stack.push((true, vec![], anchor)),
            Event::SequenceEnd | Event::MappingEnd => {
                let Some((map, items, anchor)) = self.stack.pop() else { return };
                let node = if map {
                    let mut it = items.into_iter();
                    let mut pairs = vec![];
                    while let (Some(k), Some(v)) = (it.next(), it.next()) {
                        pairs.push((k, v));
                    }
                    Node::Map(pairs)
                } else {
                    Node::List(items)
                };
                self.push(node, anchor);
            }
            Event::Alias(id) => match self.anchors.get(&id).map(|a| a.0.clone()) {
                Some(n) => self.push(n, 0),
                None => self.error = Some(format_err(README, "(front matter)", "an alias to no anchor")),
            },
            _ => {}
        }
    }
}

/// Python's str.splitlines separators (after text mode's \r\n -> \n).
fn is_line_break(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\x0b' | '\x0c' | '\x1c' | '\x1d' | '\x1e' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

/// The front matter of `readme` (None: there is none, or it is not a
/// mapping, which convert ignores).
pub(crate) fn front_matter(readme: &[u8]) -> Result<Option<Node>> {
    let text = std::str::from_utf8(readme).map_err(|e| format_err(README, "(whole file)", format!("not UTF-8: {e}")))?;
    let text = text.replace("\r\n", "\n");
    let mut lines = text.split(is_line_break);
    if lines.next() != Some("---") {
        return Ok(None);
    }
    // (split keeps an empty piece after a final line break where
    // splitlines does not: one more blank line at most, the same YAML.)
    let body: Vec<&str> = lines.take_while(|l| *l != "---").collect();
    let yaml = (body.join("\n") + "\n").replace("- no\n", "- \"no\"\n").replace('\t', "  ");
    let mut b = Builder { max_text: max_text(yaml.len()), ..Builder::default() };
    Parser::new_from_str(&yaml)
        .load(&mut b, false)
        .map_err(|e| format_err(README, "(front matter)", format!("not YAML PyYAML reads: {e}")))?;
    if let Some(e) = b.error {
        return Err(e);
    }
    Ok(b.root.filter(|r| matches!(r, Node::Map(_))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_are_typed_as_pyyaml_types_them() {
        let card =
            "---\nlicense: apache-2.0\nversion: 1.0\nlanguage:\n- en\n- no\n- 'on'\n- on\ndate: 2024-05-01\nzero: 0x0\n---\n# Model\n";
        let n = front_matter(card.as_bytes()).unwrap().unwrap();
        assert_eq!(n.get("license"), Some(&Node::Str("apache-2.0".into())));
        assert_eq!(n.get("version"), Some(&Node::Other { truthy: true }));
        assert_eq!(
            n.get("language"),
            Some(&Node::List(vec![Node::Str("en".into()), Node::Str("no".into()), Node::Str("on".into()), Node::Other { truthy: true }]))
        );
        assert_eq!(n.get("date"), Some(&Node::Other { truthy: true }));
        assert_eq!(n.get("zero"), Some(&Node::Other { truthy: false }));
        assert_eq!(front_matter(b"# no front matter\n").unwrap(), None);
        assert!(front_matter(b"---\nlicense: [a\n---\n").is_err());
        // Aliases of aliases: 2^30 nodes as copies; refused at 2^20.
        let mut laughs = String::from("---\na0: &a0 [x, x]\n");
        for i in 1..30 {
            laughs += &format!("a{i}: &a{i} [*a{}, *a{}]\n", i - 1, i - 1);
        }
        let e = front_matter(laughs.as_bytes()).unwrap_err();
        assert_eq!(e.field, "(front matter)", "{e}");
        let deep = format!("---\na: {}{}\n---\n", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(front_matter(deep.as_bytes()).unwrap_err().field, "(front matter)");
    }
}
