//! Companion tensors no layout consumed (a `_scale` beside no FP8 weight, a
//! stray global scale...): refused, naming both, rather than left as
//! model tensors.

use super::*;

/// Names that only ever accompany a quantized weight. One left as a data
/// tensor after pairing would be handed to a model as a weight of its own
/// (an extra `weight_global_scale` beside a ModelOpt weight, say; issue 27):
/// refused, naming the weight it belongs beside.
const COMPANIONS: &[&str] = &[
    ".weight_scale",
    ".weight_scale_inv",
    ".weight_scale_2",
    ".weight_global_scale",
    ".weight_zero_point",
    ".weight_shape",
    ".weight_g_idx",
];

pub(super) fn refuse_unused_companions<'p>(tensors: &[TensorInfo], file_path: impl Fn(usize) -> &'p Path) -> Result<()> {
    let is_companion = |t: &TensorInfo| COMPANIONS.iter().any(|s| t.name.ends_with(s)) || t.name.ends_with("_scales");
    let left: Vec<&TensorInfo> = tensors.iter().filter(|t| t.role == Role::Data && is_companion(t)).collect();
    if left.is_empty() {
        // The common case, and the only one a hostile header of many
        // tensors reaches without paying for an index of every name.
        return Ok(());
    }
    let weights: HashMap<&str, usize> =
        tensors.iter().enumerate().filter(|(_, t)| t.role == Role::Data).map(|(i, t)| (t.name.as_str(), i)).collect();
    for t in left {
        let beside = COMPANIONS
            .iter()
            .filter_map(|s| t.name.strip_suffix(s))
            .flat_map(|base| [format!("{base}.weight"), format!("{base}.weight_packed")])
            .chain(t.name.strip_suffix("_scales").map(|base| format!("{base}_blocks")))
            .find_map(|w| weights.get(w.as_str()).copied());
        if let Some(w) = beside {
            let w = &tensors[w];
            return Err(FormatError::at(
                file_path(t.file),
                t.offset,
                ErrorKind::BadPacked {
                    weight: w.name.clone(),
                    reason: format!(
                        "'{}' is a scale or companion of it that its {} layout does not use; \
                         it would be handed to the model as a weight of its own",
                        t.name,
                        match &w.packed {
                            Some(p) => p.scheme.name().to_string(),
                            None => format!("{} (unquantized)", w.dtype.name()),
                        }
                    ),
                },
            )
            .with_tensor(&t.name));
        }
    }
    Ok(())
}
