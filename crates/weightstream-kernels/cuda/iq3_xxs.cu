// IQ3_XXS -> BF16. f16 d; 64 grid index bytes (4 values each); per 32
// elements a u32 of four 7-bit sign indices and a 4-bit scale s;
// db = (d * (0.5 + s)) * 0.5, x = (db * grid) * ±1.
#include "iquant.cuh"

namespace ws {
WS_HD void iq3_xxs_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    KGroup k = k_group(src, g, iq3_xxs::BYTES);
    uint32_t ib = k.e0 / 32, l = (k.e0 % 32) / 8;
    uint32_t aux = load_u32_even(k.blk + iq3_xxs::SCALES + 4 * ib);
    float db = half_step_scale(f16_to_f32(load_u16(k.blk + iq3_xxs::D)), aux >> 28, 0.5f);
    const uint8_t* idx = k.blk + iq3_xxs::QS + 8 * ib + 2 * l;
    uint64_t entry = (uint64_t)IQ3XXS_GRID[idx[0]] | ((uint64_t)IQ3XXS_GRID[idx[1]] << 32);
    uint16_t out[8];
    grid_signed8(db, entry, KSIGNS[(aux >> (7 * l)) & 0x7Fu], out);
    store_bf16(dst + g * 8, out, 8);
}
}  // namespace ws
WS_BLOCK_KERNEL(iq3_xxs)
