// llama.cpp's 1- and 2-bit d-scaled formats (Q1_0, Q2_0) -> BF16 or float16 (Out, common.cuh).
// One family per file, the same family names as the CPU kernels'
// (crates/weightstream-dequant/src/{scalar,x86,arm}/lowbit.rs); the
// reference is ggml-quants.c's dequantize_row_q1_0 / dequantize_row_q2_0.
#include "common.cuh"

// Q1_0: a block is f16 d + 16 bytes of bits; element j is bit
// j % 8 of qs[j / 8]: x = d where set, else -d (a negation, no multiply).
// Thread group g writes elements 8(g % 16) .. + 8 of block g / 16: the
// bits of one byte.

namespace ws {

template <class Out>
WS_HD void q1_0_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    const uint8_t* blk = src + (g >> 4) * q1_0::BYTES;
    float d = f16_to_f32(load_u16(blk + q1_0::D));
    uint16_t pos = Out::from_f32(d), neg = Out::from_f32(-d);
    uint32_t bits = blk[q1_0::QS + (uint32_t)(g & 15)];
    uint16_t out[8];
    WS_UNROLL
    for (int j = 0; j < 8; j++) out[j] = ((bits >> j) & 1u) ? pos : neg;
    store8(dst + g * 8, out, 8);
}

}  // namespace ws

WS_BLOCK_KERNEL(q1_0)

// Q2_0: a block is f16 d + 16 bytes of 2-bit codes; element j is
// bits 2(j % 4) of qs[j / 4]: x = (q - 1) * d, one rounded multiply.
// Thread group g writes elements 8(g % 8) .. + 8 of block g / 8: the LE
// u16 at qs[2(g % 8)] (an even offset: blocks are 18 bytes), code e at
// bits 2e.

namespace ws {

template <class Out>
WS_HD void q2_0_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    const uint8_t* blk = src + (g >> 3) * q2_0::BYTES;
    float d = f16_to_f32(load_u16(blk + q2_0::D));
    uint32_t w = load_u16(blk + q2_0::QS + 2 * (uint32_t)(g & 7));
    uint16_t out[8];
    WS_UNROLL
    for (int j = 0; j < 8; j++) out[j] = Out::from_f32(mul((float)((int)((w >> (2 * j)) & 3u) - 1), d));
    store8(dst + g * 8, out, 8);
}

}  // namespace ws

WS_BLOCK_KERNEL(q2_0)
