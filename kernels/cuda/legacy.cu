// Legacy 32-element block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0)
// -> BF16 or float16 (Out, common.cuh).
// One family per file, the same family names as the CPU kernels'
// (crates/weightstream-dequant/src/{scalar,x86,arm}/legacy.rs).

// Q4_0: a block is f16 d + 16 bytes; element j (j < 16) is the low
// nibble of qs[j], element j + 16 the high nibble; x = d * (q - 8).
// Thread group g writes elements 8g..8g+7: block g / 4, quarter g % 4
// (legacy.cuh). A warp writes 512 contiguous bytes with 16-byte stores.
#include "legacy.cuh"

namespace ws {

template <class Out>
WS_HD void q4_0_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    const uint8_t* blk = src + (g >> 2) * q4_0::BYTES;
    float d = f16_to_f32(load_u16(blk + q4_0::D));
    uint8_t q[8];
    quarter_nibbles(blk + q4_0::QS, (uint32_t)(g & 3), q);
    uint16_t out[8];
    WS_UNROLL
    for (int j = 0; j < 8; j++) out[j] = Out::from_f32(mul(d, (float)((int)q[j] - 8)));
    store8(dst + g * 8, out, 8);
}

}  // namespace ws

WS_BLOCK_KERNEL(q4_0)

// Q4_1: a block is f16 d, f16 m + 16 bytes of nibbles (as Q4_0);
// x = (d * q) + m, each operation rounded (gguf-py's order; no FMA).

namespace ws {

template <class Out>
WS_HD void q4_1_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    const uint8_t* blk = src + (g >> 2) * q4_1::BYTES;
    float d = f16_to_f32(load_u16(blk + q4_1::D)), m = f16_to_f32(load_u16(blk + q4_1::M));
    uint8_t q[8];
    quarter_nibbles(blk + q4_1::QS, (uint32_t)(g & 3), q);
    uint16_t out[8];
    WS_UNROLL
    for (int j = 0; j < 8; j++) out[j] = Out::from_f32(add(mul(d, (float)q[j]), m));
    store8(dst + g * 8, out, 8);
}

}  // namespace ws

WS_BLOCK_KERNEL(q4_1)

// Q5_0: a block is f16 d, a u32 of high bits, 16 bytes of low
// nibbles (as Q4_0); element j's bit 4 is bit j of qh; x = d * (q - 16).

namespace ws {

template <class Out>
WS_HD void q5_0_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    const uint8_t* blk = src + (g >> 2) * q5_0::BYTES;
    uint32_t k = (uint32_t)(g & 3);
    float d = f16_to_f32(load_u16(blk + q5_0::D));
    uint32_t qh = qh_word(blk + q5_0::QH) >> (8 * k);
    uint8_t q[8];
    quarter_nibbles(blk + q5_0::QS, k, q);
    uint16_t out[8];
    WS_UNROLL
    for (int j = 0; j < 8; j++) out[j] = Out::from_f32(mul(d, (float)((int)(q[j] | (((qh >> j) & 1u) << 4)) - 16)));
    store8(dst + g * 8, out, 8);
}

}  // namespace ws

WS_BLOCK_KERNEL(q5_0)

// Q5_1: a block is f16 d, f16 m, a u32 of high bits, 16 bytes of
// low nibbles; q as in Q5_0 but unsigned; x = (d * q) + m.

namespace ws {

template <class Out>
WS_HD void q5_1_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    const uint8_t* blk = src + (g >> 2) * q5_1::BYTES;
    uint32_t k = (uint32_t)(g & 3);
    float d = f16_to_f32(load_u16(blk + q5_1::D)), m = f16_to_f32(load_u16(blk + q5_1::M));
    uint32_t qh = qh_word(blk + q5_1::QH) >> (8 * k);
    uint8_t q[8];
    quarter_nibbles(blk + q5_1::QS, k, q);
    uint16_t out[8];
    WS_UNROLL
    for (int j = 0; j < 8; j++) out[j] = Out::from_f32(add(mul(d, (float)(q[j] | (((qh >> j) & 1u) << 4))), m));
    store8(dst + g * 8, out, 8);
}

}  // namespace ws

WS_BLOCK_KERNEL(q5_1)

// Q8_0: a block is f16 d + 32 int8; x = d * q.
// Thread group g writes elements 8g..8g+7 of block g / 4.
#include "common.cuh"

namespace ws {

template <class Out>
WS_HD void q8_0_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    const uint8_t* blk = src + (g >> 2) * q8_0::BYTES;
    float d = f16_to_f32(load_u16(blk + q8_0::D));
    uint8_t qs[8];
    load8_even(blk + q8_0::QS + 8 * (uint32_t)(g & 3), qs);
    uint16_t out[8];
    WS_UNROLL
    for (int j = 0; j < 8; j++) out[j] = Out::from_f32(mul(d, (float)(int8_t)qs[j]));
    store8(dst + g * 8, out, 8);
}

}  // namespace ws

WS_BLOCK_KERNEL(q8_0)
