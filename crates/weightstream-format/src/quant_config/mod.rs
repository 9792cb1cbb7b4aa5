//! What config.json's `quantization_config` declares, checked against what
//! the tensors are.
//!
//! The tensors alone decide how a weight is decoded (`crate::fp8`,
//! `crate::packed`), but the producing library decodes by the config: an
//! INT4 pack whose config says `num_bits: 8`, an asymmetric config without
//! zero points, or an NVFP4 config over MXFP4 tensors would each load as
//! plausible, wrong BF16 (issue 27). A checkpoint whose config and tensors
//! disagree is self-contradictory, so it is refused naming both.
//!
//! Recognised (REFERENCE.md section 2): `quant_method` `fp8` (DeepSeek,
//! Qwen3-FP8), `mxfp4` (gpt-oss), `modelopt` (`quant_algo` FP8 or NVFP4)
//! and `compressed-tensors`, whose `config_groups` each say the weights'
//! `type`, `num_bits` and `symmetric`, with the pack `format` per group or
//! for the whole config, and `targets` that pick a group for a module: an
//! exact module name first, then a `re:` regular expression, then a class
//! name (compressed-tensors' own precedence, `targets`), unless the
//! config's `ignore` list leaves the module unquantized. Each group's
//! `weights` are read as compressed-tensors' pydantic model reads them
//! (`args`), and the scale layout it declares (strategy, `group_size`,
//! `block_structure`, or `weight_block_size` for `quant_method: fp8`) must
//! be the scale tensor's (`layout`): a declared layout decides how the
//! producer decodes, so one the tensors contradict is refused (issue 40).

use std::collections::{HashMap, HashSet};
use std::path::Path;

use serde_json::Value as Json;

use crate::catalog::PackedScheme;
use crate::catalog::{Dtype, Encoding, Role, TensorInfo};
use crate::error::{ErrorKind, FormatError, Result};
use crate::safetensors::StDtype;

mod args;
mod layout;
mod targets;

use args::{Kind, WeightArgs};
use targets::{Ignore, Targets};

/// How a weight is stored, as far as a config can say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scheme {
    Fp8,
    Packed(PackedScheme),
    Int { bits: u8, symmetric: bool },
}

impl Scheme {
    fn describe(self) -> String {
        match self {
            Scheme::Fp8 => "FP8".into(),
            Scheme::Packed(p) => p.name().into(),
            Scheme::Int { bits, symmetric } => {
                format!("INT{bits} {} (compressed-tensors pack-quantized)", if symmetric { "symmetric" } else { "asymmetric" })
            }
        }
    }
}

/// One config group: its name, what its weights are (`None`: a scheme
/// weightstream does not read, named by `what`) and its `weights` args.
struct Group {
    name: String,
    scheme: Option<Scheme>,
    what: String,
    args: Option<WeightArgs>,
}

/// What config.json's `quantization_config` declares.
pub struct QuantConfig {
    declared: Declared,
}

enum Declared {
    /// A single scheme for every quantized weight, where it was declared,
    /// and `weight_block_size` if given.
    One(Option<Scheme>, String, Option<(u64, u64)>),
    /// compressed-tensors groups, their targets and `ignore` list.
    Groups(Vec<Group>, Targets, Ignore),
}

/// What the group (or config) that governs one weight declares.
struct Governing<'q> {
    scheme: Option<Scheme>,
    whence: String,
    args: Option<&'q WeightArgs>,
    block: Option<(u64, u64)>,
}

impl QuantConfig {
    /// Read `config`'s `quantization_config` (`None` when it has none: the
    /// tensors then speak for themselves).
    pub fn parse(config: Option<&Json>, config_path: &Path) -> Result<Option<QuantConfig>> {
        let bad = |what: String| FormatError::new(config_path, None, ErrorKind::BadConfig(what));
        declared(config).map_err(bad).map(|d| d.map(|declared| QuantConfig { declared }))
    }

    /// The FP8 block size declared for each FP8 weight of `tensors`
    /// (`weight_block_size`; a group's `block_structure`, or `[1, group_size]`
    /// for FP8 groups), by weight name: what `crate::fp8::pair_scales`
    /// reads a block grid with.
    pub fn fp8_blocks(&self, tensors: &[TensorInfo]) -> HashMap<String, (u64, u64)> {
        let modules = modules(tensors);
        let fp8 = tensors.iter().filter(|t| t.role == Role::Data && stored_scheme(t) == Some(Scheme::Fp8));
        fp8.filter_map(|t| {
            let candidates = self.governing(module_of(t), &modules);
            let mut blocks = candidates.iter().filter(|g| g.scheme == Some(Scheme::Fp8)).map(|g| g.block);
            // Several candidate groups (class targets other than Linear):
            // a block only if they agree.
            let first = blocks.next()??;
            blocks.all(|b| b == Some(first)).then(|| (t.name.clone(), first))
        })
        .collect()
    }

