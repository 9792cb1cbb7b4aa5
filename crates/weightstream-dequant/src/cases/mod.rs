//! The parity cases, defined once (feature `testing`): every runner takes
//! this list and checks its back end against the scalar kernels on it:
//! the CPU ISAs (tests/isa_parity.rs), the CUDA sources on the host grid
//! (kernels/tests/host_grid_parity.rs) and on a GPU
//! (crates/weightstream-cuda/tests/gpu.rs). A case is plain data (the
//! encoding, the chunk's bytes, its matrix, scales and zero points), so a
//! runner builds its own launch from it; `Case::kernel` gives the CPU one.
//!
//! What the list covers: every block format on edge f16 scales in every
//! f16 field, edge bytes in the other scale fields (E8M0, UE4M3, IQ1_M's
//! split d), enough random blocks to reach every grid index, one and three
//! blocks; F32, F16 and BF16 with every tail length, every F16 and BF16
//! value, f32 values on every kind of float16 rounding edge and an F32
//! special at every vector lane; FP8 under every scale layout,
//! scaled and not, scales around the subnormal products, chunks starting
//! anywhere; E2M1 in groups of 16 and 32 and INT4/INT8 with group, channel
//! and per-tensor scales, zero points and F16 rounding, chunks on any pair
//! or word.

mod blocks;
mod scaled;

use weightstream_blocks::{Encoding, ScaleLayout};

use crate::kernel::{Kernel, ScaleGrid};

/// How large the cases get: `Host` for the CPU runners (CI), `Device`
/// adds sizes only a GPU runs quickly (100,003 blocks, 1024 x 4096).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size {
    Host,
    Device,
}

/// One input to dequantize: `n` elements of `encoding` starting at element
/// `first` of a `[rows, cols]` matrix (blocks and floats: one row), the
/// chunk's bytes, and the scales (laid out by `layout`) and zero points it
/// needs.
#[derive(Debug, Clone)]
pub struct Case {
    pub name: String,
    pub encoding: Encoding,
    pub rows: u64,
    pub cols: u64,
    pub first: u64,
    pub n: usize,
    pub src: Vec<u8>,
    pub scales: Option<(Vec<f32>, ScaleLayout)>,
    pub zeros: Option<Vec<f32>>,
    pub round_f16: bool,
}

impl Case {
    /// A case over whole blocks or values (no matrix, no scales).
    fn plain(name: String, encoding: Encoding, src: Vec<u8>) -> Case {
        let (elems, bytes) = encoding.block();
        let n = (src.len() as u64 / bytes * elems) as usize;
        Case { name, encoding, rows: 1, cols: n as u64, first: 0, n, src, scales: None, zeros: None, round_f16: false }
    }

    /// The CPU kernel for this case.
    pub fn kernel<'a>(&'a self) -> Kernel<'a> {
        let (rows, cols) = (self.rows, self.cols);
        let layout = self.layout();
        let grid = |v: &'a [f32]| ScaleGrid::new(v, layout.as_ref().expect("a scaled case has a layout"), rows, cols).unwrap();
        match self.encoding {
            Encoding::Fp8(format) => Kernel::Fp8 { format, rows, cols, scales: self.scales.as_ref().map(|(v, _)| grid(v)) },
            Encoding::E2m1 => Kernel::E2m1 { rows, cols, scales: grid(&self.scales.as_ref().unwrap().0) },
            Encoding::Int { bits } => Kernel::Int {
                bits,
                rows,
                cols,
                scales: grid(&self.scales.as_ref().unwrap().0),
                zeros: self.zeros.as_deref().map(grid),
                round_f16: self.round_f16,
            },
            e => Kernel::for_encoding(e).expect("an unscaled encoding"),
        }
    }

    /// The reference: the scalar kernel's BF16 output.
    pub fn scalar(&self) -> Vec<u16> {
        self.scalar_as(crate::OutDtype::BF16)
    }

    /// The reference for output `out`: the scalar kernel's.
    pub fn scalar_as(&self, out: crate::OutDtype) -> Vec<u16> {
        let mut o = vec![0u16; self.n];
        crate::dequantize(&self.kernel(), out, self.first, &self.src, &mut o, crate::Isa::Scalar).expect("a valid case");
        o
    }

    /// The scale values, if any.
    pub fn scale_values(&self) -> Option<&[f32]> {
        self.scales.as_ref().map(|(v, _)| &v[..])
    }

    /// The scale layout, if any.
    pub fn layout(&self) -> Option<ScaleLayout> {
        self.scales.as_ref().map(|(_, l)| *l)
    }
}

/// The random numbers the cases draw (a runner passes its seeded
/// generator's `next_u64`, so a failure reproduces from the seed it prints).
pub struct Draw<'a>(pub &'a mut dyn FnMut() -> u64);

impl Draw<'_> {
    pub fn u64(&mut self) -> u64 {
        (self.0)()
    }

    /// Uniform in `[0, n)` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.u64() % n
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(n + 8);
        while v.len() < n {
            v.extend(self.u64().to_le_bytes());
        }
        v.truncate(n);
        v
    }

    /// `count` sub-ranges of `[0, total)` whose ends are multiples of
    /// `step`, after the whole range.
    fn ranges(&mut self, total: usize, step: usize, count: usize) -> Vec<(usize, usize)> {
        let mut r = vec![(0, total)];
        let units = total / step;
        for _ in 0..count {
            let a = self.below(units as u64 + 1) as usize;
            let b = a + self.below((units - a) as u64 + 1) as usize;
            r.push((a * step, b * step));
        }
        r
    }
}

/// f16 scale bit patterns worth testing: zeros, subnormals, the largest
/// finite, infinities, NaNs (quiet, signalling, negative), ordinary values.
pub const F16_EDGES: &[u16] = &[
    0x0000, 0x8000, 0x0001, 0x03FF, 0x8001, 0x0400, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFE01, 0xFFFF, 0x3C00, 0x2E66, 0xB800,
    0x1400,
];

/// f32 bit patterns worth testing: zeros, subnormals, the smallest normal,
/// the largest finite, infinities, NaNs, and values on BF16 rounding ties.
pub const F32_EDGES: &[u32] = &[
    0x0000_0000,
    0x8000_0000,
    0x0000_0001,
    0x007F_FFFF,
    0x0080_0000,
    0x7F7F_FFFF,
    0xFF7F_FFFF,
    0x7F80_0000,
    0xFF80_0000,
    0x7FC0_0000,
    0xFFC0_0001,
    0x7F80_0001,
    0x3F80_8000,
    0x3F81_8000,
    0x3F80_7FFF,
    0x7F7F_8000,
    0x3F80_0000,
];

/// Every case, in a fixed order for a given generator.
pub fn all(size: Size, draw: &mut Draw) -> Vec<Case> {
    let mut cases = blocks::cases(size, draw);
    cases.extend(blocks::float_cases(draw));
    cases.extend(scaled::fp8_cases(size, draw));
    cases.extend(scaled::e2m1_cases(size, draw));
    cases.extend(scaled::int_cases(size, draw));
    cases
}
