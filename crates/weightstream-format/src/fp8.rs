//! Pairing FP8 weights with their scale tensors.
//!
//! Conventions recognised (REFERENCE.md section 2):
//! - `X.weight_scale_inv` (DeepSeek-V3/R1, Qwen3-FP8): F32 blocks of
//!   `weight_block_size` from config.json, default 128x128; multiplied.
//! - `X.weight_scale` (compressed-tensors, FBGEMM): per-tensor (1 value),
//!   per-channel `(out, 1)` or block-shaped; dtype F32, BF16 or F16.
//! - `X.input_scale`, `X.k_scale`, `X.v_scale`, `X.q_scale`: activation
//!   scales, not needed to dequantize weights: recognised and left out.
//!
//! Scales may also be E8M0 (powers of two).

use std::collections::HashMap;
use std::path::Path;

use crate::catalog::{Dtype, Role, ScaleDtype, ScaleKind, ScaleLayout, ScaleRef, TensorInfo};
use crate::error::{ErrorKind, FormatError, Result};
use crate::safetensors::StDtype;

pub const SCALE_INV_SUFFIX: &str = "_scale_inv";
pub const SCALE_SUFFIX: &str = "_scale";
const ACTIVATION_SCALE_SUFFIXES: &[&str] = &[".input_scale", ".input_global_scale", ".k_scale", ".v_scale", ".q_scale"];
pub const DEFAULT_BLOCK: (u64, u64) = (128, 128);

/// The declared FP8 block size of a weight, by its name.
pub type BlockFor<'a> = &'a dyn Fn(&str) -> Option<(u64, u64)>;

fn is_fp8(t: &TensorInfo) -> bool {
    matches!(t.dtype, Dtype::St(StDtype::F8_E4M3 | StDtype::F8_E5M2))
}

/// Link every FP8 weight to its scale and mark scale and activation-scale
/// tensors with their roles. `block(weight)` is the block size config.json
/// declares for that weight (`crate::quant_config::QuantConfig::fp8_blocks`:
/// each weight its own group's); `file_path(i)` names file `i` for errors.
pub fn pair_scales<'p>(tensors: &mut [TensorInfo], block: BlockFor, file_path: impl Fn(usize) -> &'p Path) -> Result<()> {
    // Activation scales accompany FP8 and packed 4-bit weights alike.
    for t in tensors.iter_mut() {
        if ACTIVATION_SCALE_SUFFIXES.iter().any(|s| t.name.ends_with(s)) {
            t.role = Role::InputScale;
        }
    }
    if !tensors.iter().any(is_fp8) {
        return Ok(());
    }
    // Decide every pairing against a borrowed index, then apply them.
    let pairs = {
        let index: HashMap<&str, usize> = tensors.iter().enumerate().map(|(i, t)| (t.name.as_str(), i)).collect();
        let mut pairs = Vec::new();
        for (w, t) in tensors.iter().enumerate().filter(|(_, t)| is_fp8(t)) {
            let inv = index.get(format!("{}{SCALE_INV_SUFFIX}", t.name).as_str()).copied();
            let plain = index.get(format!("{}{SCALE_SUFFIX}", t.name).as_str()).copied();
            let s = match (inv, plain) {
                (None, None) => continue,
                (Some(a), Some(b)) => {
                    return Err(mismatch(t, &tensors[a], "the weight has two scales", &file_path).with_extra(&tensors[b].name))
                }
                (Some(s), None) | (None, Some(s)) => s,
            };
            pairs.push((w, s, resolve(t, &tensors[s], s, block(&t.name), &file_path)?));
        }
        pairs
    };
    for (w, s, scale_ref) in pairs {
        if let Role::Scale { weight } = tensors[s].role {
            return Err(mismatch(
                &tensors[w],
                &tensors[s],
                &format!("the scale already belongs to '{}'", tensors[weight].name),
                &file_path,
            ));
        }
        tensors[s].role = Role::Scale { weight: w };
        tensors[w].scale = Some(scale_ref);
    }
    Ok(())
}

trait WithExtra {
    fn with_extra(self, other: &str) -> Self;
}
impl WithExtra for FormatError {
    fn with_extra(mut self, other: &str) -> Self {
        if let ErrorKind::ScaleMismatch { reason, .. } = &mut self.kind {
            reason.push_str(&format!(" ('{other}' too)"));
        }
        self
    }
}

