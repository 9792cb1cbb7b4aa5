//! Shared by the source tests (CPU and GPU).

#![allow(dead_code)] // each test binary uses a part

use std::fs::File;
use std::path::{Path, PathBuf};

use weightstream::format::io::testing::{random_bytes, DirectDir};

const DTYPES: [(&str, usize); 5] = [("F8_E4M3", 1), ("F8_E5M2", 1), ("BF16", 2), ("F16", 2), ("F32", 4)];

pub fn dir(test: &str) -> DirectDir {
    DirectDir::new(Path::new(env!("CARGO_TARGET_TMPDIR")), test)
}

/// A safetensors checkpoint of tensors of every supported byte width and
/// sizes 1 to 97 elements, so starts fall on hundreds of 4 KiB residues; one
/// larger matrix that spans several blocks; a one-byte tensor last, ending
/// inside the file's partial last block.
pub fn write_checkpoint(dir: &Path) -> PathBuf {
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut header = serde_json::Map::new();
    let mut data = Vec::new();
    let mut add = |name: String, dtype: &str, shape: Vec<usize>, size: usize, data: &mut Vec<u8>| {
        let start = data.len();
        seed = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        data.extend(random_bytes(shape.iter().product::<usize>() * size, seed));
        header.insert(name, serde_json::json!({"dtype": dtype, "shape": shape, "data_offsets": [start, data.len()]}));
    };
    for k in 0..600 {
        let (dtype, size) = DTYPES[k % DTYPES.len()];
        add(format!("t{k:03}"), dtype, vec![1 + (k * 37) % 97], size, &mut data);
    }
    add("matrix".into(), "F8_E4M3", vec![300, 1001], 1, &mut data);
    add("z_last".into(), "F8_E5M2", vec![1], 1, &mut data);
    let bytes = safetensors_bytes(&header, data);
    assert_ne!(bytes.len() % 4096, 0, "the file must end inside a block");
    let path = dir.join("residues.safetensors");
    std::fs::write(&path, bytes).unwrap();
    File::open(&path).unwrap().sync_all().unwrap();
    path
}

/// A GGUF (v3, alignment 32, no metadata) holding, for every block format,
/// a `[7, 3 * block]` matrix of random blocks, and F16 and F32 matrices of
/// odd widths: the slice tests' input.
pub fn write_block_gguf(dir: &Path) -> PathBuf {
    use weightstream::format::BlockFormat;
    let mut tensors: Vec<(String, u32, [u64; 2], Vec<u8>)> = Vec::new();
    let mut seed = 0x5EED_0000u64;
    for f in BlockFormat::ALL {
        let l = f.layout();
        let (rows, cols) = (7u64, 3 * l.elems as u64);
        seed += 1;
        let bytes = random_bytes((rows * cols) as usize / l.elems * l.bytes, seed);
        tensors.push((format!("{}.m", l.module), l.ggml_id, [cols, rows], bytes));
    }
    tensors.push(("f16.m".into(), 1, [37, 5], random_bytes(37 * 5 * 2, 77)));
    tensors.push(("f32.m".into(), 0, [13, 9], random_bytes(13 * 9 * 4, 78)));
    let mut head = Vec::new();
    head.extend(b"GGUF");
    head.extend(3u32.to_le_bytes());
    head.extend((tensors.len() as u64).to_le_bytes());
    head.extend(0u64.to_le_bytes());
    let mut data: Vec<u8> = Vec::new();
    for (name, ty, ne, bytes) in &tensors {
        head.extend((name.len() as u64).to_le_bytes());
        head.extend(name.as_bytes());
        head.extend(2u32.to_le_bytes());
        head.extend(ne[0].to_le_bytes());
        head.extend(ne[1].to_le_bytes());
        head.extend(ty.to_le_bytes());
        while data.len() % 32 != 0 {
            data.push(0);
        }
        head.extend((data.len() as u64).to_le_bytes());
        data.extend(bytes);
    }
    while head.len() % 32 != 0 {
        head.push(0);
    }
    head.extend(data);
    let path = dir.join("blocks.gguf");
    std::fs::write(&path, head).unwrap();
    path
}

/// An FP8 checkpoint with 128x128 block scales (`weight_scale_inv`) on a
/// `[300, 1001]` weight, and a per-channel scaled one.
pub fn write_fp8_checkpoint(dir: &Path) -> PathBuf {
    let d = dir.join("fp8");
    std::fs::create_dir_all(&d).unwrap();
    let mut header = serde_json::Map::new();
    let mut data = Vec::new();
    let mut add = |name: &str, dtype: &str, shape: Vec<usize>, bytes: Vec<u8>| {
        let start = data.len();
        data.extend(bytes);
        header.insert(name.into(), serde_json::json!({"dtype": dtype, "shape": shape, "data_offsets": [start, data.len()]}));
    };
    let scales = |n: usize| (0..n).flat_map(|i| (0.5f32 + i as f32 / 64.0).to_le_bytes()).collect::<Vec<u8>>();
    add("block.weight", "F8_E4M3", vec![300, 1001], random_bytes(300 * 1001, 91));
    add("block.weight_scale_inv", "F32", vec![3, 8], scales(24));
    add("channel.weight", "F8_E5M2", vec![5, 77], random_bytes(5 * 77, 92));
    add("channel.weight_scale", "F32", vec![5, 1], scales(5));
    let bytes = safetensors_bytes(&header, data);
    std::fs::write(d.join("model.safetensors"), bytes).unwrap();
    d
}

/// A safetensors file: the 8-byte length, the header JSON padded to 8 bytes,
/// the data.
pub fn safetensors_bytes(header: &serde_json::Map<String, serde_json::Value>, data: Vec<u8>) -> Vec<u8> {
    let mut h = serde_json::to_vec(header).unwrap();
    while h.len() % 8 != 0 {
        h.push(b' ');
    }
    let mut bytes = (h.len() as u64).to_le_bytes().to_vec();
    bytes.extend(h);
    bytes.extend(data);
    bytes
}

/// Every tensor of `cat`, streamed by a CPU executor staging as `staging` says.
pub fn stream_all(cat: &weightstream::Catalog, staging: &weightstream::Staging) -> Vec<weightstream::HostTensor> {
    use weightstream::{Control, CpuExecutor, Plan, PlanOptions};
    let plan = Plan::new(cat, &PlanOptions::default()).unwrap();
    let mut out = vec![];
    CpuExecutor::new(staging)
        .unwrap()
        .stream(cat, &plan, Control::default(), |t| {
            out.push(t);
            Ok(())
        })
        .unwrap();
    out
}
