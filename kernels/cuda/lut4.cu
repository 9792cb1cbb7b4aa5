// 4-bit codes through a 16-entry table (IQ4_NL, IQ4_XS, MXFP4, NVFP4)
// -> BF16 or float16 (Out, common.cuh).
// One family per file, the same family names as the CPU kernels'
// (crates/weightstream-dequant/src/{scalar,x86,arm}/lut4.rs).

// IQ4_NL: f16 d, 16 bytes of nibbles (as Q4_0's: low nibbles, then
// high); x = d * IQ4NL_VALUES[q]. Group g: block g / 4, quarter g % 4.
#include "iquant.cuh"
#include "legacy.cuh"

namespace ws {
template <class Out>
WS_HD void iq4_nl_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    const uint8_t* blk = src + (g >> 2) * iq4_nl::BYTES;
    uint8_t q[8];
    quarter_nibbles(blk + iq4_nl::QS, (uint32_t)(g & 3), q);
    uint16_t out[8];
    lut8<Out>(f16_to_f32(load_u16(blk + iq4_nl::D)), IQ4NL_VALUES, q, out);
    store8(dst + g * 8, out, 8);
}
}  // namespace ws
WS_BLOCK_KERNEL(iq4_nl)

// IQ4_XS: f16 d, u16 scales_h, 4 bytes scales_l, 128 bytes of
// nibbles; per 32-element sub-block k a 6-bit scale (nibble k of scales_l,
// bits 2k..2k+1 of scales_h) minus 32 and 16 bytes laid out as IQ4_NL's;
// x = (d * sc) * IQ4NL_VALUES[q].

namespace ws {
template <class Out>
WS_HD void iq4_xs_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    KGroup k = k_group(src, g, iq4_xs::BYTES);
    uint32_t kb = k.e0 / 32, i = k.e0 % 32;
    uint32_t lo = (k.blk[iq4_xs::SCALES_L + kb / 2] >> (4 * (kb % 2))) & 0xFu;
    uint32_t hi = (load_u16(k.blk + iq4_xs::SCALES_H) >> (2 * kb)) & 3u;
    float dl = mul(f16_to_f32(load_u16(k.blk + iq4_xs::D)), (float)((int)(lo | (hi << 4)) - 32));
    uint8_t b[8], q[8];
    load8_even(k.blk + iq4_xs::QS + 16 * kb + i % 16, b);
    nibbles8(b, 4 * (i / 16), q);
    uint16_t out[8];
    lut8<Out>(dl, IQ4NL_VALUES, q, out);
    store8(dst + g * 8, out, 8);
}
}  // namespace ws
WS_BLOCK_KERNEL(iq4_xs)

// MXFP4: E8M0 e, 16 bytes of E2M1 nibbles (low, then high);
// x = 2^(e-128) * E2M1_DOUBLED[q]. Blocks are 17 bytes, so they start at odd
// addresses: bytes are read one by one. Group g: block g / 4, quarter g % 4.

namespace ws {
template <class Out>
WS_HD void mxfp4_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    const uint8_t* blk = src + (g >> 2) * mxfp4::BYTES;
    uint32_t quarter = (uint32_t)(g & 3);
    uint8_t b[8], q[8];
    load8_any(blk + mxfp4::QS + 8 * (quarter & 1u), b);
    nibbles8(b, 4 * (quarter >> 1), q);
    uint16_t out[8];
    lut8<Out>(e8m0_half(blk[mxfp4::E]), E2M1_DOUBLED, q, out);
    store8(dst + g * 8, out, 8);
}
}  // namespace ws
WS_BLOCK_KERNEL(mxfp4)

// NVFP4: 4 UE4M3 scales (one per 16 elements), 32 bytes of E2M1
// nibbles: sub-block k's 8 bytes, low nibbles then high;
// x = (s / 2) * E2M1_DOUBLED[q]. Group g: block g / 8, sub-block (g % 8) / 2,
// low or high nibbles by g % 2.

namespace ws {
template <class Out>
WS_HD void nvfp4_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    const uint8_t* blk = src + (g >> 3) * nvfp4::BYTES;
    uint32_t t = (uint32_t)(g & 7), k = t >> 1;
    uint8_t b[8], q[8];
    load8_even(blk + nvfp4::QS + 8 * k, b);
    nibbles8(b, 4 * (t & 1u), q);
    uint16_t out[8];
    lut8<Out>(ue4m3_half(blk[nvfp4::D + k]), E2M1_DOUBLED, q, out);
    store8(dst + g * 8, out, 8);
}
}  // namespace ws
WS_BLOCK_KERNEL(nvfp4)
