//! Fuzz target bodies. Each takes arbitrary bytes and panics only on a bug:
//! readers must return an error or a consistent result, kernels must agree
//! across ISAs. `fuzz/fuzz_targets/*.rs` wrap these for libFuzzer;
//! `tests/regressions.rs` replays `regressions/<target>/*` on stable Rust.

use std::path::Path;
use std::sync::Arc;

use weightstream_dequant::{dequantize, scales_to_f32, Isa, Kernel, OutDtype, ScaleGrid};
use weightstream_format::{
    block::BlockFormat, gguf, safetensors, safetensors_catalog, ByteSource, Encoding, Fp8Format, MemorySource, ScaleKind, ScaleLayout,
    SharedSource,
};

/// Every target, by name (the directory names under `regressions/`).
pub const TARGETS: &[(&str, fn(&[u8]))] = &[
    ("gguf_header", gguf_header),
    ("safetensors_header", safetensors_header),
    ("checkpoint", checkpoint),
    ("dequant", dequant),
    ("fp8_scale_rule", fp8_scale_rule),
    ("checkpoint_dir", checkpoint_dir),
    ("packed_checkpoint", packed_checkpoint),
    ("slices", slices),
    ("http_responses", http_responses),
    ("hf_metadata", hf_metadata),
];

mod hf;
mod http;
mod packed;
mod slices;

/// One job through the CPU executor: one executor of one thread for every
/// input (a thread pool per input would cost more than the input itself).
fn load_job(cat: &weightstream_format::Catalog, job: &weightstream::Job) -> weightstream::Result<Vec<u16>> {
    static EXEC: std::sync::OnceLock<weightstream::CpuExecutor> = std::sync::OnceLock::new();
    let exec = EXEC.get_or_init(|| {
        weightstream::CpuExecutor::new(&weightstream::Staging { threads: Some(1), ..Default::default() }).expect("one CPU thread")
    });
    exec.run_job(cat, job, None).map(|t| t.data)
}
pub use hf::hf_metadata;
pub use http::http_responses;
pub use packed::packed_checkpoint;
pub use slices::slices;

/// Arbitrary FP8 weight and scale shapes (and a declared block size or
/// none) through scale pairing: accepted exactly when the shapes fit a
/// documented layout (per-tensor `[]`/`[1]`, per-channel `[rows, 1]`/`[rows]`,
/// the exact grid of the declared or default 128x128 block), refused with
/// `scale_mismatch` otherwise; never a guessed block size (issue 14).
pub fn fp8_scale_rule(data: &[u8]) {
    use weightstream_format::catalog::{Dtype, TensorInfo};
    use weightstream_format::safetensors::StDtype;
    if data.len() < 10 {
        return;
    }
    let small = |i: usize| u16::from_le_bytes([data[i], data[i + 1]]) as u64 % 700;
    let (rows, cols) = (small(0), small(2));
    let wdims = 1 + data[4] as usize % 3; // 1-D, 2-D or 3-D weights
    let sdims = data[5] as usize % 3;
    let sshape: Vec<u64> = (0..sdims).map(|k| data.get(6 + k).map_or(1, |&b| b as u64 % 9)).collect();
    // Scale shapes near the real answers as often as at random.
    let sshape = match data[8] % 4 {
        0 => vec![rows.div_ceil(128), cols.div_ceil(128)],
        1 => vec![rows, 1],
        _ => sshape,
    };
    let block = data[9].is_multiple_of(3).then(|| (1 + data[6] as u64 % 130, 1 + data[7] as u64 % 130));
    let wshape: Vec<u64> = match wdims {
        1 => vec![cols],
        2 => vec![rows, cols],
        _ => vec![2, rows, cols],
    };
    let info = |name: &str, dtype, shape: Vec<u64>| TensorInfo::test(name, Dtype::St(dtype), &shape);
    let mut ts = vec![info("x.weight", StDtype::F8_E4M3, wshape.clone()), info("x.weight_scale", StDtype::F32, sshape.clone())];
    let result = weightstream_format::fp8::pair_scales(&mut ts, &|_| block, |_| Path::new("fuzz"));
    let (wr, wc) = ts[0].matrix();
    let (bm, bn) = block.unwrap_or((128, 128));
    let documented = matches!(sshape.as_slice(), [] | [1])
        || (wshape.len() == 2 && (sshape == [wr, 1] || sshape == [wr]))
        || (wshape.len() == 2 && sshape == [wr.div_ceil(bm), wc.div_ceil(bn)]);
    match result {
        Ok(()) => assert!(documented, "accepted {sshape:?} for weight {wshape:?} with block {block:?}"),
        Err(e) => {
            assert!(!documented, "refused the documented {sshape:?} for {wshape:?} with block {block:?}: {e}");
            assert_eq!(e.kind.code(), "scale_mismatch", "{e}");
        }
    }
}

