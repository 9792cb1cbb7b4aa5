//! The kernels compiled for the host (kernels/host_grid.cpp): run a
//! launch's complete grid, block by block and thread by thread, on the CPU.

use std::ffi::{c_char, CStr};

use weightstream_blocks::{BlockFormat, OutDtype};

use crate::launch::{divisor, Element, Fp4Args, GptqArgs, Launch};

extern "C" {
    fn ws_host_block(ggml_id: u32, out: i32, src: *const u8, dst: *mut u16, n: u64, grid: u32, block: u32) -> i32;
    fn ws_host_f32(out: i32, src: *const u8, dst: *mut u16, n: u64, grid: u32, block: u32);
    fn ws_host_half(f16_src: i32, out: i32, src: *const u8, dst: *mut u16, n: u64, grid: u32, block: u32);
    #[allow(clippy::too_many_arguments)]
    fn ws_host_scaled(
        element: i32,
        out: i32,
        src: *const u8,
        dst: *mut u16,
        n: u64,
        scales: *const f32,
        first: u64,
        cols: u64,
        block_rows: u64,
        block_cols: u64,
        grid_cols: u64,
        cols_magic: u64,
        cols_shifts: u64,
        block_rows_magic: u64,
        block_rows_shifts: u64,
        block_cols_magic: u64,
        block_cols_shifts: u64,
        zeros: *const f32,
        round_f16: i32,
        grid: u32,
        block: u32,
    );
    #[allow(clippy::too_many_arguments)]
    fn ws_host_gptq(
        src: *const u8,
        qweight: *mut u32,
        n: u64,
        scales: *mut u16,
        rows: u64,
        width: u64,
        col_start: u64,
        format: u32,
        block_elems: u32,
        block_bytes: u32,
        bits: u32,
        group: u32,
        grid: u32,
        block: u32,
    ) -> i32;
    #[allow(clippy::too_many_arguments)]
    fn ws_host_fp4(
        src: *const u8,
        packed: *mut u32,
        n: u64,
        scales: *mut u8,
        rows: u64,
        width: u64,
        col_start: u64,
        format: u32,
        block_elems: u32,
        block_bytes: u32,
        group: u32,
        grid: u32,
        block: u32,
    ) -> i32;
    fn ws_host_quotient(n: u64, d: u64, magic: u64, shifts: u64) -> u64;
    fn ws_host_f32_to_f16(bits: *const u32, out: *mut u16, n: u64);
    fn ws_host_nonan_rounding_mismatches(out: i32, compared: *mut u64) -> u64;
    fn ws_host_legacy_exhaustive(ggml_id: u32, out: i32, compared: *mut u64) -> u64;
    fn ws_host_block_layout(
        i: u32,
        name: *mut *const c_char,
        ggml_id: *mut u32,
        elems: *mut u32,
        bytes: *mut u32,
        field_names: *mut *const c_char,
        field_offsets: *mut u32,
    ) -> i32;
}

