// FP8 (E4M3FN, E5M2) -> BF16 or float16 (Out, common.cuh) with optional scales:
// x = f32(w) * scale (scale_grid.cuh says which scale), rounded once.
//
// The specialised loop (issue 56; scale_grid.cuh `Walk`, every launch of
// the executor whose chunk and layout allow it): each trip converts one
// unit of 16 codes (one 16-byte load, two 16-byte stores) under one scale,
// found by 32-bit steps. A code becomes f32 by moving its bits: byte b at
// the top of a word, shifted right arithmetically (the sign fills the top),
// masked to sign | exponent | mantissa in f32 position, is the f32
// b * 2^-120 (E4M3; E5M2: 2^-112) exactly, for every finite code: normal
// codes land as normal f32 with the exponent 127 - 120 (112) lower,
// subnormal codes (exponent 0) as f32 subnormals of the same mantissa.
// Multiplying by 2^120 (2^112) is then exact (the product is the code's
// value, never rounded; no flush to zero: built without fast math), and
// the multiply by the scale is the reference's own on the same operands.
// When no code of the unit is a NaN (E5M2: NaN or infinity) and the scale
// is finite, no product is a NaN, so the outputs round without the NaN
// test (Out::pack2_nonan, exact on every non-NaN f32); otherwise the unit
// takes the reference formula element by element, out of line.
// kernels/tests/scaled_exhaustive.rs checks the decode on every code at
// every position, the NaN gate, and the units against the formula.
//
// Other launches (a chunk that starts off a multiple of 16, other layouts,
// unaligned outputs, the host grid's odd cases) take the general loop:
// thread group g writes chunk elements 8g..8g+7 with a 64-bit cursor into
// the scale grid (scale_grid.cuh `grid_cursor`), out of line.
#include "common.cuh"
#include "scale_grid.cuh"

