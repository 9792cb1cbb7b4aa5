//! compressed-tensors `pack-quantized` integers (INT4/INT8 in int32
//! words, `weight_shape`, group/channel/tensor scales, zero points):
//! found, checked and paired with their scales.

use super::*;

/// A compressed-tensors `pack-quantized` weight: `X.weight_packed` I32
/// `[R, P]`, its `X.weight_shape` `[R, C]` (which says the bits: C = 8P
/// for INT4, 4P for INT8; rows padded to whole words are refused), group
/// scales `[R, G]` (channel: G = 1) or one per-tensor scale, and for an
/// asymmetric pack zero points packed along the rows.
pub(super) fn resolve_int<'p>(
    w: usize,
    tensors: &[TensorInfo],
    index: &HashMap<&str, usize>,
    read: SmallReader,
    file_path: &impl Fn(usize) -> &'p Path,
) -> Result<Paired> {
    let t = &tensors[w];
    let base = t.name.strip_suffix(".weight_packed").expect("checked by the caller");
    let bad = |reason: String| {
        FormatError::at(file_path(t.file), t.offset, ErrorKind::BadPacked { weight: t.name.clone(), reason }).with_tensor(&t.name)
    };
    let find = |suffix: &str| index.get(format!("{base}{suffix}").as_str()).copied();
    if let Some(g) = find(".weight_g_idx") {
        return Err(bad(format!("activation reordering ('{}') is not supported", tensors[g].name)));
    }
    let [rows, words] = t.shape[..] else {
        return Err(bad(format!("an int32 pack is 2-D [rows, words], found {:?}", t.shape)));
    };
    let Some(shape_t) = find(".weight_shape") else {
        return Err(bad(format!("its '{base}.weight_shape' (the unpacked shape) is missing")));
    };
    let st = &tensors[shape_t];
    let elem = match st.dtype {
        Dtype::St(StDtype::I64) => 8,
        Dtype::St(StDtype::I32) => 4,
        _ => 0,
    };
    if elem == 0 || st.shape.as_slice() != [2] {
        return Err(bad(format!("'{}' must be two I64 or I32 values, found {} {:?}", st.name, st.dtype.name(), st.shape)));
    }
    let raw = read_small(st, read, file_path)?;
    let dim = |i: usize| {
        let b = &raw[i * elem..(i + 1) * elem];
        if elem == 8 {
            i64::from_le_bytes(b.try_into().expect("8 bytes"))
        } else {
            i32::from_le_bytes(b.try_into().expect("4 bytes")) as i64
        }
    };
    let (r, cols) = (dim(0), dim(1));
    let bits = match (u64::try_from(r), u64::try_from(cols)) {
        (Ok(r), Ok(c)) if r == rows && words > 0 && c == words * 8 => 4u8,
        (Ok(r), Ok(c)) if r == rows && words > 0 && c == words * 4 => 8u8,
        _ => {
            return Err(bad(format!(
                "'{}' says [{r}, {cols}]: a [{rows}, {words}] int32 pack holds [{rows}, {}] INT4 or [{rows}, {}] INT8 values                  (rows padded to whole words are not supported)",
                st.name,
                words * 8,
                words * 4
            )))
        }
    };
    let cols = words * (32 / bits as u64);
    let pf = 32 / bits as u64;

    let Some(s) = find(".weight_scale") else {
        return Err(bad(format!("its scale '{base}.weight_scale' is missing")));
    };
    let sc = &tensors[s];
    let scale_bad = |reason: String| mismatch_at(sc, &t.name, &sc.name, reason, file_path);
    let dtype = match sc.dtype {
        Dtype::St(StDtype::F32) => ScaleDtype::F32,
        Dtype::St(StDtype::BF16) => ScaleDtype::BF16,
        Dtype::St(StDtype::F16) => ScaleDtype::F16,
        d => return Err(scale_bad(format!("scale dtype {} is not F32, BF16 or F16", d.name()))),
    };
    let layout = match sc.shape.as_slice() {
        [] | [1] => ScaleLayout { kind: ScaleKind::PerTensor, block_rows: rows.max(1), block_cols: cols, grid_rows: 1, grid_cols: 1 },
        &[r, g] if r == rows && g > 0 && cols % g == 0 => {
            let kind = if g == 1 { ScaleKind::PerChannel } else { ScaleKind::Group };
            ScaleLayout { kind, block_rows: 1, block_cols: cols / g, grid_rows: rows, grid_cols: g }
        }
        other => {
            return Err(scale_bad(format!(
                "a [{rows}, {cols}] weight takes scales of shape [{rows}, G] for G groups dividing {cols} (G = 1: per channel) or [1], found {other:?}"
            )))
        }
    };
    if layout.kind == ScaleKind::Group && layout.block_cols % pf != 0 {
        // The kernels split runs at groups on whole int32 words; a group
        // that splits a word is no layout compressed-tensors writes either
        // (its group sizes are multiples of 32 values).
        return Err(scale_bad(format!(
            "groups of {} values split the int32 words of {pf} INT{bits} values: groups must be whole words",
            layout.block_cols
        )));
    }
    let zeros = match find(".weight_zero_point") {
        None => None,
        Some(z) => {
            let zt = &tensors[z];
            let want = [rows.div_ceil(pf), layout.grid_cols];
            if layout.kind == ScaleKind::PerTensor || zt.dtype != Dtype::St(StDtype::I32) || zt.shape.as_slice() != want {
                return Err(mismatch_at(
                    zt,
                    &t.name,
                    &zt.name,
                    format!(
                        "zero points of group or channel scales [{rows}, {}] are I32 packed along the rows, shape {want:?}; found {} {:?}",
                        layout.grid_cols,
                        zt.dtype.name(),
                        zt.shape
                    ),
                    file_path,
                ));
            }
            Some(z)
        }
    };
    let packed = Packed {
        scheme: PackedScheme::IntCompressedTensors,
        encoding: Encoding::Int { bits },
        name: format!("{base}.weight"),
        shape: vec![rows, cols],
        global: None,
        zeros,
    };
    Ok((w, ScaleRef { tensor: s, dtype, layout }, packed, Some(shape_t)))
}
