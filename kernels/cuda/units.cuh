// Shared by the table and low-bit kernels (lut4.cu, ternary.cu, lowbit.cu):
// the grid-stride loop over units of 16 outputs, and the pieces their fast
// paths share (issue 56; docs/numerics.md, "CUDA table and low-bit
// kernels").
//
// A unit is 16 outputs of one block that one thread converts from one
// load: the low and high nibbles of 8 bytes (IQ4, FP4), the 2-bit codes of
// a 32-bit word (TQ2_0, Q2_0), two bytes of bits (Q1_0), and so on; each
// format (a struct F) says where they go. F provides:
// - UNITS, ELEMS, BYTES: units per block, outputs and bytes of a block;
// - `Lane lane(j)`: what depends only on the unit's place j in its block;
// - `Raw load(blk, lane)`: the unit's loaded bits, all loads first;
// - `put<Out>(dst, raw, lane, tab)`: its 16 outputs into the block's
//   outputs at dst (tab: the kernel's shared table, or nullptr).
//
// The loop (unit_thread): when the grid stride is a multiple of UNITS
// (every executor launch: blocks of 256 threads) and the unit indices fit
// in 32 bits, a thread's units all have the same place in their blocks
// (its Lane is hoisted) and indices are 32-bit; 16 outputs a trip. Otherwise
// (the host grid's odd geometries, or over 2^36 outputs) the general 64-bit
// loop, out of line.
#pragma once

#include "legacy.cuh"

namespace ws {

// One unit of the general loop, out of line too (the loop then holds no
// store of its own: the fast loop below is the kernel's one hot loop).
template <class F, class Out>
WS_COLD void unit_cold(const uint8_t* src, uint16_t* dst, uint64_t u, const float* tab) {
    uint64_t b = u / F::UNITS;
    typename F::Lane lane = F::lane((uint32_t)(u % F::UNITS));
    F::template put<Out>(dst + b * F::ELEMS, F::load(src + b * F::BYTES, lane), lane, tab);
}

template <class F, class Out>
WS_COLD void unit_thread_wide(const uint8_t* src, uint16_t* dst, uint64_t n, Coords c, const float* tab) {
    for (uint64_t u = c.first(); u < n / 16; u += c.stride()) unit_cold<F, Out>(src, dst, u, tab);
}

template <class F, class Out>
WS_HD void unit_thread(const uint8_t* src, uint16_t* dst, uint64_t n, Coords c, const float* tab) {
    uint64_t units = n / 16, first = c.first(), stride = c.stride();
    if (stride % F::UNITS != 0 || units + stride > 0xFFFFFFFFu) return unit_thread_wide<F, Out>(src, dst, n, c, tab);
    typename F::Lane lane = F::lane((uint32_t)(first % F::UNITS));
    // Block indices: u / UNITS, stepping by stride / UNITS (no wrap: u + st < 2^32).
    uint32_t u = (uint32_t)first, st = (uint32_t)stride, end = (uint32_t)units;
    uint32_t b = u / F::UNITS, bst = st / F::UNITS;
    for (; u < end; u += st, b += bst) F::template put<Out>(dst + (size_t)b * F::ELEMS, F::load(src + (size_t)b * F::BYTES, lane), lane, tab);
}

// 8 outputs from 8 f32 values that are not NaN (a fast path's
// precondition): rounded without the NaN test (pack2_nonan, exact there),
// one 16-byte store where dst is aligned.
template <class Out>
WS_HD void store8_nonan(uint16_t* dst, const float x[8]) {
    uint32_t o[4];
    WS_UNROLL
    for (int i = 0; i < 4; i++) o[i] = Out::pack2_nonan(x[2 * i], x[2 * i + 1]);
    store8_words(dst, o);
}

// An entry of a 16-entry f32 table by its byte offset (4 x the code).
WS_HD float table_at(const float* tab, uint32_t offset) { return *reinterpret_cast<const float*>(reinterpret_cast<const char*>(tab) + offset); }

// ---- Tables of outputs (ternary.cu, lowbit.cu). Where a block has four
// possible outputs or fewer, they are rounded once per unit (16-bit
// entries, two to a word) and each output is selected by a byte permute
// (PRMT) instead of computed.

// The outputs d * (q - 1) for q = 0..3 (-d, 0 * d, d, 2d), each the
// reference's f32 product rounded by Out::from_f32, as 16-bit entries:
// a = T0 | T1 << 16, b = T2 | T3 << 16. TQ1_0, TQ2_0 and Q2_0 compute
// exactly these products (Q2_0 as (q - 1) * d, the same product); Q1_0's
// d and -d are T2 and T0 (d * 1 is d, d * -1 is -d, for every d).
struct Tab4 {
    uint32_t a, b;
};

// Any f16 d: four roundings with the NaN test.
template <class Out>
WS_COLD Tab4 tab4_ref(uint32_t h) {
    float d = f16_to_f32((uint16_t)h);
    uint16_t t[4];
    for (int q = 0; q < 4; q++) t[q] = Out::from_f32(mul(d, (float)(q - 1)));
    return Tab4{t[0] | ((uint32_t)t[1] << 16), t[2] | ((uint32_t)t[3] << 16)};
}

// A finite d: d and 2d (exact) rounded without the NaN test (no NaN
// there); -d is d's entry with the sign flipped (rounding to nearest even
// is symmetric: for a non-NaN x, from_f32(-x) is from_f32(x) ^ 0x8000, in
// both outputs); 0 * d is a zero with d's sign.
template <class Out>
WS_HD Tab4 tab4(uint32_t h) {
    if (!f16_finite(h)) return tab4_ref<Out>(h);
    float d = f16_finite_to_f32(h);
    uint32_t b = Out::pack2_nonan(d, mul(d, 2.0f));
    return Tab4{((b & 0xFFFFu) ^ 0x8000u) | ((h & 0x8000u) << 16), b};
}

// PRMT selectors for codes 0..3, one a byte: byte i of the result selects
// entry c_i (bytes 2c_i, 2c_i + 1 of the pool).
WS_HD uint32_t selectors(uint32_t codes) { return codes * 0x22u + 0x10101010u; }

// Two outputs, entries by the selectors in bytes 0 and 1 of s.
WS_HD uint32_t pick2(Tab4 t, uint32_t s) { return byte_perm(t.a, t.b, s); }

// 8 outputs from 8 codes (0..3), one a byte of c0 (outputs 0..3) and c1
// (4..7), one 16-byte store where dst is aligned.
WS_HD void store8_codes(uint16_t* dst, Tab4 t, uint32_t c0, uint32_t c1) {
    uint32_t s0 = selectors(c0), s1 = selectors(c1);
    uint32_t o[4] = {pick2(t, s0), pick2(t, s0 >> 16), pick2(t, s1), pick2(t, s1 >> 16)};
    store8_words(dst, o);
}

}  // namespace ws

