//! Kernel launches described once, for the GPU and the host grid alike.

use weightstream_blocks::{BlockFormat, Encoding, Fp8Format, OutDtype, ScaleLayout};

/// Threads per block: 8 warps, each writing 512 contiguous bytes per step.
pub const BLOCK_DIM: u32 = 256;

/// The element code of a scaled kernel: one byte per FP8 value, two E2M1
/// values per byte (low nibble first), or packed integers (INT4: two per
/// byte, low nibble first; INT8: one per byte; both with a 2^(bits-1)
/// offset and zero points).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Element {
    #[default]
    E4m3,
    E5m2,
    E2m1,
    Int4,
    Int8,
}

impl Element {
    /// Source bytes of `n` elements (`n` even for E2M1).
    pub fn bytes(self, n: u64) -> u64 {
        match self {
            Element::E4m3 | Element::E5m2 | Element::Int8 => n,
            Element::E2m1 | Element::Int4 => n.div_ceil(2),
        }
    }
}

/// Arguments of the scaled kernels (FP8, E2M1) beyond source, destination
/// and count: element (r, c) of the `[rows, cols]` matrix uses scale
/// `[(r / block_rows) * grid_cols + c / block_cols]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ScaledArgs {
    pub element: Element,
    /// Device (or, for the host grid, host) address of f32 scales; 0 = none.
    pub scales: u64,
    /// Matrix element index of the chunk's first element.
    pub first: u64,
    pub cols: u64,
    pub block_rows: u64,
    pub block_cols: u64,
    pub grid_cols: u64,
    /// Integer elements: address of the f32 zero points laid out like the
    /// scales (0 = none), and whether products round to F16 first.
    pub zeros: u64,
    pub round_f16: bool,
    /// What the kernel writes.
    pub out: OutDtype,
}

impl ScaledArgs {
    /// What the scaled kernels take after `grid_cols` for their three
    /// divisors (`cols`, `block_rows`, `block_cols`): each one's magic
    /// number and shifts, with which a kernel divides by multiplying
    /// (cuda/scale_grid.cuh).
    pub fn divisors(&self) -> [u64; 6] {
        let [c, r, b] = [self.cols, self.block_rows, self.block_cols].map(divisor);
        [c.0, c.1, r.0, r.1, b.0, b.1]
    }
}

/// Arguments of the GPTQ repack (`cuda/gptq.cu`, the keep-quantized mode)
/// beyond source, destination (`qweight`) and count (`rows * cols`
/// outputs): the source is `rows` rows of `width` elements of `format`'s
/// blocks back to back, of which columns `col_start..col_start + cols`
/// move; `bits` and `group` are weightstream-repack's target for `format`
/// (the caller looks it up: this crate knows no targets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GptqArgs {
    pub format: BlockFormat,
    /// Device (or host-grid: ignored, the slice is passed) address of the
    /// fp16 scales `[cols / group, rows]`.
    pub scales: u64,
    pub rows: u64,
    pub width: u64,
    pub col_start: u64,
    pub bits: u32,
    pub group: u32,
}

/// Arguments of the FP4 repack (`cuda/fp4.cu`, the keep-quantized mode's
/// FP4 route) beyond source, destination (`packed`, written as u32 words)
/// and count (`rows * cols` outputs): as [`GptqArgs`], without bits (4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fp4Args {
    pub format: BlockFormat,
    /// Device (or host-grid: ignored) address of the uint8 scales `[rows,
    /// cols / group]`.
    pub scales: u64,
    pub rows: u64,
    pub width: u64,
    pub col_start: u64,
    pub group: u32,
}

