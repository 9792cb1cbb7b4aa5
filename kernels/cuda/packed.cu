// The safetensors packs: E2M1 (FP4) pairs and INT4/INT8 words times their scales -> BF16
// or float16 (Out, common.cuh).
// One family per file, the same family names as the CPU kernels'
// (crates/weightstream-dequant/src/{scalar,x86,arm}/packed.rs).

// E2M1 (FP4) pairs times group scales: x = e2m1(q) * scale, one
// rounded f32 multiply (the safetensors NVFP4 and MXFP4 schemes; a global
// scale is folded into the scales on the host). Element 2k is the low
// nibble of byte k, element 2k + 1 the high one. Thread group g writes
// chunk elements 8g..8g+7 from 4 bytes (one 4-byte load where aligned),
// with one scale lookup when the 8 share a scale (scale_grid.cuh).
#include "common.cuh"
#include "scale_grid.cuh"

namespace ws {

// An E2M1 code as f32, built from its bits (sign 3, exponent 2 with bias
// 1, mantissa 1; exponent 0 holds 0 and 0.5): 0, 0.5, 1, 1.5, 2, 3, 4, 6
// and their negatives, -0 included. The CPU kernels look the values up in
// E2M1_VALUES (weightstream-blocks encoding.rs): two derivations, compared by
// the parity tests.
WS_HD float e2m1_to_f32(uint32_t q) {
    uint32_t e = (q >> 1) & 3u, m = q & 1u;
    uint32_t mag = e ? (((e + 126u) << 23) | (m << 22)) : (m ? 0x3F000000u : 0u);
    return bits_float(((q & 8u) << 28) | mag);
}

template <class Out>
WS_HD void e2m1_group(const uint8_t* src, uint16_t* dst, uint64_t n, const ScaleParams& p, uint64_t g) {
    uint64_t i = g * 8;
    uint32_t count = (uint32_t)((n - i) < 8 ? (n - i) : 8);
    uint32_t word = 0;
#ifdef __CUDA_ARCH__
    if (count == 8 && (reinterpret_cast<uintptr_t>(src + i / 2) & 3u) == 0) {
        word = *reinterpret_cast<const uint32_t*>(src + i / 2);
    } else
#endif
    {
        for (uint32_t j = 0; j < (count + 1) / 2; j++) word |= (uint32_t)src[i / 2 + j] << (8 * j);
    }
    uint16_t out[8];
    GridCursor k = grid_cursor(p, p.first + i);  // p.first + i: the group's first matrix element
    if (one_scale(p, k, count)) {
        float s = scale_at(p, k);
        for (uint32_t j = 0; j < count; j++) out[j] = Out::from_f32(mul(e2m1_to_f32((word >> (4 * j)) & 15u), s));
    } else {
        for (uint32_t j = 0; j < count; j++) {
            out[j] = Out::from_f32(mul(e2m1_to_f32((word >> (4 * j)) & 15u), scale_at(p, k)));
            grid_step(p, k);
        }
    }
    store8(dst + i, out, count);
}

template <class Out>
WS_HD void e2m1_thread(const uint8_t* src, uint16_t* dst, uint64_t n, const ScaleParams& p, Coords c) {
    for (uint64_t g = c.first(); g < groups_of_8(n); g += c.stride()) e2m1_group<Out>(src, dst, n, p, g);
}

}  // namespace ws

#ifdef __CUDACC__
// NAME writes BF16, NAME_f16 float16 (kernels/build/mirror.rs registers both).
#define WS_E2M1_ENTRY(NAME, OUT)                                                                                         \
    extern "C" __global__ void NAME(const uint8_t* WS_RESTRICT src, uint16_t* WS_RESTRICT dst, uint64_t n,                \
                                    const float* WS_RESTRICT scales, uint64_t first, uint64_t cols, uint64_t block_rows,  \
                                    uint64_t block_cols, uint64_t grid_cols, WS_DIVISOR_PARAMS) {                         \
        ws::e2m1_thread<OUT>(src, dst, n, WS_SCALE_PARAMS(scales, first, cols, block_rows, block_cols, grid_cols),        \
                             ws::coords());                                                                               \
    }
#define WS_E2M1_KERNEL(NAME) WS_E2M1_ENTRY(NAME, ws::Bf16Out) WS_E2M1_ENTRY(NAME##_f16, ws::F16Out)
WS_E2M1_KERNEL(ws_e2m1)
#endif