// Entry points of a unit kernel without a shared table (units.cuh's F),
// BF16 and float16 (WS_BLOCK_KERNEL's names), and its host-grid name. At
// most 32 registers (8 blocks of 256 per SM).
#ifdef __CUDACC__
#define WS_UNIT_ENTRY(NAME, F, OUT, SUFFIX)                                                         \
    extern "C" __global__ void __launch_bounds__(256, 8)                                            \
        ws_##NAME##SUFFIX(const uint8_t* WS_RESTRICT src, uint16_t* WS_RESTRICT dst, uint64_t n) {   \
        ws::unit_thread<ws::F, OUT>(src, dst, n, ws::coords(), nullptr);                            \
    }
#define WS_UNIT_KERNEL_ENTRY(NAME, F) WS_UNIT_ENTRY(NAME, F, ws::Bf16Out, ) WS_UNIT_ENTRY(NAME, F, ws::F16Out, _f16)
#else
#define WS_UNIT_KERNEL_ENTRY(NAME, F)
#endif
#define WS_UNIT_KERNEL(NAME, F)                                                              \
    namespace ws {                                                                           \
    template <class Out>                                                                     \
    inline void NAME##_thread(const uint8_t* src, uint16_t* dst, uint64_t n, Coords c) {     \
        unit_thread<F, Out>(src, dst, n, c, nullptr);                                        \
    }                                                                                        \
    }                                                                                        \
    WS_UNIT_KERNEL_ENTRY(NAME, F)