    /// The groups (or the one config) that may govern `module`.
    fn governing(&self, module: &str, modules: &HashSet<&str>) -> Vec<Governing<'_>> {
        match &self.declared {
            Declared::One(scheme, whence, block) => vec![Governing { scheme: *scheme, whence: whence.clone(), args: None, block: *block }],
            Declared::Groups(groups, targets, _) => targets
                .pick(module, modules)
                .into_iter()
                .map(|i| {
                    let g = &groups[i];
                    let block = g.args.as_ref().and_then(|a| match a.strategy {
                        args::Strategy::Block => a.block,
                        args::Strategy::Group => a.group_size.map(|s| (1, s)),
                        _ => None,
                    });
                    Governing { scheme: g.scheme, whence: format!("config group '{}' ({})", g.name, g.what), args: g.args.as_ref(), block }
                })
                .collect(),
        }
    }
}

/// Check every quantized weight of `tensors` (after `pair_scales` and
/// `pair_packed`) against the declared `quant`.
pub fn check<'p>(quant: &QuantConfig, config_path: &Path, tensors: &[TensorInfo], file_path: impl Fn(usize) -> &'p Path) -> Result<()> {
    let modules = modules(tensors);
    for t in tensors.iter().filter(|t| t.role == Role::Data) {
        let Some(found) = stored_scheme(t) else { continue };
        let refuse = |reason: String| {
            FormatError::at(
                file_path(t.file),
                t.offset,
                ErrorKind::ConfigMismatch { config: config_path.display().to_string(), weight: t.name.clone(), reason },
            )
            .with_tensor(&t.name)
        };
        if let Declared::Groups(_, _, ignore) = &quant.declared {
            if let Some(entry) = ignore.entry_for(module_of(t)) {
                return Err(refuse(format!(
                    "quantization_config.ignore entry '{entry}' leaves module '{}' unquantized, but the tensors hold {}",
                    module_of(t),
                    found.describe()
                )));
            }
        }
        let candidates = quant.governing(module_of(t), &modules);
        // Several groups of one precedence (class targets other than
        // Linear): any of them may be the one; take one whose scheme fits.
        let Some(g) = candidates.iter().find(|g| g.scheme == Some(found)).or(candidates.first()) else {
            let Declared::Groups(groups, ..) = &quant.declared else { unreachable!("one config governs every weight") };
            let names: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
            return Err(refuse(format!(
                "the tensors hold {}, but no config group ({}) targets '{}'",
                found.describe(),
                names.join(", "),
                module_of(t)
            )));
        };
        let whence = &g.whence;
        match g.scheme {
            None => {
                return Err(refuse(format!("the tensors hold {}, but {whence} is a scheme weightstream does not read", found.describe())))
            }
            Some(w) if w != found => {
                return Err(refuse(format!("{whence} declares {}, but the tensors hold {}", w.describe(), found.describe())))
            }
            Some(_) => {}
        }
        if let Some(reason) = layout::contradiction(t, tensors, found, g) {
            return Err(refuse(reason));
        }
    }
    Ok(())
}

/// Every data tensor's module: a target naming none of them is a class.
fn modules(tensors: &[TensorInfo]) -> HashSet<&str> {
    tensors.iter().filter(|t| t.role == Role::Data).map(module_of).collect()
}

/// The module a weight belongs to: its name without `.weight`-style
/// suffixes (what compressed-tensors' targets name).
fn module_of(t: &TensorInfo) -> &str {
    let name = t.name.as_str();
    [".weight_packed", ".weight", "_blocks"].iter().find_map(|s| name.strip_suffix(s)).unwrap_or(name)
}

/// What the tensors of weight `t` are, if it is a quantized weight.
fn stored_scheme(t: &TensorInfo) -> Option<Scheme> {
    if let Some(p) = &t.packed {
        return Some(match p.encoding {
            Encoding::Int { bits } => Scheme::Int { bits, symmetric: p.zeros.is_none() },
            _ => Scheme::Packed(p.scheme),
        });
    }
    matches!(t.dtype, Dtype::St(StDtype::F8_E4M3 | StDtype::F8_E5M2)).then_some(Scheme::Fp8)
}

