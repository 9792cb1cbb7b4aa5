// Q3_K -> BF16. 32 bytes of high bits, 64 bytes of 2-bit quants, 12 bytes
// of 6-bit signed scales (per 16 elements), f16 d;
// x = (d * sc) * q, q = the 2 bits minus 4 where the hmask bit is clear.
#include "kquant.cuh"

namespace ws {

// Scale j (0..15): the low nibble of byte j (j < 8) or high nibble of byte
// j - 8, with two high bits from bytes 8..11, minus 32.
WS_HD int q3_k_scale(const uint8_t* sc, uint32_t j) {
    uint32_t lo = j < 8 ? (sc[j] & 0x0Fu) : (uint32_t)(sc[j - 8] >> 4);
    uint32_t hi = (sc[8 + j % 4] >> (2 * (j / 4))) & 3u;
    return (int)(lo | (hi << 4)) - 32;
}

WS_HD void q3_k_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    KGroup k = k_group(src, g, q3_k::BYTES);
    float d = f16_to_f32(load_u16(k.blk + q3_k::D));
    float dl = mul(d, (float)q3_k_scale(k.blk + q3_k::SCALES, k.e0 / 16));
    uint8_t q[8], h[8];
    crumbs8(k.blk + q3_k::QS, k.e0, q);
    load8_even(k.blk + q3_k::HMASK + k.e0 % 32, h);
    uint32_t bit = k.e0 / 32;
    uint16_t out[8];
    WS_UNROLL
    for (int j = 0; j < 8; j++) out[j] = f32_to_bf16(mul(dl, (float)((int)q[j] - (((h[j] >> bit) & 1u) ? 0 : 4))));
    store_bf16(dst + g * 8, out, 8);
}

// n: elements, a multiple of 256.
WS_HD void q3_k_thread(const uint8_t* src, uint16_t* dst, uint64_t n, Coords c) {
    for (uint64_t g = c.first(); g < n / 8; g += c.stride()) q3_k_group(src, dst, g);
}

}  // namespace ws

#ifdef __CUDACC__
extern "C" __global__ void ws_q3_k(const uint8_t* WS_RESTRICT src, uint16_t* WS_RESTRICT dst, uint64_t n) {
    ws::q3_k_thread(src, dst, n, ws::coords());
}
#endif
