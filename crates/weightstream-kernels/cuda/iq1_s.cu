// IQ1_S -> BF16. f16 d; 32 grid index bytes; per 32 elements a u16 of four
// 3-bit high index parts, a 3-bit scale s (bits 12..14) and the delta's sign
// (bit 15); x = (d * (2s + 1)) * (grid + delta), grid values -1, 0, 1.
#include "iquant.cuh"

namespace ws {
WS_HD void iq1_s_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    KGroup k = k_group(src, g, iq1_s::BYTES);
    uint32_t ib = k.e0 / 32, l = (k.e0 % 32) / 8;
    uint32_t qh = load_u16(k.blk + iq1_s::QH + 2 * ib);
    float dl = mul(f16_to_f32(load_u16(k.blk + iq1_s::D)), (float)(2 * ((qh >> 12) & 7u) + 1));
    uint32_t index = k.blk[iq1_s::QS + 4 * ib + l] | (((qh >> (3 * l)) & 7u) << 8);
    uint16_t out[8];
    grid_delta8(dl, IQ1S_GRID[index], iq1_delta(qh & 0x8000u), out);
    store_bf16(dst + g * 8, out, 8);
}
}  // namespace ws
WS_BLOCK_KERNEL(iq1_s)
