//! The kernels compiled for the host (kernels/host_grid.cpp): run a
//! launch's complete grid, block by block and thread by thread, on the CPU.

use crate::launch::Launch;

extern "C" {
    fn ws_host_q4_0(src: *const u8, dst: *mut u16, n: u64, grid: u32, block: u32);
    fn ws_host_q8_0(src: *const u8, dst: *mut u16, n: u64, grid: u32, block: u32);
    fn ws_host_f32(src: *const u8, dst: *mut u16, n: u64, grid: u32, block: u32);
    fn ws_host_f16(src: *const u8, dst: *mut u16, n: u64, grid: u32, block: u32);
    #[allow(clippy::too_many_arguments)]
    fn ws_host_fp8(
        e4m3: i32,
        src: *const u8,
        dst: *mut u16,
        n: u64,
        scales: *const f32,
        first: u64,
        cols: u64,
        block_rows: u64,
        block_cols: u64,
        grid_cols: u64,
        grid: u32,
        block: u32,
    );
}

#[derive(Debug, PartialEq, Eq)]
pub enum HostGridError {
    SourceTooShort { needed: usize, got: usize },
    DestinationTooShort { needed: usize, got: usize },
    ScalesTooShort { needed: usize, got: usize },
    Unaligned,
}

fn src_bytes(launch: &Launch, n: usize) -> usize {
    match launch {
        Launch::Q4_0 => n / 32 * 18,
        Launch::Q8_0 => n / 32 * 34,
        Launch::F32 => n * 4,
        Launch::F16 => n * 2,
        Launch::Fp8(_) => n,
    }
}

/// Run `launch` over `n` elements with a `grid` x `block` launch. For FP8,
/// `scales` holds the scale grid (`Fp8Args::scales` is ignored here: the
/// host address comes from the slice). Checks every length first: the
/// kernels index exactly what a correct launch covers.
pub fn run(launch: &Launch, src: &[u8], dst: &mut [u16], n: u64, scales: Option<&[f32]>, grid: u32, block: u32) -> Result<(), HostGridError> {
    let n_us = n as usize;
    if matches!(launch, Launch::Q4_0 | Launch::Q8_0) && n_us % 32 != 0 {
        return Err(HostGridError::Unaligned);
    }
    let need = src_bytes(launch, n_us);
    if src.len() < need {
        return Err(HostGridError::SourceTooShort { needed: need, got: src.len() });
    }
    if dst.len() < n_us {
        return Err(HostGridError::DestinationTooShort { needed: n_us, got: dst.len() });
    }
    let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
    // SAFETY: src holds the bytes of n elements and dst n outputs (checked
    // above); for FP8 the scale grid is checked below. The C++ code reads
    // and writes nothing else and keeps no pointers.
    unsafe {
        match launch {
            Launch::Q4_0 => ws_host_q4_0(s, d, n, grid, block),
            Launch::Q8_0 => ws_host_q8_0(s, d, n, grid, block),
            Launch::F32 => ws_host_f32(s, d, n, grid, block),
            Launch::F16 => ws_host_f16(s, d, n, grid, block),
            Launch::Fp8(a) => {
                let scale_ptr = match scales {
                    None => std::ptr::null(),
                    Some(v) => {
                        let last = if n == 0 || a.cols == 0 {
                            0
                        } else {
                            let e = a.first + n - 1;
                            ((e / a.cols / a.block_rows) * a.grid_cols + (a.cols - 1) / a.block_cols) as usize + 1
                        };
                        if v.len() < last {
                            return Err(HostGridError::ScalesTooShort { needed: last, got: v.len() });
                        }
                        v.as_ptr()
                    }
                };
                ws_host_fp8(
                    a.e4m3 as i32,
                    s,
                    d,
                    n,
                    scale_ptr,
                    a.first,
                    a.cols,
                    a.block_rows,
                    a.block_cols,
                    a.grid_cols,
                    grid,
                    block,
                )
            }
        }
    }
    Ok(())
}
