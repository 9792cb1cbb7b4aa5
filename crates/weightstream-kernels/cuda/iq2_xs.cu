// IQ2_XS -> BF16. f16 d; per 8 elements a u16 (9-bit grid index, 7-bit
// sign index); a 4-bit scale per 16; db as IQ2_XXS's.
#include "iquant.cuh"

namespace ws {
WS_HD void iq2_xs_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    KGroup k = k_group(src, g, iq2_xs::BYTES);
    uint32_t i = k.e0 / 8;
    uint32_t q = load_u16(k.blk + iq2_xs::QS + 2 * i);
    float db = half_step_scale(f16_to_f32(load_u16(k.blk + iq2_xs::D)), iq2_group_scale(k.blk + iq2_xs::SCALES, i), 0.25f);
    uint16_t out[8];
    grid_signed8(db, IQ2XS_GRID[q & 511u], KSIGNS[q >> 9], out);
    store_bf16(dst + g * 8, out, 8);
}
}  // namespace ws
WS_BLOCK_KERNEL(iq2_xs)
