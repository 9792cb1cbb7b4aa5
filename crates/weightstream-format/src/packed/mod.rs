//! Packed 4-bit weights in safetensors checkpoints: each weight paired with
//! its group scales (and global scale), every shape and dtype checked
//! exactly, so that a checkpoint that fits none of these layouts is refused
//! rather than read as plausible BF16.
//!
//! Schemes recognised, by tensor names and dtypes (docs/formats.md):
//!
//! | scheme | weight | group scales | global scale | BF16 name |
//! |---|---|---|---|---|
//! | NVFP4, ModelOpt | `X.weight` U8 `[.., k]` | `X.weight_scale` F8_E4M3 `[.., 2k/16]` | `X.weight_scale_2` F32, multiplied | `X.weight` |
//! | NVFP4, compressed-tensors `nvfp4-pack-quantized` | `X.weight_packed` U8 | `X.weight_scale` F8_E4M3, groups of 16 | `X.weight_global_scale` F32, divided by | `X.weight` |
//! | MXFP4, compressed-tensors `mxfp4-pack-quantized` | `X.weight_packed` U8 | `X.weight_scale` U8 exponents, groups of 32 | none | `X.weight` |
//! | MXFP4, gpt-oss | `X_blocks` U8 `[.., G, 16]` | `X_scales` U8 `[.., G]` | none | `X`, `[.., G * 32]` |
//! | INT4/INT8, compressed-tensors `pack-quantized` | `X.weight_packed` I32 `[R, C / (32 / bits)]`, `X.weight_shape` `[R, C]` | `X.weight_scale` F32/BF16/F16 `[R, G]` or `[1]`; `X.weight_zero_point` I32 `[ceil(R / (32 / bits)), G]` if asymmetric | none | `X.weight` |
//!
//! The 4-bit float schemes hold E2M1 values two per byte, the low nibble
//! first; the integer packs hold values with a `2^(bits-1)` offset, the
//! first in the low bits of each little-endian int32 word. The
//! activation scales beside them (`input_scale`, `input_global_scale`)
//! are not needed to dequantize weights and are left out (`crate::fp8`).

use std::collections::HashMap;
use std::path::Path;

use crate::catalog::{
    Dtype, Encoding, GlobalOp, GlobalScale, Packed, PackedScheme, Role, ScaleDtype, ScaleKind, ScaleLayout, ScaleRef, TensorInfo,
};
use crate::error::{ErrorKind, FormatError, Result};
use crate::safetensors::StDtype;

mod companions;
mod config_shapes;
mod int;

pub use config_shapes::check_against_config;

use companions::refuse_unused_companions;
use int::resolve_int;

// The scheme's geometry, beside the code that checks it (the enum and
// its name are catalog vocabulary: `crate::catalog::PackedScheme`).
impl PackedScheme {
    /// Elements per group scale of the 4-bit float schemes.
    fn fp4_group(self) -> u64 {
        match self {
            PackedScheme::Nvfp4Modelopt | PackedScheme::Nvfp4CompressedTensors => 16,
            _ => 32,
        }
    }

    fn fp4_scale_dtype(self) -> (StDtype, ScaleDtype) {
        match self {
            PackedScheme::Nvfp4Modelopt | PackedScheme::Nvfp4CompressedTensors => (StDtype::F8_E4M3, ScaleDtype::E4M3),
            _ => (StDtype::U8, ScaleDtype::Exp2U8),
        }
    }

    fn global(self) -> Option<(&'static str, GlobalOp)> {
        match self {
            PackedScheme::Nvfp4Modelopt => Some((".weight_scale_2", GlobalOp::Multiply)),
            PackedScheme::Nvfp4CompressedTensors => Some((".weight_global_scale", GlobalOp::Divide)),
            _ => None,
        }
    }
}

/// A weight found by its name, before its scales are checked.
struct Candidate {
    weight: usize,
    base: String,
    scale_name: String,
    out_name: String,
}

/// Reads the bytes of a small tensor (a global scale, a `weight_shape`);
/// called only on tensors of at most [`MAX_READ`] bytes.
pub type SmallReader<'a> = &'a dyn Fn(&TensorInfo) -> std::io::Result<Vec<u8>>;
pub const MAX_READ: u64 = 64;

