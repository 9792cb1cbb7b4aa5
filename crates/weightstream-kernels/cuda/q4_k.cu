// Q4_K -> BF16. f16 d, dmin; 12 bytes of 6-bit scales and mins (per 32
// elements); 128 bytes of nibbles; x = (d * sc) * q - (dmin * m), each
// operation rounded (gguf-py's order; no FMA).
#include "kquant.cuh"

namespace ws {

WS_HD void q4_k_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    KGroup k = k_group(src, g, q4_k::BYTES);
    float d = f16_to_f32(load_u16(k.blk + q4_k::D)), dmin = f16_to_f32(load_u16(k.blk + q4_k::DMIN));
    uint32_t sc, m;
    k4_scale_min(k.blk + q4_k::SCALES, k.e0 / 32, &sc, &m);
    float dl = mul(d, (float)sc), ml = mul(dmin, (float)m);
    uint8_t q[8];
    k_nibbles8(k.blk + q4_k::QS, k.e0, q);
    uint16_t out[8];
    WS_UNROLL
    for (int j = 0; j < 8; j++) out[j] = f32_to_bf16(sub(mul(dl, (float)q[j]), ml));
    store_bf16(dst + g * 8, out, 8);
}

// n: elements, a multiple of 256.
WS_HD void q4_k_thread(const uint8_t* src, uint16_t* dst, uint64_t n, Coords c) {
    for (uint64_t g = c.first(); g < n / 8; g += c.stride()) q4_k_group(src, dst, g);
}

}  // namespace ws

#ifdef __CUDACC__
extern "C" __global__ void ws_q4_k(const uint8_t* WS_RESTRICT src, uint16_t* WS_RESTRICT dst, uint64_t n) {
    ws::q4_k_thread(src, dst, n, ws::coords());
}
#endif
