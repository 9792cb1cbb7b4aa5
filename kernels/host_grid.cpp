// The kernels compiled for the host: each entry point runs a kernel's
// complete launch grid (every block, every thread) sequentially, calling the
// same per-thread functions the GPU runs. Used by the CI parity tests.
#include "q4_0.cu"
#include "q8_0.cu"
#include "float.cu"
#include "fp8.cu"

namespace {
template <class F>
void grid(uint32_t grid_dim, uint32_t block_dim, F f) {
    for (uint32_t b = 0; b < grid_dim; b++)
        for (uint32_t t = 0; t < block_dim; t++) f(ws::Coords{b, t, block_dim, grid_dim});
}
}  // namespace

extern "C" {
void ws_host_q4_0(const uint8_t* src, uint16_t* dst, uint64_t n, uint32_t g, uint32_t b) {
    grid(g, b, [&](ws::Coords c) { ws::q4_0_thread(src, dst, n, c); });
}
void ws_host_q8_0(const uint8_t* src, uint16_t* dst, uint64_t n, uint32_t g, uint32_t b) {
    grid(g, b, [&](ws::Coords c) { ws::q8_0_thread(src, dst, n, c); });
}
void ws_host_f32(const uint8_t* src, uint16_t* dst, uint64_t n, uint32_t g, uint32_t b) {
    grid(g, b, [&](ws::Coords c) { ws::f32_thread(src, dst, n, c); });
}
void ws_host_f16(const uint8_t* src, uint16_t* dst, uint64_t n, uint32_t g, uint32_t b) {
    grid(g, b, [&](ws::Coords c) { ws::f16_thread(src, dst, n, c); });
}
void ws_host_fp8(int e4m3, const uint8_t* src, uint16_t* dst, uint64_t n, const float* scales, uint64_t first,
                 uint64_t cols, uint64_t block_rows, uint64_t block_cols, uint64_t grid_cols, uint32_t g, uint32_t b) {
    ws::Fp8Params p{scales, first, cols, block_rows, block_cols, grid_cols};
    if (e4m3)
        grid(g, b, [&](ws::Coords c) { ws::fp8_thread<true>(src, dst, n, p, c); });
    else
        grid(g, b, [&](ws::Coords c) { ws::fp8_thread<false>(src, dst, n, p, c); });
}
}
