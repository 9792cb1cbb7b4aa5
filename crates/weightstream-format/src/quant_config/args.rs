//! A compressed-tensors config group's `weights` (its `QuantizationArgs`),
//! read as that pydantic model reads it.
//!
//! pydantic v2's lax mode coerces: `num_bits: 4.0` and `"4"` are 4,
//! `symmetric: "false"` or `0` is false (issue 40, item 6). Reading such a
//! field as absent, and so as its default, decodes INT4 packs as INT8 or
//! asymmetric packs as symmetric. Each field here is coerced exactly as the
//! model does or, where its rule is wider than worth copying (`"4_0"` is
//! 40 to Python's `int`), refused naming the field; a default applies only
//! to a field that is absent. The validators after the fields (strategy
//! inferred from `group_size`, `block_structure` only with `block`) follow
//! `QuantizationArgs.validate_model_after`.

use serde_json::{Map, Value as Json};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Int,
    Float,
}

/// `QuantizationStrategy`: how the weight scales cover the weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Strategy {
    Tensor,
    Channel,
    Group,
    Block,
    Token,
    TensorGroup,
    AttnHead,
}

impl Strategy {
    const ALL: [(&'static str, Strategy); 7] = [
        ("tensor", Strategy::Tensor),
        ("channel", Strategy::Channel),
        ("group", Strategy::Group),
        ("block", Strategy::Block),
        ("token", Strategy::Token),
        ("tensor_group", Strategy::TensorGroup),
        ("attn_head", Strategy::AttnHead),
    ];

    pub(super) fn name(self) -> &'static str {
        Self::ALL.iter().find(|(_, s)| *s == self).map(|(n, _)| *n).expect("every strategy is listed")
    }
}

/// The fields of `QuantizationArgs` that say how a weight is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct WeightArgs {
    pub kind: Kind,
    pub bits: u64,
    pub symmetric: bool,
    pub strategy: Strategy,
    /// `group_size` when positive (strategy `group` or `tensor_group`).
    pub group_size: Option<u64>,
    /// `block_structure` `[rows, cols]` (strategy `block`).
    pub block: Option<(u64, u64)>,
}

/// Read `w` (at `at`, such as `config_groups.group_0.weights`); an error
/// names the field and the value found.
pub(super) fn parse(w: &Map<String, Json>, at: &str) -> Result<WeightArgs, String> {
    let field = |name: &str| w.get(name).filter(|v| !v.is_null());
    let wrong = |name: &str, v: &Json, want: &str| format!("{at}.{name} is {v}, not {want}");
    let kind = match w.get("type") {
        None => Kind::Int,
        Some(v) => match v.as_str().map(str::to_lowercase).as_deref() {
            Some("int") => Kind::Int,
            Some("float") => Kind::Float,
            _ => return Err(wrong("type", v, "\"int\" or \"float\"")),
        },
    };
    let bits = match w.get("num_bits") {
        None => 8,
        Some(v) => match lax_int(v) {
            Some(b) if b > 0 => b as u64,
            _ => return Err(wrong("num_bits", v, "a positive integer")),
        },
    };
    let symmetric = match w.get("symmetric") {
        None => true,
        Some(v) => lax_bool(v).ok_or_else(|| wrong("symmetric", v, "a boolean"))?,
    };
    // (compressed-tensors' own validator compares `group_size < -1` before
    // pydantic coerces, so a string there fails: numbers only.)
    let group_size = match field("group_size") {
        None => None,
        Some(v) => match lax_int(v).filter(|_| v.is_number()) {
            Some(g) if g >= -1 => Some(g),
            _ => return Err(wrong("group_size", v, "an integer, -1 (channel) or positive (group)")),
        },
    };
    let strategy = match field("strategy") {
        None => None,
        Some(v) => {
            let s = v.as_str().map(str::to_lowercase);
            let found = Strategy::ALL.iter().find(|(n, _)| Some(*n) == s.as_deref()).map(|(_, s)| *s);
            Some(found.ok_or_else(|| wrong("strategy", v, "a compressed-tensors strategy (tensor, channel, group, block, ...)"))?)
        }
    };
    let block = match field("block_structure") {
        None => None,
        Some(v) => Some(block_structure(v).ok_or_else(|| wrong("block_structure", v, "[rows, cols] of positive integers"))?),
    };
    let strategy = match (strategy, group_size) {
        (Some(s), _) => s,
        (None, None) => Strategy::Tensor,
        (None, Some(-1)) => Strategy::Channel,
        (None, Some(g)) if g > 0 => Strategy::Group,
        (None, Some(g)) => return Err(format!("{at}.group_size is {g}: use a positive size for groups, -1 for channels")),
    };
    let grouped = matches!(strategy, Strategy::Group | Strategy::TensorGroup);
    let positive = group_size.filter(|&g| g > 0).map(|g| g as u64);
    if grouped && positive.is_none() {
        return Err(format!("{at}.strategy {} needs a positive group_size", strategy.name()));
    }
    if !grouped && positive.is_some() {
        return Err(format!("{at}.group_size needs strategy group, found {}", strategy.name()));
    }
    if (strategy == Strategy::Block) != block.is_some() {
        return Err(format!("{at}: block_structure and strategy block go together (strategy {})", strategy.name()));
    }
    Ok(WeightArgs { kind, bits, symmetric, strategy, group_size: positive, block })
}

