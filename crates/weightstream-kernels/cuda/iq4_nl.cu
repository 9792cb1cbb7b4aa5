// IQ4_NL -> BF16. f16 d, 16 bytes of nibbles (as Q4_0's: low nibbles, then
// high); x = d * IQ4NL_VALUES[q]. Group g: block g / 4, quarter g % 4.
#include "iquant.cuh"
#include "legacy_quant.cuh"

namespace ws {
WS_HD void iq4_nl_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    const uint8_t* blk = src + (g >> 2) * iq4_nl::BYTES;
    uint8_t q[8];
    quarter_nibbles(blk + iq4_nl::QS, (uint32_t)(g & 3), q);
    uint16_t out[8];
    lut8(f16_to_f32(load_u16(blk + iq4_nl::D)), IQ4NL_VALUES, q, out);
    store_bf16(dst + g * 8, out, 8);
}
}  // namespace ws
WS_BLOCK_KERNEL(iq4_nl)