/// A checkpoint directory: config.json, model.safetensors.index.json and a
/// shard (u16 config length, u16 index length, config, index, shard
/// bytes, each file written only when non-empty) opened from disk. An
/// error, or a catalog whose tensors lie in their files and, with an index,
/// are exactly the index's (issue 14: an empty or partial index once loaded
/// zero or stray tensors).
pub fn checkpoint_dir(data: &[u8]) {
    if data.len() < 4 {
        return;
    }
    let nc = u16::from_le_bytes([data[0], data[1]]) as usize;
    let ni = u16::from_le_bytes([data[2], data[3]]) as usize;
    let rest = &data[4..];
    let (config, rest) = rest.split_at(nc.min(rest.len()));
    let (index, shard) = rest.split_at(ni.min(rest.len()));
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let dir =
        std::env::temp_dir().join(format!("ws-fuzz-dir-{}-{}", std::process::id(), N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    for (name, bytes) in [("config.json", config), ("model.safetensors.index.json", index), ("s1.safetensors", shard)] {
        if !bytes.is_empty() {
            std::fs::write(dir.join(name), bytes).expect("write");
        }
    }
    let opened = weightstream_format::open(&dir);
    if let Ok(cat) = &opened {
        for t in &cat.tensors {
            assert!(t.offset + t.nbytes <= cat.files[t.file].source.len(), "tensor {} past its file", t.name);
        }
        if let Ok(text) = std::str::from_utf8(index) {
            if let Some(map) = serde_json::from_str::<serde_json::Value>(text)
                .ok()
                .and_then(|j| j.get("weight_map").cloned())
                .and_then(|m| m.as_object().cloned())
            {
                assert!(!map.is_empty(), "an empty weight_map was accepted");
                for t in &cat.tensors {
                    assert!(map.contains_key(&t.name), "tensor {} is not in the index", t.name);
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Any bytes as a GGUF file: an error, or a header whose every tensor lies
/// inside the file at an aligned offset.
pub fn gguf_header(data: &[u8]) {
    let src = MemorySource::new("fuzz.gguf", data.to_vec());
    if let Ok(h) = gguf::read_header(&src) {
        for t in &h.tensors {
            let start = h.data_offset + t.offset;
            assert!(start + t.nbytes <= src.len(), "tensor {} past the end", t.name);
            assert_eq!(t.offset % h.alignment, 0);
        }
    }
}

/// Any bytes as a safetensors file: an error, or tensors inside the file
/// with sizes matching their shapes.
pub fn safetensors_header(data: &[u8]) {
    let src = MemorySource::new("fuzz.safetensors", data.to_vec());
    if let Ok(h) = safetensors::read_header(&src) {
        for t in &h.tensors {
            assert!(t.start >= h.data_offset && t.start <= t.end && t.end <= src.len());
            let n: u64 = t.shape.iter().product();
            assert_eq!(t.dtype.nbytes(n), Some(t.end - t.start));
        }
    }
}

/// A config.json and a safetensors file (u16 config length, config bytes,
/// file bytes) through catalog building and FP8 scale pairing. Every
/// accepted scale layout must cover its weight, and small FP8 tensors are
/// dequantized with their scales.
pub fn checkpoint(data: &[u8]) {
    if data.len() < 2 {
        return;
    }
    let n = u16::from_le_bytes([data[0], data[1]]) as usize;
    let rest = &data[2..];
    let (config, file) = rest.split_at(n.min(rest.len()));
    let config = serde_json::from_slice(config).ok();
    let src: SharedSource = Arc::new(MemorySource::new("fuzz.safetensors", file.to_vec()));
    let Ok(cat) = safetensors_catalog(Path::new("fuzz"), vec![src.clone()], config) else { return };
    for t in &cat.tensors {
        let (Ok(Encoding::Fp8(format)), Some(s)) = (t.encoding(), t.scale) else { continue };
        let st = &cat.tensors[s.tensor];
        let mut raw = vec![0u8; st.nbytes as usize];
        src.read_at(st.offset, &mut raw).expect("the catalog's ranges lie inside the file");
        let values = scales_to_f32(s.dtype, &raw).expect("a paired scale is whole values");
        let (rows, cols) = t.matrix();
        let grid = ScaleGrid::new(&values, &s.layout, rows, cols).expect("pairing accepted a layout the kernels reject");
        if t.n_elems() <= 1 << 16 {
            let mut w = vec![0u8; t.nbytes as usize];
            src.read_at(t.offset, &mut w).expect("the catalog's ranges lie inside the file");
            let mut out = vec![0u16; t.n_elems() as usize];
            dequantize(&Kernel::Fp8 { format, rows, cols, scales: Some(grid) }, OutDtype::BF16, 0, &w, &mut out, Isa::detect())
                .expect("a whole tensor is a valid chunk");
        }
    }
}

/// Arbitrary kernel parameters and bytes: every ISA gives the scalar
/// kernels' bits, or the same error, for both outputs (BF16, float16).
pub fn dequant(data: &[u8]) {
    if data.len() < 12 {
        return;
    }
    let kind = data[0] % 7;
    let rows = u16::from_le_bytes([data[1], data[2]]) as u64 % 300;
    let cols = u16::from_le_bytes([data[3], data[4]]) as u64 % 300;
    let first = u16::from_le_bytes([data[5], data[6]]) as u64;
    let n = u16::from_le_bytes([data[7], data[8]]) as usize % 4096;
    let (br, bc) = (data[9] as u64 % 140, data[10] as u64 % 140);
    let body = &data[12..];
    let layout = ScaleLayout {
        kind: ScaleKind::Block,
        block_rows: br,
        block_cols: bc,
        grid_rows: if br == 0 { 0 } else { rows.div_ceil(br) },
        grid_cols: if bc == 0 { 0 } else { cols.div_ceil(bc) },
    };
    let scales: Vec<f32> = body
        .chunks_exact(4)
        .take((layout.grid_rows * layout.grid_cols) as usize)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let grid = ScaleGrid::new(&scales, &layout, rows, cols).ok();
    let kernel = match kind {
        0 => Kernel::Block(BlockFormat::ALL[body.first().map_or(0, |&b| b as usize) % BlockFormat::ALL.len()]),
        1 => Kernel::Block(BlockFormat::Q8_0),
        2 => Kernel::F32,
        3 => Kernel::F16,
        4 => Kernel::BF16,
        5 => Kernel::Fp8 { format: Fp8Format::E4M3, rows, cols, scales: grid },
        _ => Kernel::Fp8 { format: Fp8Format::E5M2, rows, cols, scales: grid },
    };
    let src = &body[body.len() / 2..];
    let src = &src[..src.len().min(kernel.src_bytes(n as u64) as usize)];
    for out in [OutDtype::BF16, OutDtype::F16] {
        let mut want = vec![0u16; n];
        let reference = dequantize(&kernel, out, first, src, &mut want, Isa::Scalar);
        for isa in Isa::all_supported() {
            let mut got = vec![0u16; n];
            let r = dequantize(&kernel, out, first, src, &mut got, isa);
            assert_eq!(r, reference, "{isa:?} {out:?}");
            if r.is_ok() {
                assert_eq!(got, want, "{isa:?} {out:?} differs from scalar");
            }
        }
    }
}
