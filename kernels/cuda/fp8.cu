// FP8 (E4M3FN, E5M2) -> BF16 or float16 (Out, common.cuh) with optional scales:
// x = f32(w) * scale (scale_grid.cuh says which scale). Thread group g writes
// chunk elements 8g..8g+7: one 8-byte load, one 16-byte store, and one scale
// lookup when the 8 share a scale (they do unless a row or block edge falls
// inside); no division (scale_grid.cuh).
#include "common.cuh"
#include "scale_grid.cuh"

namespace ws {

template <class Out, bool E4M3>
WS_HD void fp8_group(const uint8_t* src, uint16_t* dst, uint64_t n, const ScaleParams& p, uint64_t g) {
    uint64_t i = g * 8;
    uint32_t count = (uint32_t)((n - i) < 8 ? (n - i) : 8);
    uint8_t w[8] = {};  // the elements past count (a tail group's) are decoded, then not stored
#ifdef __CUDA_ARCH__
    if (count == 8 && (reinterpret_cast<uintptr_t>(src + i) & 7u) == 0) {
        uint2 u = *reinterpret_cast<const uint2*>(src + i);
    WS_UNROLL
        for (int j = 0; j < 4; j++) {
            w[j] = (uint8_t)(u.x >> (8 * j));
            w[j + 4] = (uint8_t)(u.y >> (8 * j));
        }
    } else
#endif
    {
        for (uint32_t j = 0; j < count; j++) w[j] = src[i + j];
    }
    uint16_t out[8];
    GridCursor k = grid_cursor(p, p.first + i);  // p.first + i: the group's first matrix element
    if (one_scale(p, k, count)) {
        float s = scale_at(p, k);
        WS_UNROLL
        for (int j = 0; j < 8; j++) out[j] = Out::from_f32(mul(E4M3 ? e4m3_to_f32(w[j]) : e5m2_to_f32(w[j]), s));
    } else {
        WS_UNROLL
        for (int j = 0; j < 8; j++) {
            out[j] = Out::from_f32(mul(E4M3 ? e4m3_to_f32(w[j]) : e5m2_to_f32(w[j]), scale_at(p, k)));
            if ((uint32_t)j + 1 < count) grid_step(p, k);
        }
    }
    store8(dst + i, out, count);
}

template <class Out, bool E4M3>
WS_HD void fp8_thread(const uint8_t* src, uint16_t* dst, uint64_t n, const ScaleParams& p, Coords c) {
    for (uint64_t g = c.first(); g < groups_of_8(n); g += c.stride()) fp8_group<Out, E4M3>(src, dst, n, p, g);
}

}  // namespace ws

#ifdef __CUDACC__
// Entry point NAME (writing OUT) of fp8_thread<OUT, E4M3>.
#define WS_FP8_ENTRY(NAME, OUT, E4M3)                                                                          \
    extern "C" __global__ void NAME(const uint8_t* WS_RESTRICT src, uint16_t* WS_RESTRICT dst, uint64_t n,      \
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
