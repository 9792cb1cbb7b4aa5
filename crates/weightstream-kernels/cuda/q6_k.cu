// Q6_K -> BF16. 128 bytes of low nibbles, 64 bytes of 2-bit highs, 16 x i8
// scales (per 16 elements), f16 d; x = (d * sc) * (q - 32). In each
// 128-element half, element i's low nibble is in ql[i % 64] (low nibbles
// for i < 64, high for the rest) and its high bits are crumb i of qh.
#include "kquant.cuh"

namespace ws {

WS_HD void q6_k_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    KGroup k = k_group(src, g, q6_k::BYTES);
    float d = f16_to_f32(load_u16(k.blk + q6_k::D));
    float dl = mul(d, (float)(int8_t)k.blk[q6_k::SCALES + k.e0 / 16]);
    uint32_t half = k.e0 / 128, i0 = k.e0 % 128;
    uint8_t lo[8], hi[8];
    load8_even(k.blk + q6_k::QL + 64 * half + i0 % 64, lo);
    crumbs8(k.blk + q6_k::QH, k.e0, hi);
    uint32_t shift = 4 * (i0 / 64);
    uint16_t out[8];
    WS_UNROLL
    for (int j = 0; j < 8; j++) out[j] = f32_to_bf16(mul(dl, (float)((int)(((lo[j] >> shift) & 0xFu) | ((uint32_t)hi[j] << 4)) - 32)));
    store_bf16(dst + g * 8, out, 8);
}

// n: elements, a multiple of 256.
WS_HD void q6_k_thread(const uint8_t* src, uint16_t* dst, uint64_t n, Coords c) {
    for (uint64_t g = c.first(); g < n / 8; g += c.stride()) q6_k_group(src, dst, g);
}

}  // namespace ws

#ifdef __CUDACC__
extern "C" __global__ void ws_q6_k(const uint8_t* WS_RESTRICT src, uint16_t* WS_RESTRICT dst, uint64_t n) {
    ws::q6_k_thread(src, dst, n, ws::coords());
}
#endif