/// (magic, shifts) of divisor `d` for cuda/scale_grid.cuh's `quotient`, with
/// l = ceil(log2 d): magic = floor(2^64 (2^l - d) / d) + 1, below 2^64 for
/// every `d >= 1`; shifts = min(l, 1) | max(l - 1, 0) << 32. (0, 0) for
/// `d == 0`, a divisor no launch divides by.
pub fn divisor(d: u64) -> (u64, u64) {
    if d == 0 {
        return (0, 0);
    }
    let l = 64 - (d - 1).leading_zeros() as u64;
    let magic = (((1u128 << 64) * ((1u128 << l) - d as u128)) / d as u128 + 1) as u64;
    (magic, l.min(1) | (l.saturating_sub(1) << 32))
}

/// Which kernel source (fatbin) defines each `__global__` kernel, read
/// from the sources by build.rs (build/mirror.rs): a new kernel needs no
/// registration here.
const KERNEL_MODULES: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/kernel_modules.rs"));

/// The source that defines `function` ("" if none does: the test below
/// fails for any launch without one).
fn module_of(function: &str) -> &'static str {
    KERNEL_MODULES.iter().find(|(f, _)| *f == function).map_or("", |(_, m)| *m)
}

/// The kernel writing `out` of the family whose BF16 kernel is `bf16`:
/// `bf16` itself, or its float16 twin `<bf16>_f16` (each kernel-making
/// macro of the sources defines both, cuda/common.cuh). Found in the
/// generated list, whose names are `'static`; a missing twin gives "" (the
/// test below fails for it).
fn twin(bf16: &'static str, out: OutDtype) -> &'static str {
    match out {
        OutDtype::BF16 => bf16,
        OutDtype::F16 => KERNEL_MODULES.iter().find(|(f, _)| f.strip_suffix("_f16") == Some(bf16)).map_or("", |(f, _)| *f),
    }
}

/// One kernel launch over `n` elements, writing the output dtype it
/// carries ([`Launch::out`]): one kernel body per family in the sources,
/// instantiated for each output (`ws_<name>` BF16, `ws_<name>_f16` float16).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launch {
    /// A block format's kernel: `ws_<module>` (the format's `BlockLayout`)
    /// or its `_f16` twin, in its family's source (`cuda/legacy.cu`,
    /// `cuda/kquant.cu`, ...).
    Block(BlockFormat, OutDtype),
    F32(OutDtype),
    /// F16 -> BF16. F16 -> float16 is a copy (no kernel), bit for bit.
    F16,
    /// BF16 -> float16, rounded. BF16 -> BF16 is a copy (no kernel).
    Bf16,
    /// FP8, E2M1 or integer elements times their scales: `cuda/fp8.cu`,
    /// `cuda/packed.cu`; the output is `ScaledArgs::out`.
    Scaled(ScaledArgs),
    /// GGUF blocks moved into GPTQ's `qweight` and `scales`: `cuda/gptq.cu`.
    Gptq(GptqArgs),
    /// GGUF MXFP4/NVFP4 blocks moved into compressed-tensors' FP4
    /// `weight_packed` and `weight_scale`: `cuda/fp4.cu`.
    Fp4(Fp4Args),
}

impl Launch {
    /// Every kind of launch, once: the one list of kernels (the GPU loads
    /// the functions of exactly these; `function` names them).
    pub fn every() -> impl Iterator<Item = Launch> {
        let outs = [OutDtype::BF16, OutDtype::F16];
        let elements = [Element::E4m3, Element::E5m2, Element::E2m1, Element::Int4, Element::Int8];
        let per_out = move |out| {
            let scaled = move |element| Launch::Scaled(ScaledArgs { element, out, ..Default::default() });
            BlockFormat::ALL.iter().map(move |&f| Launch::Block(f, out)).chain([Launch::F32(out)]).chain(elements.map(scaled))
        };
        outs.into_iter().flat_map(per_out).chain([
            Launch::F16,
            Launch::Bf16,
            Launch::Gptq(GptqArgs { format: BlockFormat::Q4_0, scales: 0, rows: 0, width: 0, col_start: 0, bits: 4, group: 32 }),
            Launch::Fp4(Fp4Args { format: BlockFormat::MXFP4, scales: 0, rows: 0, width: 0, col_start: 0, group: 32 }),
        ])
    }

