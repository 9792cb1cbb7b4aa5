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

#[test]
fn every_block_format_has_a_cuda_source() {
    let kernels = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("cuda");
    for f in BlockFormat::ALL {
        let l = f.layout();
        let src = kernels.join(format!("{}.cu", l.module));
        let text = std::fs::read_to_string(&src).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
        // Written out, or through iquant.cuh's WS_BLOCK_KERNEL(module), which defines ws_<module>.
        let defined = text.contains(&format!("__global__ void {}(", l.cuda_function))
            || (text.contains(&format!("WS_BLOCK_KERNEL({})", l.module)) && l.cuda_function == format!("ws_{}", l.module));
        assert!(defined, "{} defines no kernel {}", src.display(), l.cuda_function);
        let host = std::fs::read_to_string(kernels.join("host_grid.cpp")).unwrap();
        assert!(host.contains(&format!("#include \"{}.cu\"", l.module)), "host_grid.cpp does not include {}.cu", l.module);
        assert!(host.contains(&format!("case ws::{}::GGML_ID", l.module)), "host_grid.cpp does not dispatch {}", l.name);
    }
}