fn mismatch<'p>(w: &TensorInfo, s: &TensorInfo, reason: &str, file_path: &impl Fn(usize) -> &'p Path) -> FormatError {
    FormatError::at(
        file_path(s.file),
        s.offset,
        ErrorKind::ScaleMismatch { weight: w.name.clone(), scale: s.name.clone(), reason: reason.to_string() },
    )
    .with_tensor(&s.name)
}

fn resolve<'p>(
    w: &TensorInfo,
    s: &TensorInfo,
    s_index: usize,
    block: Option<(u64, u64)>,
    file_path: &impl Fn(usize) -> &'p Path,
) -> Result<ScaleRef> {
    let fail = |reason: String| mismatch(w, s, &reason, file_path);
    let dtype = match s.dtype {
        Dtype::St(StDtype::F32) => ScaleDtype::F32,
        Dtype::St(StDtype::BF16) => ScaleDtype::BF16,
        Dtype::St(StDtype::F16) => ScaleDtype::F16,
        Dtype::St(StDtype::F8_E8M0) => ScaleDtype::E8M0,
        d => return Err(fail(format!("scale dtype {} is not F32, BF16, F16 or F8_E8M0", d.name()))),
    };
    let layout = layout_for(w, s, block).map_err(fail)?;
    Ok(ScaleRef { tensor: s_index, dtype, layout })
}

