//! The fuzzed config.json, and what an accepted checkpoint must then be:
//! each weight decoded with the scheme and layout of the config group that
//! targets it, stated here independently of `weightstream_format`'s
//! reading (compressed-tensors' `match_targets` over the few targets
//! generated, its pydantic coercions over the few values generated).

use std::collections::BTreeMap;

use serde_json::{json, Value as Json};
use weightstream_format::catalog::TensorInfo;
use weightstream_format::{Encoding, ScaleKind};

/// Targets a group may list; the weight's module is `l`. The look-ahead
/// is refused (Rust's regex cannot read it), so it comes rarely.
const TARGETS: [&str; 8] = ["Linear", "l", "re:l", "re:x", "re:.*", "Linear", "re:l", "re:(?=l)"];
/// The targets that match module `l` by name (`re.match`).
const NAMES_L: [&str; 3] = ["l", "re:l", "re:.*"];

fn num_bits(i: u8) -> Json {
    [json!(4), json!(8), json!("4"), json!(4.0), json!(" 8 "), json!(16)][i as usize % 6].clone()
}

fn symmetric(i: u8) -> Option<Json> {
    [None, Some(json!(true)), Some(json!(false)), Some(json!("false")), Some(json!("True")), Some(json!(0)), Some(json!("maybe"))]
        [i as usize % 7]
        .clone()
}

/// No config (the tensors speak), or a quantization_config of a fuzzed
/// method and format, with one to three groups of fuzzed targets, types,
/// widths (some as strings or floats), symmetry and strategy, and an
/// `ignore` list.
pub(super) fn config(c: &[u8]) -> Option<Json> {
    let method = ["compressed-tensors", "compressed-tensors", "compressed-tensors", "fp8", "modelopt", "mxfp4", "gptq"];
    let formats = ["pack-quantized", "nvfp4-pack-quantized", "mxfp4-pack-quantized", "float-quantized", "naive-quantized"];
    let m = match c[0] % 8 {
        7 => return None,
        i => method[i as usize],
    };
    let mut q = BTreeMap::new();
    q.insert("quant_method", json!(m));
    q.insert("quant_algo", json!(["NVFP4", "FP8", "W4A16"][c[1] as usize % 3]));
    q.insert("format", json!(formats[c[2] as usize % formats.len()]));
    let mut groups = serde_json::Map::new();
    for (i, g) in c[4..13].chunks(3).take(1 + c[3] as usize % 3).enumerate() {
        let mut targets = vec![TARGETS[g[0] as usize % 8]];
        if g[0] & 0x80 != 0 {
            targets.push(TARGETS[(g[0] as usize / 8) % 8]);
        }
        let mut w = serde_json::Map::new();
        w.insert("type".into(), json!(if g[1] & 1 == 0 { "int" } else { "float" }));
        w.insert("num_bits".into(), num_bits(g[1] >> 1));
        if let Some(s) = symmetric(g[2]) {
            w.insert("symmetric".into(), s);
        }
        match (g[2] / 8) % 6 {
            0 => {}
            1 => _ = w.insert("strategy".into(), json!("channel")),
            2 => _ = w.insert("strategy".into(), json!("tensor")),
            k => _ = w.insert("group_size".into(), json!([8, 16, 32, 64][k as usize - 2])),
        }
        groups.insert(format!("g{i}"), json!({"targets": targets, "weights": w}));
    }
    q.insert("config_groups", Json::Object(groups));
    if let Some(ignore) = [Some("l"), Some("re:.*"), Some("m")].get(c[13] as usize % 8).copied().flatten() {
        q.insert("ignore", json!([ignore]));
    }
    Some(json!({ "quantization_config": q }))
}

/// The group compressed-tensors picks for module `l`: every target maps to
/// the last group listing it; sorted by (`"re:" in t`, t), the first
/// matching by name wins, else `Linear` (the module's class).
fn governing(q: &Json) -> Option<&Json> {
    let mut last: Vec<(&str, &Json)> = Vec::new();
    for g in q["config_groups"].as_object()?.values() {
        for t in g["targets"].as_array()?.iter().filter_map(Json::as_str) {
            match last.iter_mut().find(|e| e.0 == t) {
                Some(e) => e.1 = g,
                None => last.push((t, g)),
            }
        }
    }
    last.sort_by_key(|(t, _)| (t.contains("re:"), *t));
    let by_name = last.iter().find(|(t, _)| NAMES_L.contains(t));
    by_name.or_else(|| last.iter().find(|(t, _)| *t == "Linear")).map(|(_, g)| *g)
}

/// `x`, accepted under `q`, is what its group declares.
pub(super) fn check(q: &Json, x: &TensorInfo) {
    let fp8 = x.dtype.name().starts_with("F8_");
    if q["quant_method"] != "compressed-tensors" || !(fp8 || x.packed.is_some()) {
        return;
    }
    let targets = q["config_groups"].to_string();
    assert!(!targets.contains("(?=l)"), "a look-ahead target accepted: {q}");
    let ignore = q.get("ignore").map(Json::to_string).unwrap_or_default();
    assert!(!ignore.contains("\"l\"") && !ignore.contains("re:.*"), "'{}' accepted though ignored: {q}", x.name);
    let g = governing(q).unwrap_or_else(|| panic!("'{}' accepted, but no group targets it: {q}", x.name));
    let w = &g["weights"];
    let kind = w["type"].as_str().expect("generated");
    let bits = match &w["num_bits"] {
        Json::String(s) => s.trim().parse::<f64>().expect("generated"),
        n => n.as_f64().expect("generated"),
    } as u8;
    let symmetric = match w.get("symmetric") {
        None => true,
        Some(Json::String(s)) => match s.to_lowercase().as_str() {
            "true" => true,
            "false" => false,
            other => panic!("symmetric '{other}' accepted: {q}"),
        },
        Some(v) => v.as_bool().or_else(|| v.as_u64().map(|n| n == 1)).expect("generated"),
    };
    let Some(p) = &x.packed else {
        assert_eq!((kind, bits), ("float", 8), "FP8 '{}' under {g}", x.name);
        return;
    };
    let Encoding::Int { bits: stored } = p.encoding else {
        assert_eq!((kind, bits), ("float", 4), "FP4 '{}' under {g}", x.name);
        return;
    };
    assert_eq!((kind, bits, symmetric), ("int", stored, p.zeros.is_none()), "INT{stored} '{}' under {g}", x.name);
    // The columns one scale covers: one scale value covers anything.
    let l = x.scale.expect("an INT pack has a scale").layout;
    let cols = p.shape[1];
    let has = match l.kind {
        ScaleKind::PerTensor => return,
        ScaleKind::PerChannel => cols,
        _ => l.block_cols.min(cols),
    };
    let want = match (w.get("strategy").and_then(Json::as_str), w.get("group_size").and_then(Json::as_u64)) {
        (Some("channel"), _) => cols,
        (_, Some(gs)) => gs.min(cols),
        // (Under strategy tensor, per-row scales of a one-row weight are one.)
        _ if p.shape[0] == 1 => cols,
        _ => panic!("per-row scales of '{}' accepted under strategy tensor: {g}", x.name),
    };
    assert_eq!(has, want, "'{}' read in groups of {has} columns under {g}", x.name);
}