fn declared(config: Option<&Json>) -> std::result::Result<Option<Declared>, String> {
    let Some(q) = config.and_then(|c| c.get("quantization_config")) else {
        return Ok(None);
    };
    let method = q.get("quant_method").and_then(Json::as_str).unwrap_or("");
    let block = match q.get("weight_block_size").filter(|v| !v.is_null()) {
        None => None,
        Some(v) => match v.as_array().map(|a| a.iter().map(Json::as_u64).collect::<Option<Vec<_>>>()) {
            Some(Some(d)) if d.len() == 2 && d[0] > 0 && d[1] > 0 => Some((d[0], d[1])),
            _ => return Err(format!("quantization_config.weight_block_size must be [rows, cols] of positive integers, found {v}")),
        },
    };
    let one = |s: Option<Scheme>, what: &str| {
        let whence = match block {
            Some((r, c)) => format!("quantization_config ({what}, weight_block_size [{r}, {c}])"),
            None => format!("quantization_config ({what})"),
        };
        Ok(Some(Declared::One(s, whence, block)))
    };
    match method {
        "fp8" => one(Some(Scheme::Fp8), "quant_method fp8"),
        "mxfp4" => one(Some(Scheme::Packed(PackedScheme::Mxfp4GptOss)), "quant_method mxfp4"),
        "modelopt" => match q.get("quant_algo").and_then(Json::as_str) {
            Some("FP8") => one(Some(Scheme::Fp8), "modelopt FP8"),
            Some("NVFP4") => one(Some(Scheme::Packed(PackedScheme::Nvfp4Modelopt)), "modelopt NVFP4"),
            other => one(None, &format!("modelopt quant_algo {}", other.unwrap_or("(none)"))),
        },
        "compressed-tensors" => compressed_tensors(q).map(Some),
        // A method named that no rule here reads: a quantized tensor under it
        // is refused (its producer may decode it otherwise).
        other => one(None, &format!("quant_method '{other}'")),
    }
}

fn compressed_tensors(q: &Json) -> std::result::Result<Declared, String> {
    let Some(groups) = q.get("config_groups").and_then(Json::as_object) else {
        return Err("a compressed-tensors quantization_config has no config_groups object".into());
    };
    let strings = |v: Option<&Json>, at: &str| -> std::result::Result<Option<Vec<String>>, String> {
        match v {
            None | Some(Json::Null) => Ok(None),
            Some(Json::Array(a)) if a.iter().all(Json::is_string) => {
                Ok(Some(a.iter().filter_map(Json::as_str).map(str::to_string).collect()))
            }
            Some(other) => Err(format!("{at} is {other}, not a list of strings")),
        }
    };
    let top_format = q.get("format").and_then(Json::as_str);
    let mut out = Vec::with_capacity(groups.len());
    let mut all_targets = Vec::with_capacity(groups.len());
    for (name, g) in groups {
        let targets = strings(g.get("targets"), &format!("config_groups.{name}.targets"))?.unwrap_or_else(|| vec!["Linear".into()]);
        all_targets.push((name.clone(), targets));
        let format = g.get("format").and_then(Json::as_str).or(top_format);
        let args = match g.get("weights") {
            Some(Json::Object(w)) => Some(args::parse(w, &format!("config_groups.{name}.weights"))?),
            _ => None,
        };
        let (scheme, what) = group_scheme(args.as_ref(), format);
        out.push(Group { name: name.clone(), scheme, what, args });
    }
    let ignore = strings(q.get("ignore"), "quantization_config.ignore")?.unwrap_or_default();
    Ok(Declared::Groups(out, Targets::new(&all_targets)?, Ignore::new(&ignore)?))
}

/// A compressed-tensors group's weights: (`type`, `num_bits`, `symmetric`)
/// and the pack format.
fn group_scheme(args: Option<&WeightArgs>, format: Option<&str>) -> (Option<Scheme>, String) {
    let Some(a) = args else {
        return (None, "no weights".into());
    };
    let kind = if a.kind == Kind::Int { "int" } else { "float" };
    let what = format!("type {kind}, num_bits {}, format {}", a.bits, format.unwrap_or("(none)"));
    let scheme = match (a.kind, a.bits, format) {
        (Kind::Float, 8, _) => Some(Scheme::Fp8),
        (Kind::Float, 4, Some("nvfp4-pack-quantized")) => Some(Scheme::Packed(PackedScheme::Nvfp4CompressedTensors)),
        (Kind::Float, 4, Some("mxfp4-pack-quantized")) => Some(Scheme::Packed(PackedScheme::Mxfp4CompressedTensors)),
        (Kind::Int, 4 | 8, Some("pack-quantized")) => Some(Scheme::Int { bits: a.bits as u8, symmetric: a.symmetric }),
        _ => None,
    };
    (scheme, what)
}

