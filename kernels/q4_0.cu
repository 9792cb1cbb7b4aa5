// Q4_0 -> BF16. A block is f16 d + 16 bytes; element j (j < 16) is the low
// nibble of qs[j], element j + 16 the high nibble; x = d * (q - 8).
// Thread group g writes elements 8g..8g+7: block g / 4, quarter g % 4
// (qs[0..8] or qs[8..16], low or high nibbles). A warp writes 512
// contiguous bytes with 16-byte stores.
#include "common.cuh"

namespace ws {

WS_HD void q4_0_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    const uint8_t* blk = src + (g >> 2) * q4_0::BYTES;
    uint32_t k = (uint32_t)(g & 3);
    float d = f16_to_f32(load_u16(blk + q4_0::D));
    uint8_t qs[8];
    load8_even(blk + q4_0::QS + 8 * (k & 1u), qs);
    uint32_t shift = (k >> 1) * 4;
    uint16_t out[8];
    WS_UNROLL
    for (int j = 0; j < 8; j++) out[j] = f32_to_bf16(mul(d, (float)((int)((qs[j] >> shift) & 0xF) - 8)));
    store_bf16(dst + g * 8, out, 8);
}

// n: elements, a multiple of 32.
WS_HD void q4_0_thread(const uint8_t* src, uint16_t* dst, uint64_t n, Coords c) {
    for (uint64_t g = c.first(); g < n / 8; g += c.stride()) q4_0_group(src, dst, g);
}

}  // namespace ws

#ifdef __CUDACC__
extern "C" __global__ void ws_q4_0(const uint8_t* src, uint16_t* dst, uint64_t n) {
    ws::q4_0_thread(src, dst, n, ws::coords());
}
#endif
