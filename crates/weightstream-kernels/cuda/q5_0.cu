// Q5_0 -> BF16. A block is f16 d, a u32 of high bits, 16 bytes of low
// nibbles (as Q4_0); element j's bit 4 is bit j of qh; x = d * (q - 16).
#include "legacy_quant.cuh"

namespace ws {

WS_HD void q5_0_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    const uint8_t* blk = src + (g >> 2) * q5_0::BYTES;
    uint32_t k = (uint32_t)(g & 3);
    float d = f16_to_f32(load_u16(blk + q5_0::D));
    uint32_t qh = qh_word(blk + q5_0::QH) >> (8 * k);
    uint8_t q[8];
    quarter_nibbles(blk + q5_0::QS, k, q);
    uint16_t out[8];
    WS_UNROLL
    for (int j = 0; j < 8; j++) out[j] = f32_to_bf16(mul(d, (float)((int)(q[j] | (((qh >> j) & 1u) << 4)) - 16)));
    store_bf16(dst + g * 8, out, 8);
}

// n: elements, a multiple of 32.
WS_HD void q5_0_thread(const uint8_t* src, uint16_t* dst, uint64_t n, Coords c) {
    for (uint64_t g = c.first(); g < n / 8; g += c.stride()) q5_0_group(src, dst, g);
}

}  // namespace ws

#ifdef __CUDACC__
extern "C" __global__ void ws_q5_0(const uint8_t* WS_RESTRICT src, uint16_t* WS_RESTRICT dst, uint64_t n) {
    ws::q5_0_thread(src, dst, n, ws::coords());
}
#endif
