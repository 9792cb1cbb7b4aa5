//! Shared by the source tests (CPU and GPU).

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
    let mut h = serde_json::to_vec(&header).unwrap();
    while h.len() % 8 != 0 {
        h.push(b' ');
    }
    let mut bytes = (h.len() as u64).to_le_bytes().to_vec();
    bytes.extend(h);
    bytes.extend(data);
    assert_ne!(bytes.len() % 4096, 0, "the file must end inside a block");
    let path = dir.join("residues.safetensors");
    std::fs::write(&path, bytes).unwrap();
    File::open(&path).unwrap().sync_all().unwrap();
    path
}