/// Find the packed weights among `tensors`, check each against its scheme
/// and link it to its scales. `read` reads small tensors' values (global
/// scales, `weight_shape`); `file_path(i)` names file `i` for errors.
pub fn pair_packed<'p>(tensors: &mut [TensorInfo], read: SmallReader, file_path: impl Fn(usize) -> &'p Path) -> Result<()> {
    let found = {
        let index: HashMap<&str, usize> = tensors.iter().enumerate().map(|(i, t)| (t.name.as_str(), i)).collect();
        let mut found = Vec::new();
        for (w, t) in tensors.iter().enumerate() {
            if t.role != Role::Data {
                continue;
            }
            if t.dtype == Dtype::St(StDtype::I32) && t.name.ends_with(".weight_packed") {
                found.push(resolve_int(w, tensors, &index, read, &file_path)?);
                continue;
            }
            if t.dtype != Dtype::St(StDtype::U8) {
                continue;
            }
            let Some(c) = candidate(w, t, &index, tensors) else { continue };
            found.push(resolve(&c, tensors, &index, read, &file_path)?);
        }
        found
    };
    for (w, scale, packed, aux) in found {
        let consumed = [Some(scale.tensor), packed.global.map(|g| g.tensor), packed.zeros, aux];
        for s in consumed.into_iter().flatten() {
            if let Role::Scale { weight } = tensors[s].role {
                let (weight_name, scale_name) = (tensors[w].name.clone(), tensors[s].name.clone());
                let reason = format!("the scale already belongs to '{}'", tensors[weight].name);
                return Err(mismatch_at(&tensors[s], &weight_name, &scale_name, reason, &file_path));
            }
            tensors[s].role = Role::Scale { weight: w };
        }
        tensors[w].scale = Some(scale);
        tensors[w].packed = Some(Box::new(packed));
    }
    // A BF16 name must not be another tensor's (`X.weight` beside `X.weight_packed`).
    let mut names: HashMap<&str, usize> = HashMap::new();
    for (i, t) in tensors.iter().enumerate().filter(|(_, t)| t.role == Role::Data) {
        if let Some(&j) = names.get(t.out_name()) {
            let other = if tensors[j].packed.is_some() { j } else { i };
            let t = &tensors[other];
            return Err(FormatError::at(
                file_path(t.file),
                t.offset,
                ErrorKind::BadPacked {
                    weight: t.name.clone(),
                    reason: format!("it becomes '{}', a name another tensor has", t.out_name()),
                },
            )
            .with_tensor(&t.name));
        }
        names.insert(t.out_name(), i);
    }
    drop(names);
    refuse_unused_companions(tensors, file_path)
}

/// Whether U8 tensor `t` is named as a packed weight whose scale tensor
/// exists (the scheme is decided by the scale's dtype in `resolve`).
fn candidate(w: usize, t: &TensorInfo, index: &HashMap<&str, usize>, tensors: &[TensorInfo]) -> Option<Candidate> {
    let exists = |n: &str| index.contains_key(n);
    if let Some(base) = t.name.strip_suffix(".weight_packed") {
        return Some(Candidate {
            weight: w,
            base: base.to_string(),
            scale_name: format!("{base}.weight_scale"),
            out_name: format!("{base}.weight"),
        });
    }
    if let Some(base) = t.name.strip_suffix("_blocks") {
        let scale_name = format!("{base}_scales");
        return exists(&scale_name).then(|| Candidate { weight: w, base: base.to_string(), scale_name, out_name: base.to_string() });
    }
    if let Some(base) = t.name.strip_suffix(".weight") {
        // ModelOpt keeps the weight's name: an E4M3 `weight_scale` or a
        // `weight_scale_2` beside a U8 weight is what marks it.
        let scale_name = format!("{base}.weight_scale");
        let e4m3_scale = index.get(scale_name.as_str()).is_some_and(|&s| tensors[s].dtype == Dtype::St(StDtype::F8_E4M3));
        if e4m3_scale || exists(&format!("{base}.weight_scale_2")) {
            return Some(Candidate { weight: w, base: base.to_string(), scale_name, out_name: t.name.clone() });
        }
    }
    None
}