/// Decide how the scale's shape covers the weight. Only documented layouts
/// are accepted, never inferred from the grid's shape (a block size guessed
/// to make a grid fit reads plausible but wrong weights, and `--verify`
/// cannot tell, since both sides share the guess):
/// - per-tensor: shape `[]` or `[1]`;
/// - per-channel: `[rows, 1]` or `[rows]`;
/// - blocks: a 2-D grid of exactly `[ceil(rows / bm), ceil(cols / bn)]` for
///   the configured block size (`weight_block_size` or compressed-tensors'
///   `block_structure`), 128x128 when config.json declares none.
fn layout_for(w: &TensorInfo, s: &TensorInfo, block: Option<(u64, u64)>) -> std::result::Result<ScaleLayout, String> {
    let (rows, cols) = w.matrix();
    let (bm, bn) = block.unwrap_or(DEFAULT_BLOCK);
    let grid = (rows.div_ceil(bm), cols.div_ceil(bn));
    let source = if block.is_some() { "declared in config.json" } else { "the default; config.json declares none" };
    let expected = || {
        format!(
            "a scale of shape [] or [1] (per-tensor), [{rows}, 1] or [{rows}] (per-channel), or [{}, {}] ({bm}x{bn} blocks, {source})",
            grid.0, grid.1
        )
    };
    if matches!(s.shape.as_slice(), [] | [1]) {
        return Ok(ScaleLayout {
            kind: ScaleKind::PerTensor,
            block_rows: rows.max(1),
            block_cols: cols.max(1),
            grid_rows: 1,
            grid_cols: 1,
        });
    }
    if w.shape.len() != 2 {
        return Err(format!(
            "weight shape {:?} is not 2-D; only a per-tensor scale ([] or [1]) fits it, the scale has shape {:?}",
            w.shape, s.shape
        ));
    }
    let per_channel = match s.shape.as_slice() {
        [r] | [r, 1] => *r == rows,
        _ => false,
    };
    if per_channel {
        return Ok(ScaleLayout { kind: ScaleKind::PerChannel, block_rows: 1, block_cols: cols.max(1), grid_rows: rows, grid_cols: 1 });
    }
    if s.shape.as_slice() == [grid.0, grid.1] {
        return Ok(ScaleLayout { kind: ScaleKind::Block, block_rows: bm, block_cols: bn, grid_rows: grid.0, grid_cols: grid.1 });
    }
    Err(format!("a [{rows}, {cols}] weight takes {}; found shape {:?}", expected(), s.shape))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Role;

    fn t(name: &str, dtype: StDtype, shape: &[u64]) -> TensorInfo {
        TensorInfo::test(name, Dtype::St(dtype), shape)
    }

    fn pair(ts: &mut [TensorInfo], block: Option<(u64, u64)>) -> Result<()> {
        pair_scales(ts, &|_| block, |_| Path::new("f"))
    }

    #[test]
    fn deepseek_blocks() {
        let mut ts = vec![t("a.weight", StDtype::F8_E4M3, &[300, 200]), t("a.weight_scale_inv", StDtype::F32, &[3, 2])];
        pair(&mut ts, None).unwrap();
        let l = ts[0].scale.unwrap().layout;
        assert_eq!((l.kind, l.block_rows, l.block_cols), (ScaleKind::Block, 128, 128));
        assert_eq!(ts[1].role, Role::Scale { weight: 0 });
    }

    #[test]
    fn per_tensor_channel_and_input_scale() {
        let mut ts = vec![
            t("a.weight", StDtype::F8_E4M3, &[4, 8]),
            t("a.weight_scale", StDtype::BF16, &[1]),
            t("a.input_scale", StDtype::F32, &[1]),
            t("b.weight", StDtype::F8_E5M2, &[4, 8]),
            t("b.weight_scale", StDtype::F16, &[4, 1]),
        ];
        pair(&mut ts, None).unwrap();
        assert_eq!(ts[0].scale.unwrap().layout.kind, ScaleKind::PerTensor);
        assert_eq!(ts[2].role, Role::InputScale);
        assert_eq!(ts[3].scale.unwrap().layout.kind, ScaleKind::PerChannel);
        assert_eq!(ts[3].scale.unwrap().dtype, ScaleDtype::F16);
    }

    /// Grids that fit no documented layout are refused, never read with a
    /// block size guessed to make them fit (issue 14, defect 1).
    #[test]
    fn grids_that_fit_no_layout_are_refused() {
        let cases: &[(&[u64], &[u64], Option<(u64, u64)>)] = &[
            (&[300, 200], &[2, 2], None),           // 128x128 needs [3, 2]
            (&[300, 200], &[2, 3], None),           // transposed
            (&[300, 200], &[4, 2], None),           // larger than the ceiling
            (&[256, 256], &[3, 3], None),           // 128x128 needs [2, 2]
            (&[300, 256], &[300, 2], None),         // group-wise 1x128, not declared
            (&[300, 200], &[1, 1], None),           // one value in a 2-D shape on a multi-block weight
            (&[300, 200], &[3, 2], Some((64, 64))), // declared 64x64 needs [5, 4]
            (&[4, 8], &[4, 2], None),
        ];
        for (wshape, sshape, block) in cases {
            let mut ts = vec![t("a.weight", StDtype::F8_E4M3, wshape), t("a.weight_scale", StDtype::F32, sshape)];
            let e = pair(&mut ts, *block).expect_err(&format!("{wshape:?} with {sshape:?} must be refused"));
            let msg = e.to_string();
            assert_eq!(e.kind.code(), "scale_mismatch", "{msg}");
            assert!(msg.contains("a.weight") && msg.contains("a.weight_scale"), "{msg}");
            assert!(msg.contains(&format!("{sshape:?}")) && msg.contains(&format!("[{}, {}] weight", wshape[0], wshape[1])), "{msg}");
        }
        // What does fit: exact grids for the declared or default block,
        // per-channel and per-tensor shapes.
        let fits: &[(&[u64], &[u64], Option<(u64, u64)>, ScaleKind)] = &[
            (&[300, 200], &[3, 2], None, ScaleKind::Block),
            (&[300, 256], &[300, 2], Some((1, 128)), ScaleKind::Block),
            (&[300, 200], &[5, 4], Some((64, 64)), ScaleKind::Block),
            (&[300, 200], &[300, 1], None, ScaleKind::PerChannel),
            (&[300, 200], &[300], None, ScaleKind::PerChannel),
            (&[300, 200], &[1], None, ScaleKind::PerTensor),
            (&[300, 200], &[], None, ScaleKind::PerTensor),
            (&[100, 100], &[1, 1], None, ScaleKind::Block),
        ];
        for (wshape, sshape, block, kind) in fits {
            let mut ts = vec![t("a.weight", StDtype::F8_E4M3, wshape), t("a.weight_scale", StDtype::F32, sshape)];
            pair(&mut ts, *block).unwrap_or_else(|e| panic!("{wshape:?} with {sshape:?}: {e}"));
            assert_eq!(ts[0].scale.unwrap().layout.kind, *kind, "{wshape:?} with {sshape:?}");
        }
    }

    #[test]
    fn mismatched_scale_names_both() {
        let mut ts = vec![t("a.weight", StDtype::F8_E4M3, &[300, 200]), t("a.weight_scale_inv", StDtype::F32, &[5, 7])];
        let e = pair(&mut ts, Some((128, 128))).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("a.weight") && msg.contains("a.weight_scale_inv"), "{msg}");
        assert_eq!(e.kind.code(), "scale_mismatch");
        let mut ts = vec![t("a.weight", StDtype::F8_E4M3, &[4, 8]), t("a.weight_scale", StDtype::I32, &[1])];
        assert_eq!(pair(&mut ts, None).unwrap_err().kind.code(), "scale_mismatch");
    }
}
