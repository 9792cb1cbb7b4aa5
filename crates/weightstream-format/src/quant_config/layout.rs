//! The scale layout a config declares, against the scale tensor paired
//! with the weight (issue 40, items 4, 5 and 13).
//!
//! The tensors' shapes alone are ambiguous: scales `[R, 2]` over 384
//! columns read as groups of 192, while the config may say `group_size:
//! 256`; a per-channel `weight_scale_inv` reads as per-channel while the
//! config says 128x128 blocks. The producer decodes by its config (or fails
//! on such a checkpoint), so a layout the scale contradicts is refused, as
//! is a declared FP8 scale that is missing (it would read as 1).
//! Layouts are compared by what each scale value covers, so that a
//! per-channel scale equals `[1, cols]` blocks on a weight of `cols`
//! columns or fewer: two spellings of one decoding are not a contradiction.

use super::args::Strategy;
use super::{Governing, Scheme};
use crate::catalog::{ScaleKind, TensorInfo};

/// Why `t`'s scale contradicts what `g` declares, if it does. `found` is
/// the scheme the tensors hold (already checked to be `g`'s).
pub(super) fn contradiction(t: &TensorInfo, tensors: &[TensorInfo], found: Scheme, g: &Governing) -> Option<String> {
    // The 4-bit float schemes' group sizes are the scheme's own, checked
    // exactly by `crate::packed`.
    if matches!(found, Scheme::Packed(_)) {
        return None;
    }
    let whence = &g.whence;
    let Some(scale) = t.scale else {
        // (An INT pack always has one: `crate::packed` refuses it otherwise.)
        return (found == Scheme::Fp8).then(|| {
            format!(
                "{whence} declares scaled FP8 weights, but neither '{n}_scale_inv' nor '{n}_scale' is in the checkpoint \
             (it would load as if every scale were 1)",
                n = t.name
            )
        });
    };
    let (rows, cols) = match &t.packed {
        Some(p) => (p.shape[..p.shape.len() - 1].iter().product(), *p.shape.last().unwrap_or(&1)),
        None => t.matrix(),
    };
    // (rows, columns) one scale value covers, as declared.
    let (want, said) = match (g.args, g.block) {
        (Some(a), _) => match (a.strategy, found) {
            (Strategy::Tensor, _) => ((rows, cols), "strategy tensor (one scale)".to_string()),
            (Strategy::Channel, _) => ((1, cols), "strategy channel (one scale per row)".to_string()),
            (Strategy::Group, Scheme::Int { .. }) | (Strategy::Group | Strategy::Block, Scheme::Fp8) => {
                let (br, bc) = g.block.expect("a group or block strategy has a size (args::parse)");
                let said = match a.strategy {
                    Strategy::Group => format!("group_size {bc}"),
                    _ => format!("block_structure [{br}, {bc}]"),
                };
                ((br.min(rows), bc.min(cols)), said)
            }
            (s, _) => return Some(format!("{whence} declares strategy {}, not a weight layout weightstream reads", s.name())),
        },
        (None, Some((br, bc))) => ((br.min(rows), bc.min(cols)), format!("weight_block_size [{br}, {bc}]")),
        (None, None) => return None,
    };
    let l = scale.layout;
    let (has, holds) = match l.kind {
        // One value broadcasts over any declared layout as torch broadcasts
        // it in compressed-tensors' dequantize: the same BF16 either way.
        ScaleKind::PerTensor => return None,
        ScaleKind::PerChannel => ((1, cols), "one scale per row".to_string()),
        ScaleKind::Group => ((1, l.block_cols.min(cols)), format!("groups of {} columns", l.block_cols)),
        ScaleKind::Block => ((l.block_rows.min(rows), l.block_cols.min(cols)), format!("{}x{} blocks", l.block_rows, l.block_cols)),
    };
    if want == has {
        return None;
    }
    let st = &tensors[scale.tensor];
    let mut reason =
        format!("{whence} declares {said}, but scale '{}' of shape {:?} holds {holds} over the [{rows}, {cols}] weight", st.name, st.shape);
    if matches!(found, Scheme::Int { .. }) && a_group(g).is_some_and(|gs| cols % gs != 0) {
        // compressed-tensors' quantizer refuses such a weight, and its
        // decompress reads the group size off the scale's shape instead.
        reason.push_str(&format!(
            " (group_size {} does not divide the {cols} columns: compressed-tensors quantizes no such layout)",
            a_group(g).expect("checked")
        ));
    }
    Some(reason)
}

fn a_group(g: &Governing) -> Option<u64> {
    g.args.filter(|a| a.strategy == Strategy::Group).and_then(|a| a.group_size)
}
