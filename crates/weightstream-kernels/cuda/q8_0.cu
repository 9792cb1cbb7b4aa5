// Q8_0 -> BF16. A block is f16 d + 32 int8; x = d * q.
// Thread group g writes elements 8g..8g+7 of block g / 4.
#include "common.cuh"

namespace ws {

WS_HD void q8_0_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    const uint8_t* blk = src + (g >> 2) * q8_0::BYTES;
    float d = f16_to_f32(load_u16(blk + q8_0::D));
    uint8_t qs[8];
    load8_even(blk + q8_0::QS + 8 * (uint32_t)(g & 3), qs);
    uint16_t out[8];
    WS_UNROLL
    for (int j = 0; j < 8; j++) out[j] = f32_to_bf16(mul(d, (float)(int8_t)qs[j]));
    store_bf16(dst + g * 8, out, 8);
}

// n: elements, a multiple of 32.
WS_HD void q8_0_thread(const uint8_t* src, uint16_t* dst, uint64_t n, Coords c) {
    for (uint64_t g = c.first(); g < n / 8; g += c.stride()) q8_0_group(src, dst, g);
}

}  // namespace ws

#ifdef __CUDACC__
extern "C" __global__ void ws_q8_0(const uint8_t* WS_RESTRICT src, uint16_t* WS_RESTRICT dst, uint64_t n) {
    ws::q8_0_thread(src, dst, n, ws::coords());
}
#endif