// Packed integers (compressed-tensors pack-quantized INT4/INT8):
// x = f32(q - zero) * scale, rounded to F16 first when the scales are F16
// (round_f16: the reference computes in the scale's dtype), then to Out
// (for float16 output that second rounding changes nothing).
// Values are stored with a 2^(bits-1) offset, INT4 two per byte (low
// nibble first), INT8 one per byte; zero points (f32, exact) are laid out
// like the scales (scale_grid.cuh), null for symmetric packs. Thread group
// g writes chunk elements 8g..8g+7, one scale and zero lookup when the 8
// share them.

namespace ws {

struct IntParams {
    ScaleParams s;
    const float* zeros;
    bool round_f16;
};

WS_HD float zero_at(const IntParams& p, const GridCursor& k) { return p.zeros ? p.zeros[grid_index(p.s, k)] : 0.0f; }

template <class Out>
WS_HD uint16_t int_value(int q, float zero, float scale, bool to_f16) {
    float x = mul(sub((float)q, zero), scale);
    return Out::from_f32(to_f16 ? round_f16(x) : x);
}

template <class Out, int BITS>
WS_HD void int_group(const uint8_t* src, uint16_t* dst, uint64_t n, const IntParams& p, uint64_t g) {
    uint64_t i = g * 8;
    uint32_t count = (uint32_t)((n - i) < 8 ? (n - i) : 8);
    const uint8_t* s = src + (BITS == 4 ? i / 2 : i);
    uint32_t nbytes = BITS == 4 ? (count + 1) / 2 : count;
    uint8_t b[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#ifdef __CUDA_ARCH__
    if (count == 8 && (reinterpret_cast<uintptr_t>(s) & (BITS == 4 ? 3u : 7u)) == 0) {
        if (BITS == 4) {
            uint32_t u = *reinterpret_cast<const uint32_t*>(s);
        WS_UNROLL
            for (int j = 0; j < 4; j++) b[j] = (uint8_t)(u >> (8 * j));
        } else {
            uint2 u = *reinterpret_cast<const uint2*>(s);
        WS_UNROLL
            for (int j = 0; j < 4; j++) {
                b[j] = (uint8_t)(u.x >> (8 * j));
                b[j + 4] = (uint8_t)(u.y >> (8 * j));
            }
        }
    } else
#endif
    {
        for (uint32_t j = 0; j < nbytes; j++) b[j] = s[j];
    }
    int q[8];
    for (uint32_t j = 0; j < count; j++)
        q[j] = BITS == 4 ? (int)((b[j / 2] >> (4 * (j & 1))) & 15u) - 8 : (int)b[j] - 128;
    uint16_t out[8];
    GridCursor k = grid_cursor(p.s, p.s.first + i);  // p.s.first + i: the group's first matrix element
    if (one_scale(p.s, k, count)) {
        float sc = scale_at(p.s, k), z = zero_at(p, k);
        for (uint32_t j = 0; j < count; j++) out[j] = int_value<Out>(q[j], z, sc, p.round_f16);
    } else {
        for (uint32_t j = 0; j < count; j++) {
            out[j] = int_value<Out>(q[j], zero_at(p, k), scale_at(p.s, k), p.round_f16);
            grid_step(p.s, k);
        }
    }
    store8(dst + i, out, count);
}

template <class Out, int BITS>
WS_HD void int_thread(const uint8_t* src, uint16_t* dst, uint64_t n, const IntParams& p, Coords c) {
    for (uint64_t g = c.first(); g < groups_of_8(n); g += c.stride()) int_group<Out, BITS>(src, dst, n, p, g);
}

}  // namespace ws

#ifdef __CUDACC__
#define WS_INT_ENTRY(NAME, OUT, BITS)                                                                               \
    extern "C" __global__ void NAME(const uint8_t* WS_RESTRICT src, uint16_t* WS_RESTRICT dst, uint64_t n,           \
                                    const float* WS_RESTRICT scales, uint64_t first, uint64_t cols,                  \
                                    uint64_t block_rows, uint64_t block_cols, uint64_t grid_cols, WS_DIVISOR_PARAMS, \
                                    const float* WS_RESTRICT zeros, uint64_t round_f16) {                            \
        ws::IntParams p{WS_SCALE_PARAMS(scales, first, cols, block_rows, block_cols, grid_cols), zeros,              \
                        round_f16 != 0};                                                                             \
        ws::int_thread<OUT, BITS>(src, dst, n, p, ws::coords());                                                     \
    }
// NAME writes BF16, NAME_f16 float16 (kernels/build/mirror.rs registers both).
#define WS_INT_KERNEL(NAME, BITS) WS_INT_ENTRY(NAME, ws::Bf16Out, BITS) WS_INT_ENTRY(NAME##_f16, ws::F16Out, BITS)
WS_INT_KERNEL(ws_int4, 4)
WS_INT_KERNEL(ws_int8, 8)
#endif
