// K-quants (256-element super-blocks: Q2_K ... Q6_K) -> BF16 or float16 (Out, common.cuh).
// One family per file, the same family names as the CPU kernels'
// (crates/weightstream-dequant/src/{scalar,x86,arm}/kquant.rs).

// Q2_K: 16 bytes of (4-bit scale | 4-bit min << 4) per 16
// elements, 64 bytes of 2-bit quants, f16 d and dmin;
// x = (d * sc) * q - (dmin * m), each operation rounded (no FMA).
#include "kquant.cuh"

namespace ws {

template <class Out>
WS_HD void q2_k_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    KGroup k = k_group(src, g, q2_k::BYTES);
    float d = f16_to_f32(load_u16(k.blk + q2_k::D)), dmin = f16_to_f32(load_u16(k.blk + q2_k::DMIN));
    uint32_t sm = k.blk[q2_k::SCALES + k.e0 / 16];
    float dl = mul(d, (float)(sm & 0xFu)), ml = mul(dmin, (float)(sm >> 4));
    uint8_t q[8];
    crumbs8(k.blk + q2_k::QS, k.e0, q);
    uint16_t out[8];
    WS_UNROLL
    for (int j = 0; j < 8; j++) out[j] = Out::from_f32(sub(mul(dl, (float)q[j]), ml));
    store8(dst + g * 8, out, 8);
}

}  // namespace ws

WS_BLOCK_KERNEL(q2_k)

// Q3_K: 32 bytes of high bits, 64 bytes of 2-bit quants, 12 bytes
// of 6-bit signed scales (per 16 elements), f16 d;
// x = (d * sc) * q, q = the 2 bits minus 4 where the hmask bit is clear.

namespace ws {

// Scale j (0..15): the low nibble of byte j (j < 8) or high nibble of byte
// j - 8, with two high bits from bytes 8..11, minus 32.
WS_HD int q3_k_scale(const uint8_t* sc, uint32_t j) {
    uint32_t lo = j < 8 ? (sc[j] & 0x0Fu) : (uint32_t)(sc[j - 8] >> 4);
    uint32_t hi = (sc[8 + j % 4] >> (2 * (j / 4))) & 3u;
    return (int)(lo | (hi << 4)) - 32;
}

template <class Out>
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
    for (int j = 0; j < 8; j++) out[j] = Out::from_f32(mul(dl, (float)((int)q[j] - (((h[j] >> bit) & 1u) ? 0 : 4))));
    store8(dst + g * 8, out, 8);
}

}  // namespace ws

WS_BLOCK_KERNEL(q3_k)

// Q4_K: f16 d, dmin; 12 bytes of 6-bit scales and mins (per 32
// elements); 128 bytes of nibbles; x = (d * sc) * q - (dmin * m), each
// operation rounded (gguf-py's order; no FMA).

namespace ws {

template <class Out>
WS_HD void q4_k_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    KGroup k = k_group(src, g, q4_k::BYTES);
    float d = f16_to_f32(load_u16(k.blk + q4_k::D)), dmin = f16_to_f32(load_u16(k.blk + q4_k::DMIN));
    uint32_t sc, m;
    k4_scale_min(k.blk + q4_k::SCALES, k.e0 / 32, &sc, &m);
    float dl = mul(d, (float)sc), ml = mul(dmin, (float)m);
    uint8_t q[8];
    k_nibbles8(k.blk + q4_k::QS, k.e0, q);
    uint16_t out[8];
    WS_UNROLL
    for (int j = 0; j < 8; j++) out[j] = Out::from_f32(sub(mul(dl, (float)q[j]), ml));
    store8(dst + g * 8, out, 8);
}

}  // namespace ws

WS_BLOCK_KERNEL(q4_k)

// Q5_K: As Q4_K with 32 bytes of high bits: element 32k + l takes
// bit k of qh[l] as bit 4; x = (d * sc) * q - (dmin * m).

namespace ws {

template <class Out>
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
    for (int j = 0; j < 8; j++) out[j] = Out::from_f32(sub(mul(dl, (float)(q[j] | (((h[j] >> sub_block) & 1u) << 4))), ml));
    store8(dst + g * 8, out, 8);
}

}  // namespace ws

WS_BLOCK_KERNEL(q5_k)

// Q6_K: 128 bytes of low nibbles, 64 bytes of 2-bit highs, 16 x i8
// scales (per 16 elements), f16 d; x = (d * sc) * (q - 32). In each
// 128-element half, element i's low nibble is in ql[i % 64] (low nibbles
// for i < 64, high for the rest) and its high bits are crumb i of qh.

namespace ws {

template <class Out>
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
    for (int j = 0; j < 8; j++) out[j] = Out::from_f32(mul(dl, (float)((int)(((lo[j] >> shift) & 0xFu) | ((uint32_t)hi[j] << 4)) - 32)));
    store8(dst + g * 8, out, 8);
}

}  // namespace ws

WS_BLOCK_KERNEL(q6_k)
