// F32, F16 and BF16 -> BF16 or float16 (Out, common.cuh): round to nearest
// even, NaN canonical. A source of the output's own type needs no kernel:
// the executor copies it (BF16 -> BF16, F16 -> F16, bit for bit), so the
// 16-bit sources have one kernel each, for the other output: ws_f16
// (F16 -> BF16) and ws_bf16_f16 (BF16 -> float16, rounded from the exact
// value). Thread group g converts elements 8g..8g+7 (fewer in the last group).
#include "common.cuh"

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
    store8(dst + e, out, count);
}

template <class Out>
WS_HD void f32_thread(const uint8_t* src, uint16_t* dst, uint64_t n, Coords c) {
    for (uint64_t g = c.first(); g < groups_of_8(n); g += c.stride()) f32_group<Out>(src, dst, n, g);
}

template <class Out, bool F16_SRC>
WS_HD void half_thread(const uint8_t* src, uint16_t* dst, uint64_t n, Coords c) {
    for (uint64_t g = c.first(); g < groups_of_8(n); g += c.stride()) half_group<Out, F16_SRC>(src, dst, n, g);
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
extern "C" __global__ void ws_f16(const uint8_t* WS_RESTRICT src, uint16_t* WS_RESTRICT dst, uint64_t n) { ws::half_thread<ws::Bf16Out, true>(src, dst, n, ws::coords()); }
extern "C" __global__ void ws_bf16_f16(const uint8_t* WS_RESTRICT src, uint16_t* WS_RESTRICT dst, uint64_t n) { ws::half_thread<ws::F16Out, false>(src, dst, n, ws::coords()); }
#endif
