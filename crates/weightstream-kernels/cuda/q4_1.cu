// Q4_1 -> BF16. A block is f16 d, f16 m + 16 bytes of nibbles (as Q4_0);
// x = (d * q) + m, each operation rounded (gguf-py's order; no FMA).
#include "legacy_quant.cuh"

namespace ws {

WS_HD void q4_1_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    const uint8_t* blk = src + (g >> 2) * q4_1::BYTES;
    float d = f16_to_f32(load_u16(blk + q4_1::D)), m = f16_to_f32(load_u16(blk + q4_1::M));
    uint8_t q[8];
    quarter_nibbles(blk + q4_1::QS, (uint32_t)(g & 3), q);
    uint16_t out[8];
    WS_UNROLL
    for (int j = 0; j < 8; j++) out[j] = f32_to_bf16(add(mul(d, (float)q[j]), m));
    store_bf16(dst + g * 8, out, 8);
}

// n: elements, a multiple of 32.
WS_HD void q4_1_thread(const uint8_t* src, uint16_t* dst, uint64_t n, Coords c) {
    for (uint64_t g = c.first(); g < n / 8; g += c.stride()) q4_1_group(src, dst, g);
}

}  // namespace ws

#ifdef __CUDACC__
extern "C" __global__ void ws_q4_1(const uint8_t* WS_RESTRICT src, uint16_t* WS_RESTRICT dst, uint64_t n) {
    ws::q4_1_thread(src, dst, n, ws::coords());
}
#endif
