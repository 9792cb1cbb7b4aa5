//! Issue 40's quantization-config cases, each a checkpoint that loaded as
//! plausible wrong BF16 (or as a contradiction nobody noticed) before.

use super::tests::{ct, int, open_like, run};
use super::*;
use crate::catalog::ScaleKind;
use serde_json::json;

fn fp8(name: &str, shape: &[u64], scale: Option<(&str, &[u64])>) -> Vec<TensorInfo> {
    let mut ts = vec![TensorInfo::test(name, Dtype::St(StDtype::F8_E4M3), shape)];
    if let Some((suffix, s)) = scale {
        ts.push(TensorInfo::test(&format!("{name}{suffix}"), Dtype::St(StDtype::F32), s));
    }
    ts
}

fn float8(targets: Json, block: [u64; 2]) -> Json {
    json!({"targets": targets, "weights": {"num_bits": 8, "type": "float", "strategy": "block", "block_structure": block}})
}

/// Item 3: each FP8 weight is read with the block size of the group that
/// targets it. A [200, 200] weight's [2, 2] grid fits both 128x128 and
/// 100x100 blocks, so the first group's size read it silently wrong.
#[test]
fn each_weight_takes_its_own_groups_block_size() {
    let cfg = ct(json!({"a": float8(json!(["Linear"]), [128, 128]), "b": float8(json!(["m.b"]), [100, 100])}));
    let mut ts = fp8("m.a.weight", &[200, 200], Some(("_scale", &[2, 2])));
    ts.extend(fp8("m.b.weight", &[200, 200], Some(("_scale", &[2, 2]))));
    open_like(&cfg, &mut ts).unwrap();
    let block = |i: usize| ts[i].scale.map(|s| (s.layout.kind, s.layout.block_rows, s.layout.block_cols));
    assert_eq!(block(0), Some((ScaleKind::Block, 128, 128)));
    assert_eq!(block(2), Some((ScaleKind::Block, 100, 100)));
}

/// Item 5: a declared layout the scale tensor contradicts is refused,
/// naming the config field and the scale.
#[test]
fn declared_layouts_the_scale_contradicts_are_refused() {
    let fp8_cfg = json!({"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}});
    let mut ts = fp8("x.weight", &[256, 256], Some(("_scale_inv", &[256, 1])));
    let e = open_like(&fp8_cfg, &mut ts).unwrap_err();
    assert_eq!(e.kind.code(), "config_mismatch");
    for needle in ["config.json", "weight_block_size [128, 128]", "x.weight_scale_inv", "[256, 1]", "one scale per row"] {
        assert!(e.to_string().contains(needle), "{needle}: {e}");
    }
    let mut ts = fp8("x.weight", &[256, 256], Some(("_scale_inv", &[2, 2])));
    open_like(&fp8_cfg, &mut ts).unwrap();
    // A compressed-tensors FP8 group saying channel over a block grid.
    let chan = ct(json!({"g": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "channel"}}}));
    let mut ts = fp8("x.weight", &[256, 256], Some(("_scale", &[2, 2])));
    let e = open_like(&chan, &mut ts).unwrap_err();
    assert!(e.to_string().contains("strategy channel") && e.to_string().contains("x.weight_scale"), "{e}");
    // Two spellings of one decoding agree: [1, 128] blocks over 100
    // columns are one scale per row.
    let rows = ct(json!({"g": float8(json!(["Linear"]), [1, 128])}));
    let mut ts = fp8("x.weight", &[4, 100], Some(("_scale", &[4, 1])));
    open_like(&rows, &mut ts).unwrap();
}

/// Item 13: a declared FP8 scale that is missing is refused; it read as 1.
#[test]
fn a_declared_scale_that_is_missing_is_refused() {
    let cfg = json!({"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}});
    let mut ts = fp8("x.weight", &[256, 256], None);
    let e = open_like(&cfg, &mut ts).unwrap_err();
    assert_eq!(e.kind.code(), "config_mismatch");
    assert!(e.to_string().contains("x.weight_scale_inv") && e.to_string().contains("x.weight'"), "{e}");
    let e = open_like(&ct(json!({"g": float8(json!(["Linear"]), [128, 128])})), &mut fp8("x.weight", &[8, 8], None)).unwrap_err();
    assert_eq!(e.kind.code(), "config_mismatch");
    // No quantization_config: raw FP8 speaks for itself, as before.
    let mut ts = fp8("x.weight", &[8, 8], None);
    crate::fp8::pair_scales(&mut ts, &|_| None, |_| Path::new("m")).unwrap();
}

/// Item 6: coerced fields are read as compressed-tensors reads them, so an
/// INT8 pack under `num_bits: "4"` and a symmetric pack under
/// `symmetric: "false"` are contradictions, not defaults.
#[test]
fn coerced_fields_are_not_defaults() {
    for bits in [json!("4"), json!(4.0)] {
        let cfg = ct(json!({"g": {"targets": ["Linear"], "weights": {"num_bits": bits, "type": "int"}}}));
        let e = run(&cfg, &[int("a", 8, false)]).unwrap_err();
        assert!(e.to_string().contains("INT4") && e.to_string().contains("INT8"), "{e}");
        run(&cfg, &[int("a", 4, false)]).unwrap();
    }
    let cfg = ct(json!({"g": {"targets": ["Linear"], "weights": {"num_bits": 4, "symmetric": "false"}}}));
    assert_eq!(run(&cfg, &[int("a", 4, false)]).unwrap_err().kind.code(), "config_mismatch");
    run(&cfg, &[int("a", 4, true)]).unwrap();
    let cfg = ct(json!({"g": {"targets": ["Linear"], "weights": {"num_bits": 4, "symmetric": "maybe"}}}));
    let e = run(&cfg, &[int("a", 4, true)]).unwrap_err();
    assert_eq!(e.kind.code(), "bad_config");
    assert!(e.to_string().contains("config_groups.g.weights.symmetric") && e.to_string().contains("maybe"), "{e}");
}

/// Item 7: a module the `ignore` list leaves unquantized, stored
/// quantized, is refused naming the entry.
#[test]
fn ignored_modules_stored_quantized_are_refused() {
    let g = json!({"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int"}});
    for entry in ["m.lm_head", "re:.*lm_head$"] {
        let mut cfg = ct(json!({ "g": g }));
        cfg["quantization_config"]["ignore"] = json!([entry]);
        let e = run(&cfg, &[int("m.up", 4, false), int("m.lm_head", 4, false)]).unwrap_err();
        assert_eq!(e.kind.code(), "config_mismatch");
        assert!(e.to_string().contains(entry) && e.to_string().contains("m.lm_head.weight_packed"), "{e}");
        run(&cfg, &[int("m.up", 4, false)]).unwrap();
    }
}

/// Item 8: a `re:` target the regex engine cannot compile is refused
/// naming it, in `targets` and in `ignore`; it matched every module.
#[test]
fn unreadable_patterns_are_refused() {
    let cfg = ct(json!({"g": {"targets": ["re:(?!.*lm_head).*"], "weights": {"num_bits": 4, "type": "int"}}}));
    let e = run(&cfg, &[int("m.lm_head", 8, false)]).unwrap_err();
    assert_eq!(e.kind.code(), "bad_config");
    assert!(e.to_string().contains("re:(?!.*lm_head).*") && e.to_string().contains("config_groups.g.targets"), "{e}");
    let mut cfg = ct(json!({"g": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int"}}}));
    cfg["quantization_config"]["ignore"] = json!(["re:(?<=a)b"]);
    assert_eq!(run(&cfg, &[int("m.up", 4, false)]).unwrap_err().kind.code(), "bad_config");
}
