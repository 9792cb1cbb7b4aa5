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

#include "common.cuh"

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

}  // namespace ws
