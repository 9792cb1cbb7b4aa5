// F32, F16 and BF16 -> BF16 or float16 (Out, common.cuh): round to nearest
// even, NaN canonical. A source of the output's own type needs no kernel:
// the executor copies it (BF16 -> BF16, F16 -> F16, bit for bit), so the
// 16-bit sources have one kernel each, for the other output: ws_f16
// (F16 -> BF16) and ws_bf16_f16 (BF16 -> float16, rounded from the exact
// value). Thread group g converts elements 8g..8g+7 (fewer in the last group).
//
// F16 -> BF16 (issue 56): an f16's bits shifted into f32 position (the
// half word at the top of a word, shifted right arithmetically by 3 so the
// sign fills the top, masked to sign | exponent | mantissa) are the f32 of
// its value times 2^-112, exactly, for every finite f16 (normals land as
// f32 normals, f16 subnormals m * 2^-24 as the f32 subnormals m * 2^-136,
// zeros as zeros); times 2^112 that is the value itself (legacy.cuh
// f16_down's argument), which rounds without the NaN test when no half of
// the group is an infinity or a NaN (exponent 31): else the group takes
// the reference out of line. Where the stride and sizes allow (every
// executor launch of a 16-byte aligned output), a trip loads two groups
// (g, g + stride) before converting either, with 32-bit indices.
// kernels/tests/scaled_exhaustive.rs checks it on every f16 at every
// position.
#include "common.cuh"
#include "scale_grid.cuh"