/// A paired weight: its index, group scale, what it becomes, and one more
/// tensor it consumes (an integer pack's `weight_shape`).
type Paired = (usize, ScaleRef, Packed, Option<usize>);

fn resolve<'p>(
    c: &Candidate,
    tensors: &[TensorInfo],
    index: &HashMap<&str, usize>,
    read: SmallReader,
    file_path: &impl Fn(usize) -> &'p Path,
) -> Result<Paired> {
    let w = &tensors[c.weight];
    let bad = |reason: String| {
        FormatError::at(file_path(w.file), w.offset, ErrorKind::BadPacked { weight: w.name.clone(), reason }).with_tensor(&w.name)
    };
    let Some(&s) = index.get(c.scale_name.as_str()) else {
        return Err(bad(format!("its group scale '{}' is missing", c.scale_name)));
    };
    let st = &tensors[s];
    let scale_bad = |reason: String| mismatch_at(st, &w.name, &st.name, reason, file_path);
    let scheme = if w.name.ends_with("_blocks") {
        PackedScheme::Mxfp4GptOss
    } else if w.name.ends_with(".weight_packed") {
        match st.dtype {
            Dtype::St(StDtype::F8_E4M3) => PackedScheme::Nvfp4CompressedTensors,
            Dtype::St(StDtype::U8) => PackedScheme::Mxfp4CompressedTensors,
            d => return Err(scale_bad(format!("scale dtype {} is neither F8_E4M3 (NVFP4) nor U8 (MXFP4 exponents)", d.name()))),
        }
    } else {
        PackedScheme::Nvfp4Modelopt
    };
    let (want_dtype, scale_dtype) = scheme.fp4_scale_dtype();
    if st.dtype != Dtype::St(want_dtype) {
        return Err(scale_bad(format!("{} takes {} group scales, found {}", scheme.name(), want_dtype.name(), st.dtype.name())));
    }

    // Shapes: the weight's last dimension holds bytes of two elements
    // (gpt-oss: [.., G, 16] bytes of G groups of 32 elements).
    let group = scheme.fp4_group();
    let (shape, grid) = if scheme == PackedScheme::Mxfp4GptOss {
        match w.shape.split_last() {
            Some((&16, lead)) if !lead.is_empty() => {
                let (g, outer) = lead.split_last().expect("not empty");
                let mut shape = outer.to_vec();
                shape.push(g * 32);
                (shape, lead.to_vec())
            }
            _ => return Err(bad(format!("an MXFP4 blocks tensor has shape [.., groups, 16], found {:?}", w.shape))),
        }
    } else {
        match w.shape.split_last() {
            Some((&k, lead)) if !lead.is_empty() && k > 0 => {
                let mut shape = lead.to_vec();
                shape.push(k * 2);
                let mut grid = lead.to_vec();
                grid.push((k * 2).div_ceil(group));
                (shape, grid)
            }
            _ => return Err(bad(format!("a packed weight is at least 2-D with bytes in its last dimension, found {:?}", w.shape))),
        }
    };
    if st.shape != grid {
        return Err(scale_bad(format!(
            "a {:?} {} weight (BF16 shape {shape:?}) takes group scales of shape {grid:?} (one per {group} elements), found {:?}",
            w.shape,
            scheme.name(),
            st.shape
        )));
    }
    let cols = *shape.last().expect("at least 2-D");
    let rows: u64 = shape[..shape.len() - 1].iter().product();
    let layout = ScaleLayout { kind: ScaleKind::Group, block_rows: 1, block_cols: group, grid_rows: rows, grid_cols: cols.div_ceil(group) };

    let global = match scheme.global() {
        None => None,
        Some((suffix, op)) => {
            let name = format!("{}{suffix}", c.base);
            let Some(&g) = index.get(name.as_str()) else {
                return Err(bad(format!("its global scale '{name}' is missing")));
            };
            let gt = &tensors[g];
            let g_bad = |reason: String| mismatch_at(gt, &w.name, &gt.name, reason, file_path);
            // compressed-tensors writes shape [1]: a 0-dim value would make
            // its own decompression round s / g to the group scale's BF16
            // (torch's type promotion), a layout it never produces.
            let shapes: &[&[u64]] = if op == GlobalOp::Divide { &[&[1]] } else { &[&[], &[1]] };
            if gt.dtype != Dtype::St(StDtype::F32) || !shapes.contains(&gt.shape.as_slice()) {
                return Err(g_bad(format!(
                    "a {} global scale is one F32 value of shape {}, found {} {:?}",
                    scheme.name(),
                    if op == GlobalOp::Divide { "[1]" } else { "[] or [1]" },
                    gt.dtype.name(),
                    gt.shape
                )));
            }
            let raw = read_small(gt, read, file_path)?;
            let value = f32::from_le_bytes(raw[..4].try_into().expect("one F32 value checked above"));
            if !(value.is_finite() && value > 0.0) {
                return Err(g_bad(format!("the global scale is {value}, not a positive finite number")));
            }
            Some(GlobalScale { tensor: g, value, op })
        }
    };
    let packed = Packed { scheme, encoding: Encoding::E2m1, name: c.out_name.clone(), shape, global, zeros: None };
    Ok((c.weight, ScaleRef { tensor: s, dtype: scale_dtype, layout }, packed, None))
}