#[derive(Debug, PartialEq, Eq)]
pub enum HostGridError {
    SourceTooShort {
        needed: usize,
        got: usize,
    },
    DestinationTooShort {
        needed: usize,
        got: usize,
    },
    ScalesTooShort {
        needed: usize,
        got: usize,
    },
    Unaligned,
    /// The host build has no kernel for this block format.
    NoKernel(&'static str),
}

fn src_bytes(launch: &Launch, n: usize) -> usize {
    match launch {
        Launch::Block(f, _) => {
            let l = f.layout();
            n / l.elems * l.bytes
        }
        Launch::F32(_) => n * 4,
        Launch::F16 | Launch::Bf16 => n * 2,
        Launch::Scaled(a) => a.element.bytes(n as u64) as usize,
        // Not elementwise kernels: `run_gptq` and `run_fp4` check their own sizes.
        Launch::Gptq(_) | Launch::Fp4(_) => 0,
    }
}

/// Run `launch` over `n` elements with a `grid` x `block` launch. For the
/// scaled launches, `scales` holds the scale grid and `zeros` an integer
/// pack's zero points (`ScaledArgs::scales` is ignored here: the
/// host address comes from the slice). Checks every length first: the
/// kernels index exactly what a correct launch covers.
#[allow(clippy::too_many_arguments)]
pub fn run(
    launch: &Launch,
    src: &[u8],
    dst: &mut [u16],
    n: u64,
    scales: Option<&[f32]>,
    zeros: Option<&[f32]>,
    grid: u32,
    block: u32,
) -> Result<(), HostGridError> {
    let n_us = n as usize;
    if let Launch::Gptq(_) | Launch::Fp4(_) = launch {
        return Err(HostGridError::NoKernel("the repacks write two outputs: host_grid::run_gptq and run_fp4 run them"));
    }
    if let Launch::Block(f, _) = launch {
        if n_us % f.layout().elems != 0 {
            return Err(HostGridError::Unaligned);
        }
    }
    let need = src_bytes(launch, n_us);
    if src.len() < need {
        return Err(HostGridError::SourceTooShort { needed: need, got: src.len() });
    }
    if dst.len() < n_us {
        return Err(HostGridError::DestinationTooShort { needed: n_us, got: dst.len() });
    }
    let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
    let out = out_code(launch.out());
    // SAFETY: src holds the bytes of n elements and dst n outputs (checked
    // above); for FP8 the scale grid is checked below. The C++ code reads
    // and writes nothing else and keeps no pointers.
    unsafe {
        match launch {
            Launch::Block(f, _) => {
                if ws_host_block(f.layout().ggml_id, out, s, d, n, grid, block) != 0 {
                    return Err(HostGridError::NoKernel(f.name()));
                }
            }
            Launch::F32(_) => ws_host_f32(out, s, d, n, grid, block),
            Launch::F16 => ws_host_half(1, out, s, d, n, grid, block),
            Launch::Bf16 => ws_host_half(0, out, s, d, n, grid, block),
            Launch::Gptq(_) | Launch::Fp4(_) => unreachable!("refused above"),
            Launch::Scaled(a) => {
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
                let element = match a.element {
                    Element::E4m3 => 0,
                    Element::E5m2 => 1,
                    Element::E2m1 => 2,
                    Element::Int4 => 3,
                    Element::Int8 => 4,
                };
                // Zero points are laid out like the scales: the same length.
                let zeros_ptr = match zeros {
                    Some(z) if z.len() == scales.map_or(0, |s| s.len()) => z.as_ptr(),
                    Some(z) => return Err(HostGridError::ScalesTooShort { needed: scales.map_or(0, |s| s.len()), got: z.len() }),
                    None => std::ptr::null(),
                };
                let [cols_magic, cols_shifts, block_rows_magic, block_rows_shifts, block_cols_magic, block_cols_shifts] = a.divisors();
                ws_host_scaled(
                    element,
                    out,
                    s,
                    d,
                    n,
                    scale_ptr,
                    a.first,
                    a.cols,
                    a.block_rows,
                    a.block_cols,
                    a.grid_cols,
                    cols_magic,
                    cols_shifts,
                    block_rows_magic,
                    block_rows_shifts,
                    block_cols_magic,
                    block_cols_shifts,
                    zeros_ptr,
                    a.round_f16 as i32,
                    grid,
                    block,
                )
            }
        }
    }
    Ok(())
}

/// Run the GPTQ repack over a `grid` x `block` launch: `src` holds
/// `a.rows` rows of `a.width` elements (whole blocks), `n` is `rows *
/// cols` outputs (`cols` whole groups), `qweight` and `scales` exactly
/// their `[cols / pack, rows]` and `[cols / group, rows]`. Every size is
/// checked first.
pub fn run_gptq(
    a: &GptqArgs,
    src: &[u8],
    qweight: &mut [u32],
    scales: &mut [u16],
    n: u64,
    grid: u32,
    block: u32,
) -> Result<(), HostGridError> {
    let l = a.format.layout();
    if !matches!(a.bits, 4 | 8) {
        return Err(HostGridError::Unaligned);
    }
    let pack = 32 / a.bits as u64;
    check_repack(a.format, a.rows, a.width, a.col_start, a.group, n, src.len(), [(qweight.len(), pack), (scales.len(), a.group as u64)])?;
    // SAFETY: src holds the rows' blocks, qweight and scales their outputs
    // (checked above); the C++ code touches nothing else and keeps no pointers.
    let rc = unsafe {
        ws_host_gptq(
            src.as_ptr(),
            qweight.as_mut_ptr(),
            n,
            scales.as_mut_ptr(),
            a.rows,
            a.width,
            a.col_start,
            l.ggml_id,
            l.elems as u32,
            l.bytes as u32,
            a.bits,
            a.group,
            grid,
            block,
        )
    };
    if rc != 0 {
        return Err(HostGridError::NoKernel(a.format.name()));
    }
    Ok(())
}

/// The checks both repacks' launches share: `src` holds `rows` rows of
/// `width` elements (whole blocks of `format`), `n` is `rows * cols`
/// outputs, `cols` whole groups from `col_start` inside the width, and
/// each output (its length, its input features per element) holds
/// `rows * cols / per` elements.
#[allow(clippy::too_many_arguments)]
fn check_repack(
    format: BlockFormat,
    rows: u64,
    width: u64,
    col_start: u64,
    group: u32,
    n: u64,
    src_len: usize,
    outputs: [(usize, u64); 2],
) -> Result<(), HostGridError> {
    let l = format.layout();
    let (elems, group) = (l.elems as u64, group as u64);
    let cols = n.checked_div(rows).unwrap_or(0);
    if group == 0
        || group % 8 != 0
        || width % elems != 0
        || cols * rows != n
        || cols % group != 0
        || col_start % group != 0
        || col_start + cols > width
    {
        return Err(HostGridError::Unaligned);
    }
    let need = (rows * width / elems * l.bytes as u64) as usize;
    if src_len < need {
        return Err(HostGridError::SourceTooShort { needed: need, got: src_len });
    }
    let [(got_dst, per_dst), (got_scales, per_scale)] = outputs;
    let (dst, sc) = ((cols / per_dst * rows) as usize, (cols / per_scale * rows) as usize);
    if got_dst < dst {
        return Err(HostGridError::DestinationTooShort { needed: dst, got: got_dst });
    }
    if got_scales < sc {
        return Err(HostGridError::ScalesTooShort { needed: sc, got: got_scales });
    }
    Ok(())
}

/// Run the FP4 repack over a `grid` x `block` launch, as [`run_gptq`]:
/// `packed` holds at least `[rows, cols / 2]` bytes as `cols / 8` words
/// per row, `scales` `[rows, cols / group]`. The scale bytes without an
/// image are the caller's to refuse (weightstream-repack's
/// `fp4::check_scales`).
pub fn run_fp4(a: &Fp4Args, src: &[u8], packed: &mut [u32], scales: &mut [u8], n: u64, grid: u32, block: u32) -> Result<(), HostGridError> {
    let l = a.format.layout();
    check_repack(a.format, a.rows, a.width, a.col_start, a.group, n, src.len(), [(packed.len(), 8), (scales.len(), a.group as u64)])?;
    // SAFETY: src holds the rows' blocks, packed and scales their outputs
    // (checked above); the C++ code touches nothing else and keeps no pointers.
    let rc = unsafe {
        ws_host_fp4(
            src.as_ptr(),
            packed.as_mut_ptr(),
            n,
            scales.as_mut_ptr(),
            a.rows,
            a.width,
            a.col_start,
            l.ggml_id,
            l.elems as u32,
            l.bytes as u32,
            a.group,
            grid,
            block,
        )
    };
    if rc != 0 {
        return Err(HostGridError::NoKernel(a.format.name()));
    }
    Ok(())
}

/// `n / d` (`d >= 1`) as the scaled kernels divide: one multiply-high by
/// `d`'s magic number (cuda/scale_grid.cuh).
pub fn quotient(n: u64, d: u64) -> u64 {
    assert!(d >= 1, "division by zero");
    let (magic, shifts) = divisor(d);
    // SAFETY: pure arithmetic on integers.
    unsafe { ws_host_quotient(n, d, magic, shifts) }
}

/// The kernels' float16 rounding (cuda/common.cuh `F16Out::from_f32`) of
/// each f32 bit pattern in `bits`, into `out` (the same length).
pub fn f32_to_f16(bits: &[u32], out: &mut [u16]) {
    assert_eq!(bits.len(), out.len());
    // SAFETY: both slices hold `bits.len()` elements; pure arithmetic.
    unsafe { ws_host_f32_to_f16(bits.as_ptr(), out.as_mut_ptr(), bits.len() as u64) }
}

/// The C++ side's output code (host_grid.cpp `with_out`).
fn out_code(out: OutDtype) -> i32 {
    match out {
        OutDtype::BF16 => 0,
        OutDtype::F16 => 1,
    }
}

/// The non-NaN f32 bit patterns whose rounding to `out` without the NaN
/// test (cuda/common.cuh `pack2_nonan`, the legacy kernels' fast path)
/// differs from `from_f32`, and how many were compared (all of them:
/// 2^32 - 2^24 + 2).
pub fn nonan_rounding_mismatches(out: OutDtype) -> (u64, u64) {
    let mut compared = 0u64;
    // SAFETY: `compared` is a valid u64 to write; the rest is arithmetic.
    let bad = unsafe { ws_host_nonan_rounding_mismatches(out_code(out), &mut compared) };
    (bad, compared)
}

/// A legacy block format's kernel code (cuda/legacy.cu `put`) against the
/// reference formula on every f16 d and every code at every position
/// (cuda/host_grid.cpp): (outputs that differ, outputs compared), or None
/// for a format that is not Q4_0, Q4_1, Q5_0, Q5_1 or Q8_0.
pub fn legacy_exhaustive(ggml_id: u32, out: OutDtype) -> Option<(u64, u64)> {
    let mut compared = 0u64;
    // SAFETY: `compared` is a valid u64 to write; the rest is arithmetic.
    let bad = unsafe { ws_host_legacy_exhaustive(ggml_id, out_code(out), &mut compared) };
    (bad != u64::MAX).then_some((bad, compared))
}

/// One entry of formats.cuh (build.rs writes it) as the host compiler saw it.
#[derive(Debug, PartialEq, Eq)]
pub struct CudaLayout {
    pub name: String,
    pub ggml_id: u32,
    pub elems: u32,
    pub bytes: u32,
    /// (field name, byte offset) in order.
    pub fields: Vec<(String, u32)>,
}

/// Every entry of the CUDA sources' block-format table (formats.cuh).
pub fn cuda_layouts() -> Vec<CudaLayout> {
    let mut out = Vec::new();
    for i in 0.. {
        let (mut name, mut id, mut elems, mut bytes) = (std::ptr::null(), 0u32, 0u32, 0u32);
        let mut names = [std::ptr::null::<c_char>(); 8];
        let mut offsets = [0u32; 8];
        // SAFETY: every out-pointer is valid for the writes the C++ side
        // makes (one value each, at most 8 fields); it returns pointers to
        // static NUL-terminated string literals.
        let nf = unsafe { ws_host_block_layout(i, &mut name, &mut id, &mut elems, &mut bytes, names.as_mut_ptr(), offsets.as_mut_ptr()) };
        if nf < 0 {
            break;
        }
        // SAFETY: static C string literals (above).
        let text = |p: *const c_char| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
        out.push(CudaLayout {
            name: text(name),
            ggml_id: id,
            elems,
            bytes,
            fields: (0..(nf as usize).min(8)).map(|f| (text(names[f]), offsets[f])).collect(),
        });
    }
    out
}

// ---- Issue 56: the table and low-bit kernels (cuda/lut4.cu, ternary.cu,
// lowbit.cu). ----

extern "C" {
    fn ws_host_table_exhaustive(ggml_id: u32, out: i32, compared: *mut u64) -> u64;
}

/// A table or low-bit format's kernel code (its `put`, every unit of a
/// block) against the reference formula over the scales and codes
/// kernels/tests/table_exhaustive.rs lists: (outputs that differ, outputs
/// compared), or None for a format without such a check.
pub fn table_exhaustive(ggml_id: u32, out: OutDtype) -> Option<(u64, u64)> {
    let mut compared = 0u64;
    // SAFETY: `compared` is a valid u64 to write; the rest is arithmetic.
    let bad = unsafe { ws_host_table_exhaustive(ggml_id, out_code(out), &mut compared) };
    (bad != u64::MAX).then_some((bad, compared))
}

// ---- Issue 56: the grid i-quant kernels (cuda/grid.cu).

extern "C" {
    fn ws_host_iq_grid_exhaustive(ggml_id: u32, out: i32, part: i32, compared: *mut u64) -> u64;
}

/// Which inputs [`iq_grid_exhaustive`] varies (cuda/host_grid.cpp).
#[derive(Clone, Copy, Debug)]
pub enum IqGridPart {
    /// Every f16 d times every sub-block scale times every grid value at
    /// every position, either sign.
    Scales,
    /// A few d times every code at every position of a super-block.
    Codes,
}

/// A grid i-quant's kernel code (cuda/grid.cu `load` and `put`) against the
/// reference formula (cuda/host_grid.cpp): (outputs that differ, outputs
/// compared), or None for a format that is not IQ2_XXS, IQ2_XS, IQ2_S,
/// IQ3_XXS, IQ3_S, IQ1_S or IQ1_M.
pub fn iq_grid_exhaustive(ggml_id: u32, out: OutDtype, part: IqGridPart) -> Option<(u64, u64)> {
    let mut compared = 0u64;
    // SAFETY: `compared` is a valid u64 to write; the rest is arithmetic.
    let bad = unsafe { ws_host_iq_grid_exhaustive(ggml_id, out_code(out), part as i32, &mut compared) };
    (bad != u64::MAX).then_some((bad, compared))
}

// ==== K-quant kernels (issue 56; tests/kquant_exhaustive.rs) ====

extern "C" {
    fn ws_host_kquant_exhaustive(ggml_id: u32, part: u32, compared: *mut u64) -> u64;
}

/// A K-quant kernel's fast path (cuda/kquant.cu `values`, and `k_put` on
/// non-finite fields and whole blocks) against the reference formula
/// (cuda/host_grid.cpp `ws_host_kquant_exhaustive`): part 0 every f16 d x
/// every sub-block scale x every code, part 1 every f16 dmin x every min
/// (Q2_K, Q4_K, Q5_K), part 2 whole blocks for both outputs. (values that
/// differ, values compared), or None for a format or part without a test.
pub fn kquant_exhaustive(ggml_id: u32, part: u32) -> Option<(u64, u64)> {
    let mut compared = 0u64;
    // SAFETY: `compared` is a valid u64 to write; the rest is arithmetic.
    let bad = unsafe { ws_host_kquant_exhaustive(ggml_id, part, &mut compared) };
    (bad != u64::MAX).then_some((bad, compared))
}

// ---- Issue 56: the scaled safetensors kernels and F16 (cuda/fp8.cu,
// cuda/packed.cu, cuda/float.cu; tests/scaled_exhaustive.rs). Each check
// returns (checks that differ, checks made).

/// Run one of host_grid.cpp's exhaustive checks, which writes its count.
fn counted(f: impl FnOnce(*mut u64) -> u64) -> (u64, u64) {
    let mut compared = 0u64;
    let bad = f(&mut compared);
    (bad, compared)
}

extern "C" {
    fn ws_host_fp8_exhaustive(e4m3: i32, out: i32, compared: *mut u64) -> u64;
    #[allow(clippy::too_many_arguments)]
    fn ws_host_walk_mismatches(first: u64, n: u64, cols: u64, br: u64, bc: u64, gc: u64, grid: u32, block: u32, compared: *mut u64) -> u64;
}

/// FP8 (E4M3 when `e4m3`, else E5M2), cuda/fp8.cu's fast path against the
/// reference formula: the decode and the NaN gate on every code at every
/// position, whole units on every BF16 bit pattern of scale times every
/// code at every position.
pub fn fp8_exhaustive(e4m3: bool, out: OutDtype) -> (u64, u64) {
    // SAFETY: the count is a valid u64 to write; the rest is arithmetic.
    counted(|c| unsafe { ws_host_fp8_exhaustive(e4m3 as i32, out_code(out), c) })
}

/// The scaled kernels' specialised walk (cuda/scale_grid.cuh `Walk`) over
/// a `grid` x `block` launch: for the chunk of `n` elements from `first` of
/// a matrix of `cols` columns in `br` x `bc` blocks (`gc` per block row),
/// (units whose scale index differs from the 64-bit formula, units
/// compared), or None when the launch does not take the walk.
#[allow(clippy::too_many_arguments)]
pub fn walk_mismatches(first: u64, n: u64, cols: u64, br: u64, bc: u64, gc: u64, grid: u32, block: u32) -> Option<(u64, u64)> {
    // SAFETY: the count is a valid u64 to write; the rest is arithmetic.
    let (bad, compared) = counted(|c| unsafe { ws_host_walk_mismatches(first, n, cols, br, bc, gc, grid, block, c) });
    (bad != u64::MAX).then_some((bad, compared))
}

extern "C" {
    fn ws_host_f16_exhaustive(out: i32, compared: *mut u64) -> u64;
}

/// F16 -> `out`, cuda/float.cu's fast path against `from_f16_bits` on
/// every f16 at every position of a group.
pub fn f16_exhaustive(out: OutDtype) -> (u64, u64) {
    // SAFETY: the count is a valid u64 to write; the rest is arithmetic.
    counted(|c| unsafe { ws_host_f16_exhaustive(out_code(out), c) })
}

extern "C" {
    fn ws_host_e2m1_exhaustive(out: i32, compared: *mut u64) -> u64;
    fn ws_host_int_exhaustive(bits: i32, out: i32, compared: *mut u64) -> u64;
}

/// E2M1, cuda/packed.cu's fast path against the reference formula: every
/// code at every position times every BF16 bit pattern of scale.
pub fn e2m1_exhaustive(out: OutDtype) -> (u64, u64) {
    // SAFETY: the count is a valid u64 to write; the rest is arithmetic.
    counted(|c| unsafe { ws_host_e2m1_exhaustive(out_code(out), c) })
}

/// INT4 or INT8 (`bits`), cuda/packed.cu's fast path against the reference
/// formula, with and without F16 rounding: every code at every position
/// over every BF16 bit pattern of scale times 14 zero points; for INT8 also
/// the F16 rounding on the bits against `round_f16` on every f32 it takes.
pub fn int_exhaustive(bits: u32, out: OutDtype) -> (u64, u64) {
    // SAFETY: the count is a valid u64 to write; the rest is arithmetic.
    counted(|c| unsafe { ws_host_int_exhaustive(bits as i32, out_code(out), c) })
}