namespace ws {

template <class Out>
WS_HD void f32_group(const uint8_t* src, uint16_t* dst, uint64_t n, uint64_t g) {
    uint64_t e = g * 8;
    uint32_t count = (uint32_t)((n - e) < 8 ? (n - e) : 8);
    uint16_t out[8];
#ifdef __CUDA_ARCH__
    if (count == 8 && (reinterpret_cast<uintptr_t>(src + e * 4) & 15u) == 0) {
        const float4* p = reinterpret_cast<const float4*>(src + e * 4);
        float4 a = p[0], b = p[1];
        float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    WS_UNROLL
        for (int j = 0; j < 8; j++) out[j] = Out::from_f32(v[j]);
        store8(dst + e, out, 8);
        return;
    }
#endif
    for (uint32_t j = 0; j < count; j++) {
        const uint8_t* p = src + (e + j) * 4;
        out[j] = Out::from_f32(bits_float((uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24)));
    }
    store8(dst + e, out, count);
}

// 16-bit sources: F16 when F16_SRC, else BF16.
template <class Out, bool F16_SRC>
WS_HD void half_group(const uint8_t* src, uint16_t* dst, uint64_t n, uint64_t g) {
    uint64_t e = g * 8;
    uint32_t count = (uint32_t)((n - e) < 8 ? (n - e) : 8);
    uint16_t h[8], out[8];
    if (count == 8) {
        // All 8 loads issued together: one 16-byte load when the source is
        // 16-byte aligned there, else eight independent 2-byte loads.
#ifdef __CUDA_ARCH__
        if ((reinterpret_cast<uintptr_t>(src + e * 2) & 15u) == 0) {
            uint4 u = *reinterpret_cast<const uint4*>(src + e * 2);
            uint32_t w[4] = {u.x, u.y, u.z, u.w};
            WS_UNROLL
            for (int j = 0; j < 4; j++) {
                h[2 * j] = (uint16_t)w[j];
                h[2 * j + 1] = (uint16_t)(w[j] >> 16);
            }
        } else
#endif
        {
            WS_UNROLL
            for (int j = 0; j < 8; j++) h[j] = load_u16(src + (e + j) * 2);
        }
    } else {
        for (uint32_t j = 0; j < count; j++) h[j] = load_u16(src + (e + j) * 2);
    }
    for (uint32_t j = 0; j < count; j++) out[j] = F16_SRC ? Out::from_f16_bits(h[j]) : Out::from_bf16_bits(h[j]);
    if (F16_SRC)  // F16's general loop, the rare path (half_thread): 16-bit stores
        for (uint32_t j = 0; j < count; j++) dst[e + j] = out[j];
    else
        store8(dst + e, out, count);
}

template <class Out>
WS_HD void f32_thread(const uint8_t* src, uint16_t* dst, uint64_t n, Coords c) {
    for (uint64_t g = c.first(); g < groups_of_8(n); g += c.stride()) f32_group<Out>(src, dst, n, g);
}

template <class Out, bool F16_SRC>
WS_COLD void half_thread_wide(const uint8_t* src, uint16_t* dst, uint64_t n, Coords c) {
    for (uint64_t g = c.first(); g < groups_of_8(n); g += c.stride()) half_group<Out, F16_SRC>(src, dst, n, g);
}

// Nonzero when a half of w is an infinity or a NaN (exponent 31: the
// exponent plus one carries into the half's top bit exactly then).
WS_HD uint32_t f16_special(uint32_t w) { return (w & 0x7C007C00u) + 0x04000400u; }

// The reference for a group: each f16 converted by the output policy.
template <class Out>
WS_COLD void f16_group_ref(uint16_t* dst, uint4 v) {
    uint32_t w[4] = {v.x, v.y, v.z, v.w};
    uint16_t out[8];
    for (int j = 0; j < 8; j++) out[j] = Out::from_f16_bits((uint16_t)(w[j / 2] >> (16 * (j % 2))));
    store8(dst, out, 8);
}

// 8 f16 (the halves of v) to a 16-byte aligned dst.
template <class Out>
WS_HD void f16_group(uint16_t* dst, uint4 v) {
    uint32_t w[4] = {v.x, v.y, v.z, v.w};
    if ((f16_special(w[0]) | f16_special(w[1]) | f16_special(w[2]) | f16_special(w[3])) & 0x80008000u) return f16_group_ref<Out>(dst, v);
    const float up = bits_float(239u << 23);  // 2^112
    uint32_t o[4];
    WS_UNROLL
    for (int i = 0; i < 4; i++) {
        float lo = bits_float((uint32_t)((int32_t)(w[i] << 16) >> 3) & 0x8FFFE000u), hi = bits_float((uint32_t)((int32_t)w[i] >> 3) & 0x8FFFE000u);
        o[i] = Out::pack2_nonan(mul(lo, up), mul(hi, up));
    }
    store8_words(dst, o);
}

template <class Out, bool F16_SRC>
WS_HD void half_thread(const uint8_t* src, uint16_t* dst, uint64_t n, Coords c) {
    uint64_t full = n / 8, stride = c.stride();
    if (!F16_SRC) {  // BF16 -> float16: one group a trip
        for (uint64_t g = c.first(); g < groups_of_8(n); g += stride) half_group<Out, F16_SRC>(src, dst, n, g);
        return;
    }
    if ((reinterpret_cast<uintptr_t>(dst) & 15u) || full + 2 * stride + c.first() >= 0xFFFFFFFFu)
        return half_thread_wide<Out, F16_SRC>(src, dst, n, c);
    uint32_t g = (uint32_t)c.first(), st = (uint32_t)stride, end = (uint32_t)full;
    uint32_t align = (uint32_t)(reinterpret_cast<uintptr_t>(src) & 15u);
    for (; g + st < end; g += 2 * st) {
        uint4 a = load16(src + (size_t)g * 16, align), b = load16(src + (size_t)(g + st) * 16, align);
        f16_group<Out>(dst + (size_t)g * 8, a);
        f16_group<Out>(dst + (size_t)(g + st) * 8, b);
    }
    if (g < end) {
        f16_group<Out>(dst + (size_t)g * 8, load16(src + (size_t)g * 16, align));
        g += st;
    }
    if (g == end && n % 8) half_group<Out, F16_SRC>(src, dst, n, g);  // the last n % 8
}

}  // namespace ws

#ifdef __CUDACC__
// NAME writes BF16, NAME_f16 float16 (kernels/build/mirror.rs registers both).
#define WS_F32_ENTRY(NAME, OUT)                                                                                   \
    extern "C" __global__ void NAME(const uint8_t* WS_RESTRICT src, uint16_t* WS_RESTRICT dst, uint64_t n) { \
        ws::f32_thread<OUT>(src, dst, n, ws::coords());                                                          \
    }
#define WS_F32_KERNEL(NAME) WS_F32_ENTRY(NAME, ws::Bf16Out) WS_F32_ENTRY(NAME##_f16, ws::F16Out)
WS_F32_KERNEL(ws_f32)
extern "C" __launch_bounds__(256, 8) __global__ void ws_f16(const uint8_t* WS_RESTRICT src, uint16_t* WS_RESTRICT dst, uint64_t n) { ws::half_thread<ws::Bf16Out, true>(src, dst, n, ws::coords()); }
extern "C" __global__ void ws_bf16_f16(const uint8_t* WS_RESTRICT src, uint16_t* WS_RESTRICT dst, uint64_t n) { ws::half_thread<ws::F16Out, false>(src, dst, n, ws::coords()); }
#endif