    /// What the kernel writes (the repacks write their own formats: BF16
    /// is reported, meaning nothing).
    pub fn out(&self) -> OutDtype {
        match *self {
            Launch::Block(_, out) | Launch::F32(out) => out,
            Launch::Scaled(a) => a.out,
            Launch::Bf16 => OutDtype::F16,
            Launch::F16 | Launch::Gptq(_) | Launch::Fp4(_) => OutDtype::BF16,
        }
    }

    /// The launch that dequantizes `encoding` from element `first` of a
    /// `[rows, cols]` matrix whose scales follow `layout` (none: one scale,
    /// 1.0); integer packs round to F16 first where `round_f16`; the
    /// kernel writes `out`. The scale and zero-point addresses are 0 here:
    /// the caller sets them ([`ScaledArgs::scales`], [`ScaledArgs::zeros`])
    /// where it has them. `None` for a 16-bit float source of the output's
    /// own type (BF16 -> BF16, F16 -> F16), which needs no kernel: a copy.
    pub fn for_encoding(
        encoding: Encoding,
        (rows, cols): (u64, u64),
        first: u64,
        layout: Option<&ScaleLayout>,
        round_f16: bool,
        out: OutDtype,
    ) -> Option<Launch> {
        let element = match encoding {
            Encoding::BF16 => return (out == OutDtype::F16).then_some(Launch::Bf16),
            Encoding::F16 => return (out == OutDtype::BF16).then_some(Launch::F16),
            Encoding::Block(f) => return Some(Launch::Block(f, out)),
            Encoding::F32 => return Some(Launch::F32(out)),
            Encoding::Fp8(Fp8Format::E4M3) => Element::E4m3,
            Encoding::Fp8(Fp8Format::E5M2) => Element::E5m2,
            Encoding::E2m1 => Element::E2m1,
            Encoding::Int { bits: 4 } => Element::Int4,
            Encoding::Int { .. } => Element::Int8,
        };
        Some(Launch::Scaled(ScaledArgs {
            element,
            scales: 0,
            first,
            cols,
            block_rows: layout.map_or(rows.max(1), |l| l.block_rows),
            block_cols: layout.map_or(cols.max(1), |l| l.block_cols),
            grid_cols: layout.map_or(1, |l| l.grid_cols),
            zeros: 0,
            round_f16: round_f16 && matches!(element, Element::Int4 | Element::Int8),
            out,
        }))
    }

    /// (module, function): the `__global__` function's name and the
    /// kernel source (`cuda/<module>.cu`, one fatbin) that defines it.
    pub fn function(&self) -> (&'static str, &'static str) {
        let name = match *self {
            Launch::Block(f, out) => twin(f.layout().cuda_function, out),
            Launch::F32(out) => twin("ws_f32", out),
            Launch::F16 => "ws_f16",
            Launch::Bf16 => "ws_bf16_f16",
            Launch::Scaled(a) => twin(
                match a.element {
                    Element::E4m3 => "ws_fp8_e4m3",
                    Element::E5m2 => "ws_fp8_e5m2",
                    Element::E2m1 => "ws_e2m1",
                    Element::Int4 => "ws_int4",
                    Element::Int8 => "ws_int8",
                },
                a.out,
            ),
            Launch::Gptq(_) => "ws_gptq",
            Launch::Fp4(_) => "ws_fp4",
        };
        (module_of(name), name)
    }

