// Q5_K -> BF16. As Q4_K with 32 bytes of high bits: element 32k + l takes
// bit k of qh[l] as bit 4; x = (d * sc) * q - (dmin * m).
#include "kquant.cuh"

namespace ws {

WS_HD void q5_k_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    KGroup k = k_group(src, g, q5_k::BYTES);
    float d = f16_to_f32(load_u16(k.blk + q5_k::D)), dmin = f16_to_f32(load_u16(k.blk + q5_k::DMIN));
    uint32_t sub_block = k.e0 / 32, sc, m;
    k4_scale_min(k.blk + q5_k::SCALES, sub_block, &sc, &m);
    float dl = mul(d, (float)sc), ml = mul(dmin, (float)m);
    uint8_t q[8], h[8];
    k_nibbles8(k.blk + q5_k::QS, k.e0, q);
    load8_even(k.blk + q5_k::QH + k.e0 % 32, h);
    uint16_t out[8];
    WS_UNROLL
    for (int j = 0; j < 8; j++) out[j] = f32_to_bf16(sub(mul(dl, (float)(q[j] | (((h[j] >> sub_block) & 1u) << 4))), ml));
    store_bf16(dst + g * 8, out, 8);
}

// n: elements, a multiple of 256.
WS_HD void q5_k_thread(const uint8_t* src, uint16_t* dst, uint64_t n, Coords c) {
    for (uint64_t g = c.first(); g < n / 8; g += c.stride()) q5_k_group(src, dst, g);
}

}  // namespace ws

#ifdef __CUDACC__
extern "C" __global__ void ws_q5_k(const uint8_t* WS_RESTRICT src, uint16_t* WS_RESTRICT dst, uint64_t n) {
    ws::q5_k_thread(src, dst, n, ws::coords());
}
#endif
