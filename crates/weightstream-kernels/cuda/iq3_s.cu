// IQ3_S -> BF16. f16 d; per 4 elements a grid index byte with a ninth bit
// from qh; sign bytes per 8; a 4-bit scale s per 32: db = d * (1 + 2s).
#include "iquant.cuh"

namespace ws {
WS_HD uint32_t iq3_s_index(const uint8_t* blk, uint32_t i) {
    return blk[iq3_s::QS + i] | (((uint32_t)(blk[iq3_s::QH + i / 8] >> (i % 8)) & 1u) << 8);
}

WS_HD void iq3_s_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    KGroup k = k_group(src, g, iq3_s::BYTES);
    uint32_t ib = k.e0 / 32, l = (k.e0 % 32) / 8, i = 8 * ib + 2 * l;
    uint32_t s = (k.blk[iq3_s::SCALES + ib / 2] >> (4 * (ib % 2))) & 0xFu;
    float db = mul(f16_to_f32(load_u16(k.blk + iq3_s::D)), (float)(1 + 2 * s));
    uint64_t entry = (uint64_t)IQ3S_GRID[iq3_s_index(k.blk, i)] | ((uint64_t)IQ3S_GRID[iq3_s_index(k.blk, i + 1)] << 32);
    uint16_t out[8];
    grid_signed8(db, entry, k.blk[iq3_s::SIGNS + 4 * ib + l], out);
    store_bf16(dst + g * 8, out, 8);
}
}  // namespace ws
WS_BLOCK_KERNEL(iq3_s)
