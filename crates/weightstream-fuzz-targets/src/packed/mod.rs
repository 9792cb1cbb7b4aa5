//! Packed safetensors checkpoints, config.json included, built from a few
//! fuzzed choices (issue 27: INT packs read at another width than their
//! config's, asymmetric configs without zero points, a config's scheme
//! over another scheme's tensors, companions handed out as weights) and
//! issue 40 (several config groups and their targets, `ignore`, coerced
//! field types, declared group sizes: `oracle`).

use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Value as Json};
use weightstream::{Plan, PlanOptions};
use weightstream_format::catalog::Role;
use weightstream_format::{safetensors_catalog, MemorySource, SharedSource};

mod oracle;

/// Bytes before the fill: the stored weight's choices and the config's.
const HEAD: usize = 20;

const SCALE_SUFFIXES: &[&str] =
    &[".weight_scale", ".weight_scale_2", ".weight_global_scale", ".weight_zero_point", ".weight_shape", ".weight_g_idx", "_scales"];

/// A safetensors file of `(name, dtype, shape, bytes)` entries.
fn safetensors(tensors: &[(String, &str, Vec<u64>, Vec<u8>)]) -> Vec<u8> {
    let mut header = serde_json::Map::new();
    let mut data = Vec::new();
    for (name, dtype, shape, bytes) in tensors {
        header.insert(name.clone(), json!({"dtype": dtype, "shape": shape, "data_offsets": [data.len(), data.len() + bytes.len()]}));
        data.extend_from_slice(bytes);
    }
    let mut h = serde_json::to_vec(&Json::Object(header)).expect("a map serializes");
    h.resize(h.len().next_multiple_of(8), b' ');
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend(h);
    out.extend(data);
    out
}

/// Choices: the weight's scheme as stored (INT4/INT8 pack, NVFP4 or MXFP4
/// compressed-tensors, ModelOpt NVFP4, FP8), zero points or not, the
/// config's method, format, bits and symmetry, an extra companion, a group
/// size; the rest of the bytes fill the tensors. Accepted means: no
/// companion left as a data tensor, every weight decoded as the config
/// group that targets it declares (`oracle::check`), and the whole
/// checkpoint loads (no `dequant` error at load).
pub fn packed_checkpoint(data: &[u8]) {
    if data.len() <= HEAD {
        return;
    }
    let fill = |n: usize, salt: u8| -> Vec<u8> {
        (0..n).map(|i| data[HEAD + (i % (data.len() - HEAD).max(1)).min(data.len() - HEAD - 1)] ^ salt).collect()
    };
    let rows = 1 + data[1] as u64 % 4;
    let stored = data[0] % 5;
    let zeros = data[2] & 1 == 1;
    let extra = SCALE_SUFFIXES.get(data[3] as usize % 12).copied();
    let group = [4u64, 8, 16, 32, 64][data[4] as usize % 5];
    let mut t: Vec<(String, &str, Vec<u64>, Vec<u8>)> = Vec::new();
    let cols = 64u64;
    match stored {
        0 | 1 => {
            let bits = if stored == 0 { 4 } else { 8 };
            let words = cols * bits / 32;
            t.push(("l.weight_packed".into(), "I32", vec![rows, words], fill((rows * words * 4) as usize, 1)));
            let shape: Vec<u8> = [rows as i64, cols as i64].iter().flat_map(|v| v.to_le_bytes()).collect();
            t.push(("l.weight_shape".into(), "I64", vec![2], shape));
            let g = cols / group;
            t.push(("l.weight_scale".into(), "F32", vec![rows, g], fill((rows * g * 4) as usize, 2)));
            if zeros {
                let zr = rows.div_ceil(32 / bits);
                t.push(("l.weight_zero_point".into(), "I32", vec![zr, g], fill((zr * g * 4) as usize, 3)));
            }
        }
        2 | 3 => {
            let (g, sd) = if stored == 2 { (16, "F8_E4M3") } else { (32, "U8") };
            t.push(("l.weight_packed".into(), "U8", vec![rows, cols / 2], fill((rows * cols / 2) as usize, 4)));
            t.push(("l.weight_scale".into(), sd, vec![rows, cols / g], fill((rows * cols / g) as usize, 5)));
            if stored == 2 {
                t.push(("l.weight_global_scale".into(), "F32", vec![1], 2.0f32.to_le_bytes().to_vec()));
            }
        }
        _ => {
            t.push(("l.weight".into(), "F8_E4M3", vec![rows, cols], fill((rows * cols) as usize, 6)));
            t.push(("l.weight_scale".into(), "F32", vec![1], 0.5f32.to_le_bytes().to_vec()));
        }
    }
    if let Some(s) = extra.filter(|s| t.iter().all(|x| x.0 != format!("l{s}"))) {
        let name = format!("l{s}");
        t.push((name, "F32", vec![1], 1.0f32.to_le_bytes().to_vec()));
    }
    let config = oracle::config(&data[5..HEAD]);
    let src: SharedSource = Arc::new(MemorySource::new("fuzz.safetensors", safetensors(&t)));
    let Ok(cat) = safetensors_catalog(Path::new("fuzz"), vec![src], config.clone()) else { return };
    for x in cat.tensors.iter().filter(|x| x.role == Role::Data) {
        // (`_scales` is a companion only beside `_blocks`, which this never writes.)
        let companion = SCALE_SUFFIXES.iter().any(|s| s.starts_with(".weight") && x.name.ends_with(s));
        assert!(!companion, "companion '{}' handed out as a weight", x.name);
        if let Some(q) = config.as_ref().and_then(|c| c.get("quantization_config")) {
            oracle::check(q, x);
        }
    }
    let plan = Plan::new(&cat, &PlanOptions::default()).expect("an accepted checkpoint plans");
    for job in &plan.jobs {
        if let Err(e) = crate::load_job(&cat, job) {
            // Scales are read at load: an MXFP4 exponent 255 is refused then.
            assert_eq!(e.code(), "bad_scale", "accepted at open, failed at load: {e}");
        }
    }
}
