//! Fuzz target bodies. Each takes arbitrary bytes and panics only on a bug:
//! readers must return an error or a consistent result, kernels must agree
//! across ISAs. `fuzz/fuzz_targets/*.rs` wrap these for libFuzzer;
//! `tests/regressions.rs` replays `regressions/<target>/*` on stable Rust.

use std::path::Path;
use std::sync::Arc;

use weightstream_dequant::{dequantize, scales_to_f32, Isa, Kernel, ScaleGrid};
use weightstream_format::{
    block::BlockFormat,
    gguf, safetensors, safetensors_catalog, ByteSource, Encoding, Fp8Format, MemorySource, ScaleKind, ScaleLayout, SharedSource,
};

/// Every target, by name (the directory names under `regressions/`).
pub const TARGETS: &[(&str, fn(&[u8]))] =
    &[("gguf_header", gguf_header), ("safetensors_header", safetensors_header), ("checkpoint", checkpoint), ("dequant", dequant)];

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
            dequantize(&Kernel::Fp8 { format, rows, cols, scales: Some(grid) }, 0, &w, &mut out, Isa::detect())
                .expect("a whole tensor is a valid chunk");
        }
    }
}

/// Arbitrary kernel parameters and bytes: every ISA gives the scalar
/// kernels' bits, or the same error.
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
    let mut want = vec![0u16; n];
    let reference = dequantize(&kernel, first, src, &mut want, Isa::Scalar);
    for isa in Isa::all_supported() {
        let mut got = vec![0u16; n];
        let r = dequantize(&kernel, first, src, &mut got, isa);
        assert_eq!(r, reference, "{isa:?}");
        if r.is_ok() {
            assert_eq!(got, want, "{isa:?} differs from scalar");
        }
    }
}
