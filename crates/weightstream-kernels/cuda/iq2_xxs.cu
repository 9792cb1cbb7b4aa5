// IQ2_XXS -> BF16. f16 d; per 32 elements two u32: four grid index bytes,
// and four 7-bit sign indices with a 4-bit scale s on top;
// db = (d * (0.5 + s)) * 0.25, x = (db * IQ2XXS_GRID[i][j]) * ±1.
#include "iquant.cuh"

namespace ws {
WS_HD void iq2_xxs_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    KGroup k = k_group(src, g, iq2_xxs::BYTES);
    uint32_t ib = k.e0 / 32, l = (k.e0 % 32) / 8;
    const uint8_t* pair = k.blk + iq2_xxs::QS + 8 * ib;
    uint32_t aux = load_u32_even(pair + 4);
    float db = half_step_scale(f16_to_f32(load_u16(k.blk + iq2_xxs::D)), aux >> 28, 0.25f);
    uint16_t out[8];
    grid_signed8(db, IQ2XXS_GRID[pair[l]], KSIGNS[(aux >> (7 * l)) & 0x7Fu], out);
    store_bf16(dst + g * 8, out, 8);
}
}  // namespace ws
WS_BLOCK_KERNEL(iq2_xxs)