    /// The kernel's arguments, in order and named, every one a u64: the one
    /// definition of the argument list, which the GPU executor packs
    /// (weightstream-cuda), the host grid mirrors, and the GPU round's
    /// sweep follows (`weightstream formats --json` lists the names).
    pub fn args(&self, src: u64, dst: u64, n: u64) -> Vec<(&'static str, u64)> {
        let mut v = vec![("src", src), ("dst", dst), ("n", n)];
        if let Launch::Scaled(a) = self {
            let [cm, cs, rm, rs, bm, bs] = a.divisors();
            v.extend([
                ("scales", a.scales),
                ("first", a.first),
                ("cols", a.cols),
                ("block_rows", a.block_rows),
                ("block_cols", a.block_cols),
                ("grid_cols", a.grid_cols),
                ("cols_magic", cm),
                ("cols_shifts", cs),
                ("block_rows_magic", rm),
                ("block_rows_shifts", rs),
                ("block_cols_magic", bm),
                ("block_cols_shifts", bs),
            ]);
            if matches!(a.element, Element::Int4 | Element::Int8) {
                v.extend([("zeros", a.zeros), ("round_f16", a.round_f16 as u64)]);
            }
        }
        // The repacks: (format, scales, rows, width, col_start, bits (GPTQ
        // only), group), in the kernels' order.
        let repack = match *self {
            Launch::Gptq(a) => Some((a.format, a.scales, a.rows, a.width, a.col_start, Some(a.bits), a.group)),
            Launch::Fp4(a) => Some((a.format, a.scales, a.rows, a.width, a.col_start, None, a.group)),
            _ => None,
        };
        if let Some((format, scales, rows, width, col_start, bits, group)) = repack {
            let l = format.layout();
            v.extend([
                ("scales", scales),
                ("rows", rows),
                ("width", width),
                ("col_start", col_start),
                ("format", l.ggml_id as u64),
                ("block_elems", l.elems as u64),
                ("block_bytes", l.bytes as u64),
            ]);
            v.extend(bits.map(|b| ("bits", b as u64)));
            v.push(("group", group as u64));
        }
        v
    }

    /// Work items (groups of 8 outputs; for the GPTQ repack, 8 input
    /// features of one row: one 4-bit word or two 8-bit ones; for the FP4
    /// repack, 8 input features: one word) for `n` elements.
    pub fn groups(&self, n: u64) -> u64 {
        n.div_ceil(8)
    }
}

/// (grid, block) for `groups` work items, at most `max_grid` blocks (the
/// kernels loop with a grid stride beyond that).
pub fn geometry(groups: u64, max_grid: u32) -> (u32, u32) {
    let blocks = groups.div_ceil(BLOCK_DIM as u64).clamp(1, max_grid.max(1) as u64);
    (blocks as u32, BLOCK_DIM)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_covers_or_strides() {
        assert_eq!(geometry(0, 100), (1, 256));
        assert_eq!(geometry(256, 100), (1, 256));
        assert_eq!(geometry(257, 100), (2, 256));
        assert_eq!(geometry(1 << 30, 1000), (1000, 256));
    }

    /// The one list names every kernel once, and each is defined exactly
    /// once, in the source file its module names.
    #[test]
    fn every_launch_names_a_kernel_in_its_source() {
        let names: Vec<_> = Launch::every().map(|l| l.function()).collect();
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        // Every block format and F32, FP8 (2), E2M1 and INT4/INT8 for each
        // output; F16 -> BF16, BF16 -> F16 and the two repacks once.
        assert_eq!(names.len(), 2 * (BlockFormat::ALL.len() + 6) + 4);
        // ws_f16's suffix names its source (F16 -> BF16).
        for l in Launch::every().filter(|l| *l != Launch::F16) {
            let (_, f) = l.function();
            assert_eq!(f.ends_with("_f16"), l.out() == OutDtype::F16, "{f}: named for its output");
        }
        for (module, function) in &names {
            assert_eq!(KERNEL_MODULES.iter().filter(|(f, _)| f == function).count(), 1, "{function}: defined once");
            assert!(!module.is_empty(), "{function}: no source defines it");
        }
        // ...and every kernel the sources define is one the executor launches.
        for (f, m) in KERNEL_MODULES {
            assert!(names.iter().any(|(_, n)| n == f), "{m}.cu defines {f}, which no Launch names");
        }
    }
}
