// MXFP4 -> BF16. E8M0 e, 16 bytes of E2M1 nibbles (low, then high);
// x = 2^(e-128) * E2M1_DOUBLED[q]. Blocks are 17 bytes, so they start at odd
// addresses: bytes are read one by one. Group g: block g / 4, quarter g % 4.
#include "iquant.cuh"

namespace ws {
WS_HD void mxfp4_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    const uint8_t* blk = src + (g >> 2) * mxfp4::BYTES;
    uint32_t quarter = (uint32_t)(g & 3);
    uint8_t b[8], q[8];
    load8_any(blk + mxfp4::QS + 8 * (quarter & 1u), b);
    nibbles8(b, 4 * (quarter >> 1), q);
    uint16_t out[8];
    lut8(e8m0_half(blk[mxfp4::E]), E2M1_DOUBLED, q, out);
    store_bf16(dst + g * 8, out, 8);
}
}  // namespace ws
WS_BLOCK_KERNEL(mxfp4)
