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
//! name (compressed-tensors' own precedence).

use std::collections::HashSet;
use std::path::Path;

use serde_json::Value as Json;

use crate::catalog::PackedScheme;
use crate::catalog::{Dtype, Encoding, Role, TensorInfo};
use crate::error::{ErrorKind, FormatError, Result};
use crate::safetensors::StDtype;

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

/// One config group: its targets and what its weights are (`None`: a
/// scheme weightstream does not read, named by `what`).
struct Group {
    name: String,
    /// Targets that are not `re:` patterns: module names or class names.
    names: Vec<String>,
    /// `re:` targets, compiled once (`None`: a pattern Rust's regex cannot
    /// compile, such as a look-around, taken to match so that the group
    /// stays a candidate rather than hiding the scheme it declares).
    patterns: Vec<Option<regex::Regex>>,
    scheme: Option<Scheme>,
    what: String,
}

/// The declaration: `None` when config.json has no `quantization_config`
/// (the tensors then speak for themselves).
enum Declared {
    /// A single scheme for every quantized weight.
    One(Option<Scheme>, String),
    /// compressed-tensors groups.
    Groups(Vec<Group>),
}

/// Check every quantized weight of `tensors` (after `pair_scales` and
/// `pair_packed`) against `config`'s `quantization_config`.
pub fn check<'p>(config: Option<&Json>, config_path: &Path, tensors: &[TensorInfo], file_path: impl Fn(usize) -> &'p Path) -> Result<()> {
    let Some(declared) = declared(config, config_path)? else {
        return Ok(());
    };
    // Per group: whether it names a class (a target that is no module's
    // name), decided once for the checkpoint.
    let by_class: Vec<bool> = match &declared {
        Declared::One(..) => vec![],
        Declared::Groups(groups) => {
            let modules: HashSet<&str> = tensors.iter().filter(|t| t.role == Role::Data).map(module_of).collect();
            groups.iter().map(|g| g.names.iter().any(|n| !modules.contains(n.as_str()))).collect()
        }
    };
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
        let (want, whence) = match &declared {
            Declared::One(s, whence) => (*s, whence.clone()),
            Declared::Groups(groups) => {
                let picked = pick_groups(groups, &by_class, module_of(t));
                match picked.as_slice() {
                    [] => {
                        let names: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
                        return Err(refuse(format!(
                            "the tensors hold {}, but no config group ({}) targets '{}'",
                            found.describe(),
                            names.join(", "),
                            module_of(t)
                        )));
                    }
                    // Several groups of one precedence: any of them may be
                    // the one; accept a scheme that one of them declares.
                    many => match many.iter().find(|g| g.scheme == Some(found)) {
                        Some(g) => (g.scheme, format!("config group '{}'", g.name)),
                        None => (many[0].scheme, format!("config group '{}' ({})", many[0].name, many[0].what)),
                    },
                }
            }
        };
        match want {
            None => {
                return Err(refuse(format!("the tensors hold {}, but {whence} is a scheme weightstream does not read", found.describe())))
            }
            Some(w) if w != found => {
                return Err(refuse(format!("{whence} declares {}, but the tensors hold {}", w.describe(), found.describe())))
            }
            Some(_) => {}
        }
    }
    Ok(())
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

/// The groups that govern `module`: those naming it exactly, else those
/// whose `re:` pattern matches it (Python's `re.match`: anchored at the
/// start only), else those naming a class, as compressed-tensors ranks them.
fn pick_groups<'g>(groups: &'g [Group], by_class: &[bool], module: &str) -> Vec<&'g Group> {
    let exact: Vec<&Group> = groups.iter().filter(|g| g.names.iter().any(|n| n == module)).collect();
    if !exact.is_empty() {
        return exact;
    }
    let by_pattern: Vec<&Group> =
        groups.iter().filter(|g| g.patterns.iter().any(|p| p.as_ref().is_none_or(|re| re.is_match(module)))).collect();
    if !by_pattern.is_empty() {
        return by_pattern;
    }
    groups.iter().zip(by_class).filter(|(_, &c)| c).map(|(g, _)| g).collect()
}