/// pydantic's lax `int`: an integer, a float with no fraction, or a
/// string of one (surrounding whitespace, a sign and a `.0` allowed).
/// Booleans (which Python would take as 1 and 0) and other spellings
/// Python's `int` reads (`"4_0"`) are refused instead of copied.
fn lax_int(v: &Json) -> Option<i64> {
    match v {
        Json::Number(n) => n.as_i64().or_else(|| n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 1e15).map(|f| f as i64)),
        Json::String(s) => {
            let s = s.trim();
            let (whole, frac) = s.split_once('.').unwrap_or((s, "0"));
            let digits = whole.strip_prefix(['+', '-']).unwrap_or(whole);
            let ok = !digits.is_empty()
                && digits.len() <= 15
                && digits.bytes().all(|b| b.is_ascii_digit())
                && !frac.is_empty()
                && frac.bytes().all(|b| b == b'0');
            ok.then(|| whole.parse().ok()).flatten()
        }
        _ => None,
    }
}

/// pydantic's lax `bool`: a boolean, 0 or 1 (integer or float), or one of
/// its strings in any case, without surrounding whitespace.
fn lax_bool(v: &Json) -> Option<bool> {
    match v {
        Json::Bool(b) => Some(*b),
        Json::Number(n) => match n.as_f64() {
            Some(0.0) => Some(false),
            Some(1.0) => Some(true),
            _ => None,
        },
        Json::String(s) => match s.to_lowercase().as_str() {
            "0" | "off" | "f" | "false" | "n" | "no" => Some(false),
            "1" | "on" | "t" | "true" | "y" | "yes" => Some(true),
            _ => None,
        },
        _ => None,
    }
}

/// `[rows, cols]` JSON integers, or the older `"RxC"` string
/// (`validate_block_structure`).
fn block_structure(v: &Json) -> Option<(u64, u64)> {
    let dims: Vec<u64> = match v {
        Json::Array(a) => a.iter().map(Json::as_u64).collect::<Option<_>>()?,
        Json::String(s) => s.split('x').map(|d| d.trim().parse().ok()).collect::<Option<_>>()?,
        _ => return None,
    };
    match dims[..] {
        [r, c] if r > 0 && c > 0 => Some((r, c)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(w: Json) -> Result<WeightArgs, String> {
        parse(w.as_object().expect("an object"), "config_groups.g.weights")
    }

    /// Each value as compressed-tensors 0.17's `QuantizationArgs` reads it
    /// (tried against the package: `"4"`, `4.0`, `" 4 "`, `"4.0"` are 4;
    /// `"false"`, `"F"`, `"no"`, `0`, `0.0` are false).
    #[test]
    fn fields_are_coerced_as_pydantic_does() {
        for v in [json!(4), json!(4.0), json!("4"), json!(" 4 "), json!("4.0"), json!("+4"), json!("04")] {
            assert_eq!(args(json!({"num_bits": v})).unwrap().bits, 4, "{v}");
        }
        for v in ["false", "False", "FALSE", "f", "n", "no", "off", "0"] {
            assert!(!args(json!({"symmetric": v})).unwrap().symmetric, "{v}");
        }
        for v in [json!(0), json!(0.0), json!(false)] {
            assert!(!args(json!({"symmetric": v})).unwrap().symmetric, "{v}");
        }
        for v in [json!("true"), json!("yes"), json!("on"), json!(1), json!(1.0), json!("T")] {
            assert!(args(json!({"symmetric": v})).unwrap().symmetric, "{v}");
        }
        let g = args(json!({"group_size": 128.0})).unwrap();
        assert_eq!((g.strategy, g.group_size), (Strategy::Group, Some(128)));
        assert_eq!(args(json!({"group_size": -1})).unwrap().strategy, Strategy::Channel);
        assert_eq!(args(json!({"strategy": "Channel", "type": "FLOAT"})).unwrap().kind, Kind::Float);
        assert_eq!(args(json!({"strategy": "block", "block_structure": "64x32"})).unwrap().block, Some((64, 32)));
        let d = args(json!({})).unwrap();
        assert_eq!((d.kind, d.bits, d.symmetric, d.strategy), (Kind::Int, 8, true, Strategy::Tensor));
    }

    /// What pydantic refuses (or what is not worth copying) is refused,
    /// naming the field; never read as the default.
    #[test]
    fn wrong_types_are_refused_naming_the_field() {
        let cases = [
            ("num_bits", json!({"num_bits": 4.5})),
            ("num_bits", json!({"num_bits": "four"})),
            ("num_bits", json!({"num_bits": null})),
            ("num_bits", json!({"num_bits": true})),
            ("num_bits", json!({"num_bits": "4_0"})),
            ("num_bits", json!({"num_bits": [4]})),
            ("symmetric", json!({"symmetric": " false"})),
            ("symmetric", json!({"symmetric": 2})),
            ("symmetric", json!({"symmetric": null})),
            ("symmetric", json!({"symmetric": ""})),
            ("type", json!({"type": 1})),
            ("group_size", json!({"group_size": "128"})),
            ("group_size", json!({"group_size": 0})),
            ("group_size", json!({"group_size": -2})),
            ("group_size", json!({"group_size": 64, "strategy": "channel"})),
            ("strategy", json!({"strategy": "group"})),
            ("strategy", json!({"strategy": 3})),
            ("block_structure", json!({"strategy": "block", "block_structure": [128.0, 128]})),
            ("block_structure", json!({"strategy": "block"})),
            ("block_structure", json!({"block_structure": [128, 128]})),
        ];
        for (field, w) in cases {
            let e = args(w.clone()).expect_err(&format!("{w} must be refused"));
            assert!(e.contains("config_groups.g.weights") && e.contains(field), "{w}: {e}");
        }
    }
}