#[cfg(test)]
mod issue40_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Packed;
    use serde_json::json;

    pub(super) fn int(name: &str, bits: u8, zeros: bool) -> TensorInfo {
        let mut t = TensorInfo::test(&format!("{name}.weight_packed"), Dtype::St(StDtype::I32), &[4, 4]);
        t.packed = Some(Box::new(Packed {
            scheme: PackedScheme::IntCompressedTensors,
            encoding: Encoding::Int { bits },
            name: format!("{name}.weight"),
            shape: vec![4, 32],
            global: None,
            zeros: zeros.then_some(1),
        }));
        t
    }

    pub(super) fn ct(groups: Json) -> Json {
        json!({"quantization_config": {"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": groups}})
    }

    /// What `crate::open` does with a config and safetensors' tensors.
    pub(super) fn open_like(config: &Json, tensors: &mut [TensorInfo]) -> Result<()> {
        let config_path = Path::new("config.json");
        let q = QuantConfig::parse(Some(config), config_path)?.expect("a quantization_config");
        let blocks = q.fp8_blocks(tensors);
        crate::fp8::pair_scales(tensors, &|n| blocks.get(n).copied(), |_| Path::new("m.safetensors"))?;
        check(&q, config_path, tensors, |_| Path::new("m.safetensors"))
    }

    pub(super) fn run(config: &Json, tensors: &[TensorInfo]) -> Result<()> {
        match QuantConfig::parse(Some(config), Path::new("config.json"))? {
            Some(q) => check(&q, Path::new("config.json"), tensors, |_| Path::new("m.safetensors")),
            None => Ok(()),
        }
    }

    #[test]
    fn int_bits_and_symmetry_must_match_the_config() {
        let g4 = ct(json!({"g": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "symmetric": true}}}));
        run(&g4, &[int("a", 4, false)]).unwrap();
        let e = run(&g4, &[int("a", 8, false)]).unwrap_err();
        assert_eq!(e.kind.code(), "config_mismatch");
        assert!(e.to_string().contains("INT4") && e.to_string().contains("INT8") && e.to_string().contains("a.weight_packed"), "{e}");
        let asym = ct(json!({"g": {"weights": {"num_bits": 4, "type": "int", "symmetric": false}}}));
        assert_eq!(run(&asym, &[int("a", 4, false)]).unwrap_err().kind.code(), "config_mismatch");
        run(&asym, &[int("a", 4, true)]).unwrap();
        assert_eq!(run(&g4, &[int("a", 4, true)]).unwrap_err().kind.code(), "config_mismatch");
    }

    #[test]
    fn targets_pick_groups_by_name_then_pattern_then_class() {
        let cfg = ct(json!({
            "by_class": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "int"}},
            "by_re": {"targets": ["re:.*mlp\\..*"], "weights": {"num_bits": 4, "type": "int"}},
            "by_name": {"targets": ["m.x"], "weights": {"num_bits": 4, "type": "int", "symmetric": false}},
        }));
        run(&cfg, &[int("m.x", 4, true), int("m.mlp.up", 4, false), int("m.attn.q", 8, false)]).unwrap();
        assert_eq!(run(&cfg, &[int("m.mlp.up", 8, false)]).unwrap_err().kind.code(), "config_mismatch");
        assert_eq!(run(&cfg, &[int("m.attn.q", 4, false)]).unwrap_err().kind.code(), "config_mismatch");
    }

    #[test]
    fn the_named_scheme_must_be_the_tensors() {
        let mut nv = TensorInfo::test("a.weight_packed", Dtype::St(StDtype::U8), &[4, 16]);
        nv.packed = Some(Box::new(Packed {
            scheme: PackedScheme::Mxfp4CompressedTensors,
            encoding: Encoding::E2m1,
            name: "a.weight".into(),
            shape: vec![4, 32],
            global: None,
            zeros: None,
        }));
        let cfg = json!({"quantization_config": {"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
            "config_groups": {"g": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "float"}}}}});
        let e = run(&cfg, std::slice::from_ref(&nv)).unwrap_err();
        assert!(e.to_string().contains("NVFP4") && e.to_string().contains("MXFP4"), "{e}");
        let fp8 = TensorInfo::test("b.weight", Dtype::St(StDtype::F8_E4M3), &[4, 16]);
        let cfg = json!({"quantization_config": {"quant_method": "fp8"}});
        let mut scaled = vec![fp8.clone(), TensorInfo::test("b.weight_scale_inv", Dtype::St(StDtype::F32), &[1])];
        open_like(&cfg, &mut scaled).unwrap();
        assert_eq!(run(&cfg, &[nv]).unwrap_err().kind.code(), "config_mismatch");
        let gptq = json!({"quantization_config": {"quant_method": "gptq"}});
        assert_eq!(run(&gptq, &[fp8]).unwrap_err().kind.code(), "config_mismatch");
        // No quantization_config: the tensors speak for themselves.
        assert!(QuantConfig::parse(Some(&json!({})), Path::new("c")).unwrap().is_none());
    }
}
