//! Checkpoint features that change what the weights compute and that no
//! rule here folds into BF16 (issue 40, item 12): each refused by name,
//! never passed through as if absent (a BF16 loader ignores them, so the
//! model computes something else).
//!
//! - ModelOpt's `X.pre_quant_scale` (AWQ-style smoothing: the layer
//!   computes `W (s * x)`, so plain `W` is wrong).
//! - SVDQuant's low-rank branch (nunchaku, deepcompressor):
//!   `X.proj_down` and `X.proj_up` beside the weight (the layer adds
//!   `up (down x)`), and its `X.smooth_factor`.
//! - compressed-tensors' `transform_config` (online or fused Hadamard
//!   rotations), when it declares anything (`{}` is what it writes when
//!   there are none).
//!
//! Per-layer scheme mixes declared per module are read (compressed-tensors
//! config groups, `crate::quant_config`) or refused there (ModelOpt
//! `quant_algo: MIXED_PRECISION` is a scheme weightstream does not read).

use std::path::Path;

use serde_json::Value as Json;

use crate::catalog::TensorInfo;
use crate::error::{ErrorKind, FormatError, Result};

/// Tensor-name suffixes of the features above, and what each is.
const SUFFIXES: &[(&str, &str)] = &[
    (".pre_quant_scale", "ModelOpt AWQ pre-quantization scale, applied to the layer's input"),
    (".proj_down", "SVDQuant low-rank branch, added to the layer's output"),
    (".proj_up", "SVDQuant low-rank branch, added to the layer's output"),
    (".smooth_factor", "SVDQuant smoothing factor, applied to the layer's input"),
];

/// Refuse the first tensor that is one of the features above.
pub fn refuse_tensors<'p>(tensors: &[TensorInfo], file_path: impl Fn(usize) -> &'p Path) -> Result<()> {
    for t in tensors {
        if let Some((_, what)) = SUFFIXES.iter().find(|(s, _)| t.name.ends_with(s)) {
            let kind = ErrorKind::UnfoldedFeature { feature: format!("tensor '{}'", t.name), what: what.to_string() };
            return Err(FormatError::at(file_path(t.file), t.offset, kind).with_tensor(&t.name));
        }
    }
    Ok(())
}

/// Refuse a `quantization_config.transform_config` that declares any
/// transform.
pub fn refuse_config(config: Option<&Json>, config_path: &Path) -> Result<()> {
    let t = config.and_then(|c| c.get("quantization_config")).and_then(|q| q.get("transform_config"));
    let declared = match t {
        None | Some(Json::Null) => false,
        Some(Json::Object(m)) => !m.is_empty(),
        Some(_) => true,
    };
    if !declared {
        return Ok(());
    }
    let kind = ErrorKind::UnfoldedFeature {
        feature: "quantization_config.transform_config".into(),
        what: "compressed-tensors transforms (Hadamard rotations) of weights or activations".into(),
    };
    Err(FormatError::new(config_path, None, kind))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Dtype;
    use crate::safetensors::StDtype;
    use serde_json::json;

    #[test]
    fn each_feature_is_refused_by_name() {
        for name in ["m.q.pre_quant_scale", "m.q.proj_down", "m.q.proj_up", "m.q.smooth_factor"] {
            let ts = vec![
                TensorInfo::test("m.q.weight", Dtype::St(StDtype::BF16), &[4, 4]),
                TensorInfo::test(name, Dtype::St(StDtype::BF16), &[4]),
            ];
            let e = refuse_tensors(&ts, |_| Path::new("m.safetensors")).unwrap_err();
            assert_eq!(e.kind.code(), "unfolded_feature");
            assert!(e.to_string().contains(name) && e.to_string().contains("m.safetensors"), "{e}");
        }
        let plain = vec![TensorInfo::test("m.down_proj.weight", Dtype::St(StDtype::BF16), &[4, 4])];
        refuse_tensors(&plain, |_| Path::new("m")).unwrap();
        let t = json!({"quantization_config": {"transform_config": {"config_groups": {"R3": {"type": "hadamard"}}}}});
        let e = refuse_config(Some(&t), Path::new("config.json")).unwrap_err();
        assert!(e.to_string().contains("transform_config") && e.to_string().contains("config.json"), "{e}");
        for none in [json!({"quantization_config": {"transform_config": {}}}), json!({"quantization_config": {}}), json!({})] {
            refuse_config(Some(&none), Path::new("c")).unwrap();
        }
    }
}