namespace ws {

// The reference: one FP8 code times the scale, rounded.
template <class Out, bool E4M3>
WS_HD uint16_t fp8_value(uint8_t b, float s) { return Out::from_f32(mul(E4M3 ? e4m3_to_f32(b) : e5m2_to_f32(b), s)); }

template <class Out, bool E4M3>
WS_HD void fp8_group(const uint8_t* src, uint16_t* dst, uint64_t n, const ScaleParams& p, uint64_t g) {
    uint64_t i = g * 8;
    uint32_t count = (uint32_t)((n - i) < 8 ? (n - i) : 8);
    uint8_t w[8] = {};  // the elements past count (a tail group's) are decoded, then not stored
    for (uint32_t j = 0; j < count; j++) w[j] = src[i + j];
    uint16_t out[8];
    GridCursor k = grid_cursor(p, p.first + i);  // p.first + i: the group's first matrix element
    for (uint32_t j = 0; j < count; j++) {
        out[j] = fp8_value<Out, E4M3>(w[j], scale_at(p, k));
        if (j + 1 < count) grid_step(p, k);
    }
    for (uint32_t j = 0; j < count; j++) dst[i + j] = out[j];  // 16-bit stores: the rare path
}

template <class Out, bool E4M3>
WS_COLD void fp8_thread_wide(const uint8_t* src, uint16_t* dst, uint64_t n, const ScaleParams& p, Coords c) {
    for (uint64_t g = c.first(); g < groups_of_8(n); g += c.stride()) fp8_group<Out, E4M3>(src, dst, n, p, g);
}

// Byte j of w as the f32 of its bits in place: the code's value times
// 2^-120 (E4M3) or 2^-112 (E5M2), exactly, for every finite code (above).
template <bool E4M3>
WS_HD float fp8_down(uint32_t w, int j) {
    int32_t top = (int32_t)(w << (24 - 8 * j));
    return bits_float((uint32_t)(top >> (E4M3 ? 4 : 3)) & (E4M3 ? 0x87F00000u : 0x8FE00000u));
}
// 2^120 (E4M3) or 2^112 (E5M2): fp8_down times this is the code's value.
template <bool E4M3>
WS_HD float fp8_up() { return bits_float((E4M3 ? 247u : 239u) << 23); }

// Nonzero when a byte of w is a NaN code (E4M3: S.1111.111) or, for E5M2,
// a NaN or an infinity (exponent 11111): the magnitude bits that matter
// plus one carry into bit 7 exactly then (no carry crosses a byte).
template <bool E4M3>
WS_HD uint32_t fp8_special(uint32_t w) {
    return E4M3 ? ((w & 0x7F7F7F7Fu) + 0x01010101u) & 0x80808080u : ((w & 0x7C7C7C7Cu) + 0x04040404u) & 0x80808080u;
}

// `count` (<= 16) codes from the bytes of v times s, by the reference.
template <class Out, bool E4M3>
WS_COLD void fp8_unit_ref(uint16_t* dst, uint4 v, uint32_t count, float s) {
    uint32_t w[4] = {v.x, v.y, v.z, v.w};
    for (uint32_t j = 0; j < count; j++) dst[j] = fp8_value<Out, E4M3>((uint8_t)(w[j / 4] >> (8 * (j % 4))), s);
}

// One unit: 16 codes (the bytes of v) times s, to a 16-byte aligned dst.
template <class Out, bool E4M3>
WS_HD void fp8_unit(uint16_t* dst, uint4 v, float s) {
    uint32_t w[4] = {v.x, v.y, v.z, v.w};
    if (!f32_finite(s) || (fp8_special<E4M3>(w[0]) | fp8_special<E4M3>(w[1]) | fp8_special<E4M3>(w[2]) | fp8_special<E4M3>(w[3])))
        return fp8_unit_ref<Out, E4M3>(dst, v, UNIT, s);
    uint32_t o[8];
    WS_UNROLL
    for (int i = 0; i < 8; i++) {
        float lo = mul(mul(fp8_down<E4M3>(w[i / 2], 2 * (i % 2)), fp8_up<E4M3>()), s);
        float hi = mul(mul(fp8_down<E4M3>(w[i / 2], 2 * (i % 2) + 1), fp8_up<E4M3>()), s);
        o[i] = Out::pack2_nonan(lo, hi);
    }
    store16_words(dst, o);
}

template <class Out, bool E4M3>
WS_HD void fp8_thread(const uint8_t* src, uint16_t* dst, uint64_t n, const ScaleParams& p, Coords c) {
    Walk w;
    if (!walk_start(p, n, c, w) || (reinterpret_cast<uintptr_t>(dst) & 15u)) return fp8_thread_wide<Out, E4M3>(src, dst, n, p, c);
    uint32_t units = (uint32_t)(n / UNIT), st = (uint32_t)c.stride(), u = (uint32_t)c.first();
    uint32_t align = (uint32_t)(reinterpret_cast<uintptr_t>(src) & 15u);
    for (; u < units; u += st) {
        float s = p.scales ? p.scales[w.index()] : 1.0f;
        fp8_unit<Out, E4M3>(dst + (size_t)u * UNIT, load16(src + (size_t)u * UNIT, align), s);
        w.step();
    }
    // The last n % 16 elements: one unit's start, inside its scale block.
    uint32_t rest = (uint32_t)(n % UNIT);
    if (u == units && rest) {
        uint4 v = load_tail(src + (size_t)u * UNIT, rest);
        fp8_unit_ref<Out, E4M3>(dst + (size_t)u * UNIT, v, rest, p.scales ? p.scales[w.index()] : 1.0f);
    }
}

}  // namespace ws

#ifdef __CUDACC__
// Entry point NAME (writing OUT) of fp8_thread<OUT, E4M3>.
#define WS_FP8_ENTRY(NAME, OUT, E4M3)                                                                          \
    extern "C" __global__ void __launch_bounds__(256, 8) NAME(const uint8_t* WS_RESTRICT src, uint16_t* WS_RESTRICT dst, uint64_t n, \
                                    const float* WS_RESTRICT scales, uint64_t first, uint64_t cols,             \
                                    uint64_t block_rows, uint64_t block_cols, uint64_t grid_cols,               \
                                    WS_DIVISOR_PARAMS) {                                                        \
        ws::fp8_thread<OUT, E4M3>(src, dst, n, WS_SCALE_PARAMS(scales, first, cols, block_rows, block_cols, grid_cols), \
                                  ws::coords());                                                                \
    }
// NAME writes BF16, NAME_f16 float16 (kernels/build/mirror.rs registers both).
#define WS_FP8_KERNEL(NAME, E4M3)              \
    WS_FP8_ENTRY(NAME, ws::Bf16Out, E4M3)      \
    WS_FP8_ENTRY(NAME##_f16, ws::F16Out, E4M3)
WS_FP8_KERNEL(ws_fp8_e4m3, true)
WS_FP8_KERNEL(ws_fp8_e5m2, false)
#endif
