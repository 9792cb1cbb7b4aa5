// NVFP4 -> BF16. 4 UE4M3 scales (one per 16 elements), 32 bytes of E2M1
// nibbles: sub-block k's 8 bytes, low nibbles then high;
// x = (s / 2) * E2M1_DOUBLED[q]. Group g: block g / 8, sub-block (g % 8) / 2,
// low or high nibbles by g % 2.
#include "iquant.cuh"

namespace ws {
WS_HD void nvfp4_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    const uint8_t* blk = src + (g >> 3) * nvfp4::BYTES;
    uint32_t t = (uint32_t)(g & 7), k = t >> 1;
    uint8_t b[8], q[8];
    load8_even(blk + nvfp4::QS + 8 * k, b);
    nibbles8(b, 4 * (t & 1u), q);
    uint16_t out[8];
    lut8(ue4m3_half(blk[nvfp4::D + k]), E2M1_DOUBLED, q, out);
    store_bf16(dst + g * 8, out, 8);
}
}  // namespace ws
WS_BLOCK_KERNEL(nvfp4)