fn read_small<'p>(t: &TensorInfo, read: SmallReader, file_path: &impl Fn(usize) -> &'p Path) -> Result<Vec<u8>> {
    debug_assert!(t.nbytes <= MAX_READ);
    read(t).map_err(|e| FormatError::io(file_path(t.file), Some(t.offset), &e).with_tensor(&t.name))
}

fn mismatch_at<'p>(s: &TensorInfo, weight: &str, scale: &str, reason: String, file_path: &impl Fn(usize) -> &'p Path) -> FormatError {
    FormatError::at(file_path(s.file), s.offset, ErrorKind::ScaleMismatch { weight: weight.to_string(), scale: scale.to_string(), reason })
        .with_tensor(scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str, dtype: StDtype, shape: &[u64]) -> TensorInfo {
        TensorInfo::test(name, Dtype::St(dtype), shape)
    }

    fn pair(ts: &mut [TensorInfo], global: f32) -> Result<()> {
        pair_packed(ts, &|_| Ok(global.to_le_bytes().to_vec()), |_| Path::new("f"))
    }

    #[test]
    fn every_scheme_pairs() {
        let mut ts = vec![
            t("a.weight", StDtype::U8, &[4, 16]),
            t("a.weight_scale", StDtype::F8_E4M3, &[4, 2]),
            t("a.weight_scale_2", StDtype::F32, &[]),
            t("b.weight_packed", StDtype::U8, &[4, 16]),
            t("b.weight_scale", StDtype::F8_E4M3, &[4, 2]),
            t("b.weight_global_scale", StDtype::F32, &[1]),
            t("c.weight_packed", StDtype::U8, &[4, 32]),
            t("c.weight_scale", StDtype::U8, &[4, 2]),
            t("d_blocks", StDtype::U8, &[2, 3, 4, 16]),
            t("d_scales", StDtype::U8, &[2, 3, 4]),
        ];
        pair(&mut ts, 0.5).unwrap();
        let p = |i: usize| *ts[i].packed.clone().unwrap();
        assert_eq!((p(0).scheme, p(0).name.as_str(), p(0).shape.clone()), (PackedScheme::Nvfp4Modelopt, "a.weight", vec![4, 32]));
        assert_eq!(p(0).global.unwrap().op, GlobalOp::Multiply);
        assert_eq!((p(3).scheme, p(3).name.as_str()), (PackedScheme::Nvfp4CompressedTensors, "b.weight"));
        assert_eq!(p(3).global.unwrap().op, GlobalOp::Divide);
        assert_eq!((p(6).scheme, p(6).name.as_str(), p(6).global), (PackedScheme::Mxfp4CompressedTensors, "c.weight", None));
        assert_eq!((p(8).scheme, p(8).name.as_str(), p(8).shape.clone()), (PackedScheme::Mxfp4GptOss, "d", vec![2, 3, 128]));
        let l = ts[8].scale.unwrap().layout;
        assert_eq!((l.kind, l.block_cols, l.grid_rows, l.grid_cols), (ScaleKind::Group, 32, 6, 4));
        for (s, w) in [(1, 0), (2, 0), (4, 3), (5, 3), (7, 6), (9, 8)] {
            assert_eq!(ts[s].role, Role::Scale { weight: w }, "{}", ts[s].name);
        }
        assert_eq!(ts[0].out_elems(), 128);
    }

    #[test]
    fn bad_layouts_are_refused_naming_the_tensor() {
        let cases: Vec<(Vec<TensorInfo>, f32, &str)> = vec![
            // missing group scale
            (vec![t("b.weight_packed", StDtype::U8, &[4, 16])], 1.0, "bad_packed"),
            // missing global scale
            (vec![t("b.weight_packed", StDtype::U8, &[4, 16]), t("b.weight_scale", StDtype::F8_E4M3, &[4, 2])], 1.0, "bad_packed"),
            // wrong scale shape (groups of 32 given to NVFP4)
            (
                vec![
                    t("b.weight_packed", StDtype::U8, &[4, 16]),
                    t("b.weight_scale", StDtype::F8_E4M3, &[4, 1]),
                    t("b.weight_global_scale", StDtype::F32, &[1]),
                ],
                1.0,
                "scale_mismatch",
            ),
            // wrong scale dtype
            (vec![t("b.weight_packed", StDtype::U8, &[4, 16]), t("b.weight_scale", StDtype::F32, &[4, 2])], 1.0, "scale_mismatch"),
            // global scale of the wrong shape
            (
                vec![
                    t("a.weight", StDtype::U8, &[4, 16]),
                    t("a.weight_scale", StDtype::F8_E4M3, &[4, 2]),
                    t("a.weight_scale_2", StDtype::F32, &[2]),
                ],
                1.0,
                "scale_mismatch",
            ),
            // gpt-oss blocks not of 16 bytes
            (vec![t("d_blocks", StDtype::U8, &[3, 4, 8]), t("d_scales", StDtype::U8, &[3, 4])], 1.0, "bad_packed"),
        ];
        for (mut ts, g, code) in cases {
            let names: Vec<String> = ts.iter().map(|t| t.name.clone()).collect();
            let e = pair(&mut ts, g).expect_err(&format!("{names:?} must be refused"));
            assert_eq!(e.kind.code(), code, "{names:?}: {e}");
            assert!(e.to_string().contains(&names[0]), "{e}");
        }
        for g in [0.0, -1.0, f32::NAN, f32::INFINITY] {
            let mut ts = vec![
                t("a.weight", StDtype::U8, &[4, 16]),
                t("a.weight_scale", StDtype::F8_E4M3, &[4, 2]),
                t("a.weight_scale_2", StDtype::F32, &[1]),
            ];
            let e = pair(&mut ts, g).expect_err("a bad global scale is refused");
            assert!(e.to_string().contains("a.weight_scale_2") && e.to_string().contains("global scale"), "{e}");
        }
        // The BF16 name of a packed weight taken by another tensor.
        let mut ts = vec![
            t("c.weight_packed", StDtype::U8, &[4, 32]),
            t("c.weight_scale", StDtype::U8, &[4, 2]),
            t("c.weight", StDtype::BF16, &[4, 64]),
        ];
        assert_eq!(pair(&mut ts, 1.0).unwrap_err().kind.code(), "bad_packed");
    }

    #[test]
    fn plain_u8_tensors_are_left_alone() {
        let mut ts = vec![t("x.weight", StDtype::U8, &[4, 16]), t("y_blocks", StDtype::U8, &[4, 16])];
        pair(&mut ts, 1.0).unwrap();
        assert!(ts.iter().all(|t| t.packed.is_none() && t.role == Role::Data));
    }
}
