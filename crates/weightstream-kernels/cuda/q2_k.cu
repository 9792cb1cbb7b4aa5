// Q2_K -> BF16. 16 bytes of (4-bit scale | 4-bit min << 4) per 16
// elements, 64 bytes of 2-bit quants, f16 d and dmin;
// x = (d * sc) * q - (dmin * m), each operation rounded (no FMA).
#include "kquant.cuh"

namespace ws {

WS_HD void q2_k_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    KGroup k = k_group(src, g, q2_k::BYTES);
    float d = f16_to_f32(load_u16(k.blk + q2_k::D)), dmin = f16_to_f32(load_u16(k.blk + q2_k::DMIN));
    uint32_t sm = k.blk[q2_k::SCALES + k.e0 / 16];
    float dl = mul(d, (float)(sm & 0xFu)), ml = mul(dmin, (float)(sm >> 4));
    uint8_t q[8];
    crumbs8(k.blk + q2_k::QS, k.e0, q);
    uint16_t out[8];
    WS_UNROLL
    for (int j = 0; j < 8; j++) out[j] = f32_to_bf16(sub(mul(dl, (float)q[j]), ml));
    store_bf16(dst + g * 8, out, 8);
}

// n: elements, a multiple of 256.
WS_HD void q2_k_thread(const uint8_t* src, uint16_t* dst, uint64_t n, Coords c) {
    for (uint64_t g = c.first(); g < n / 8; g += c.stride()) q2_k_group(src, dst, g);
}

}  // namespace ws

#ifdef __CUDACC__
extern "C" __global__ void ws_q2_k(const uint8_t* WS_RESTRICT src, uint16_t* WS_RESTRICT dst, uint64_t n) {
    ws::q2_k_thread(src, dst, n, ws::coords());
}
#endif
