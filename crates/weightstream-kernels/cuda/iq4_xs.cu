// IQ4_XS -> BF16. f16 d, u16 scales_h, 4 bytes scales_l, 128 bytes of
// nibbles; per 32-element sub-block k a 6-bit scale (nibble k of scales_l,
// bits 2k..2k+1 of scales_h) minus 32 and 16 bytes laid out as IQ4_NL's;
// x = (d * sc) * IQ4NL_VALUES[q].
#include "iquant.cuh"

namespace ws {
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
    lut8(dl, IQ4NL_VALUES, q, out);
    store_bf16(dst + g * 8, out, 8);
}
}  // namespace ws
WS_BLOCK_KERNEL(iq4_xs)
