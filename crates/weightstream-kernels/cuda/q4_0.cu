// Q4_0 -> BF16. A block is f16 d + 16 bytes; element j (j < 16) is the low
// nibble of qs[j], element j + 16 the high nibble; x = d * (q - 8).
// Thread group g writes elements 8g..8g+7: block g / 4, quarter g % 4
// (legacy_quant.cuh). A warp writes 512 contiguous bytes with 16-byte stores.
#include "legacy_quant.cuh"

namespace ws {

WS_HD void q4_0_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    const uint8_t* blk = src + (g >> 2) * q4_0::BYTES;
    float d = f16_to_f32(load_u16(blk + q4_0::D));
    uint8_t q[8];
    quarter_nibbles(blk + q4_0::QS, (uint32_t)(g & 3), q);
    uint16_t out[8];
    WS_UNROLL
    for (int j = 0; j < 8; j++) out[j] = f32_to_bf16(mul(d, (float)((int)q[j] - 8)));
    store_bf16(dst + g * 8, out, 8);
}

// n: elements, a multiple of 32.
WS_HD void q4_0_thread(const uint8_t* src, uint16_t* dst, uint64_t n, Coords c) {
    for (uint64_t g = c.first(); g < n / 8; g += c.stride()) q4_0_group(src, dst, g);
}

}  // namespace ws

#ifdef __CUDACC__
extern "C" __global__ void ws_q4_0(const uint8_t* WS_RESTRICT src, uint16_t* WS_RESTRICT dst, uint64_t n) {
    ws::q4_0_thread(src, dst, n, ws::coords());
}
#endif
