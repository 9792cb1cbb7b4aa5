// IQ2_S -> BF16. f16 d; per 8 elements a grid index byte with 2 high bits
// from qh and an explicit sign byte; a 4-bit scale per 16; db as IQ2_XXS's.
#include "iquant.cuh"

namespace ws {
WS_HD void iq2_s_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    KGroup k = k_group(src, g, iq2_s::BYTES);
    uint32_t i = k.e0 / 8;
    uint32_t hi = (k.blk[iq2_s::QH + i / 4] >> (2 * (i % 4))) & 3u;
    float db = half_step_scale(f16_to_f32(load_u16(k.blk + iq2_s::D)), iq2_group_scale(k.blk + iq2_s::SCALES, i), 0.25f);
    uint16_t out[8];
    grid_signed8(db, IQ2S_GRID[k.blk[iq2_s::QS + i] | (hi << 8)], k.blk[iq2_s::SIGNS + i], out);
    store_bf16(dst + g * 8, out, 8);
}
}  // namespace ws
WS_BLOCK_KERNEL(iq2_s)