fn declared(config: Option<&Json>, config_path: &Path) -> Result<Option<Declared>> {
    let Some(q) = config.and_then(|c| c.get("quantization_config")) else {
        return Ok(None);
    };
    let bad = |what: String| FormatError::new(config_path, None, ErrorKind::BadConfig(what));
    let method = q.get("quant_method").and_then(Json::as_str).unwrap_or("");
    let one = |s: Option<Scheme>, what: &str| Ok(Some(Declared::One(s, format!("quantization_config ({what})"))));
    match method {
        "fp8" => one(Some(Scheme::Fp8), "quant_method fp8"),
        "mxfp4" => one(Some(Scheme::Packed(PackedScheme::Mxfp4GptOss)), "quant_method mxfp4"),
        "modelopt" => match q.get("quant_algo").and_then(Json::as_str) {
            Some("FP8") => one(Some(Scheme::Fp8), "modelopt FP8"),
            Some("NVFP4") => one(Some(Scheme::Packed(PackedScheme::Nvfp4Modelopt)), "modelopt NVFP4"),
            other => one(None, &format!("modelopt quant_algo {}", other.unwrap_or("(none)"))),
        },
        "compressed-tensors" => {
            let Some(groups) = q.get("config_groups").and_then(Json::as_object) else {
                return Err(bad("a compressed-tensors quantization_config has no config_groups object".into()));
            };
            let top_format = q.get("format").and_then(Json::as_str);
            let mut out = Vec::with_capacity(groups.len());
            for (name, g) in groups {
                let targets: Vec<&str> = match g.get("targets") {
                    None | Some(Json::Null) => vec!["Linear"],
                    Some(Json::Array(a)) => a.iter().filter_map(Json::as_str).collect(),
                    Some(other) => return Err(bad(format!("config_groups.{name}.targets is {other}, not a list of strings"))),
                };
                let names = targets.iter().filter(|t| !t.starts_with("re:")).map(|t| t.to_string()).collect();
                let patterns =
                    targets.iter().filter_map(|t| t.strip_prefix("re:")).map(|p| regex::Regex::new(&format!("^(?:{p})")).ok()).collect();
                let format = g.get("format").and_then(Json::as_str).or(top_format);
                let (scheme, what) = group_scheme(g.get("weights"), format);
                out.push(Group { name: name.clone(), names, patterns, scheme, what });
            }
            Ok(Some(Declared::Groups(out)))
        }
        // A method named that no rule here reads: a quantized tensor under it
        // is refused (its producer may decode it otherwise).
        other => one(None, &format!("quant_method '{other}'")),
    }
}

/// A compressed-tensors group's weights: (`type`, `num_bits`, `symmetric`)
/// and the pack format.
fn group_scheme(weights: Option<&Json>, format: Option<&str>) -> (Option<Scheme>, String) {
    let Some(w) = weights.filter(|w| w.is_object()) else {
        return (None, "no weights".into());
    };
    let kind = w.get("type").and_then(Json::as_str).unwrap_or("int");
    let bits = w.get("num_bits").and_then(Json::as_u64).unwrap_or(8);
    // compressed-tensors' QuantizationArgs default: symmetric.
    let symmetric = w.get("symmetric").and_then(Json::as_bool).unwrap_or(true);
    let what = format!("type {kind}, num_bits {bits}, format {}", format.unwrap_or("(none)"));
    let scheme = match (kind, bits, format) {
        ("float", 8, _) => Some(Scheme::Fp8),
        ("float", 4, Some("nvfp4-pack-quantized")) => Some(Scheme::Packed(PackedScheme::Nvfp4CompressedTensors)),
        ("float", 4, Some("mxfp4-pack-quantized")) => Some(Scheme::Packed(PackedScheme::Mxfp4CompressedTensors)),
        ("int", 4 | 8, Some("pack-quantized")) => Some(Scheme::Int { bits: bits as u8, symmetric }),
        _ => None,
    };
    (scheme, what)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Packed;
    use serde_json::json;

    fn int(name: &str, bits: u8, zeros: bool) -> TensorInfo {
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

    fn ct(groups: Json) -> Json {
        json!({"quantization_config": {"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": groups}})
    }

    fn run(config: &Json, tensors: &[TensorInfo]) -> Result<()> {
        check(Some(config), Path::new("config.json"), tensors, |_| Path::new("m.safetensors"))
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
        run(&cfg, std::slice::from_ref(&fp8)).unwrap();
        assert_eq!(run(&cfg, &[nv]).unwrap_err().kind.code(), "config_mismatch");
        let gptq = json!({"quantization_config": {"quant_method": "gptq"}});
        assert_eq!(run(&gptq, &[fp8]).unwrap_err().kind.code(), "config_mismatch");
        // No quantization_config: the tensors speak for themselves.
        check(Some(&json!({})), Path::new("c"), &[int("a", 4, false)], |_| Path::new("m")).unwrap();
    }
}
