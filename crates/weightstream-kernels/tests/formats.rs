//! kernels/formats.cuh, as compiled, mirrors the block-format table of
//! crates/weightstream-format/src/block.rs exactly: same formats in the same
//! order, same ggml ids, elements, bytes and field offsets.

use weightstream_format::BlockFormat;
use weightstream_kernels::host_grid::{cuda_layouts, CudaLayout};

#[test]
fn cuda_block_layouts_mirror_the_rust_table() {
    let rust: Vec<CudaLayout> = BlockFormat::ALL
        .iter()
        .map(|f| {
            let l = f.layout();
            CudaLayout {
                name: l.name.to_string(),
                ggml_id: l.ggml_id,
                elems: l.elems as u32,
                bytes: l.bytes as u32,
                fields: l.fields.iter().map(|f| (f.name.to_string(), f.offset as u32)).collect(),
            }
        })
        .collect();
    assert_eq!(cuda_layouts(), rust);
}
