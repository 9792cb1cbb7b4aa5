//! formats.cuh (written by build.rs from the table), as compiled, mirrors the block-format table of
//! crates/weightstream-blocks/src/block.rs exactly: same formats in the same
//! order, same ggml ids, elements, bytes and field offsets.

use weightstream_blocks::{BlockFormat, OutDtype};
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

/// Every block format's kernel, for both outputs, runs in the host grid (the registration
/// build.rs writes from the table): a format without a `<module>_thread`
/// does not compile, and one left out of the dispatch answers -1.
#[test]
fn every_block_format_runs_in_the_host_grid() {
    use weightstream_kernels::host_grid::{run, HostGridError};
    use weightstream_kernels::Launch;
    for &f in BlockFormat::ALL {
        for out in [OutDtype::BF16, OutDtype::F16] {
            let l = f.layout();
            let src = vec![0u8; l.bytes];
            let mut dst = vec![0u16; l.elems];
            let r = run(&Launch::Block(f, out), &src, &mut dst, l.elems as u64, None, None, 1, 32);
            assert!(!matches!(r, Err(HostGridError::NoKernel(_))), "{} {out:?}: {r:?}", l.name);
            r.unwrap();
        }
    }
}
