// IQ1_M -> BF16. 32 grid index bytes; per 8 elements a nibble of qh (3 high
// index bits, the delta's sign); four u16 scales holding a 3-bit s per 16
// elements, their top nibbles together the f16 d; x = (d * (2s + 1)) *
// (grid + delta).
#include "iquant.cuh"

namespace ws {
WS_HD void iq1_m_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    KGroup k = k_group(src, g, iq1_m::BYTES);
    const uint8_t* sc = k.blk + iq1_m::SCALES;
    uint32_t s0 = load_u16(sc), s1 = load_u16(sc + 2), s2 = load_u16(sc + 4), s3 = load_u16(sc + 6);
    float d = f16_to_f32((uint16_t)((s0 >> 12) | ((s1 >> 8) & 0x00F0u) | ((s2 >> 4) & 0x0F00u) | (s3 & 0xF000u)));
    uint32_t i = k.e0 / 8, grp = i / 2;
    uint32_t s = (load_u16(sc + 2 * (grp / 4)) >> (3 * (grp % 4))) & 7u;
    float dl = mul(d, (float)(2 * s + 1));
    uint32_t h = (k.blk[iq1_m::QH + i / 2] >> (4 * (i % 2))) & 0xFu;
    uint32_t index = k.blk[iq1_m::QS + i] | ((h & 7u) << 8);
    uint16_t out[8];
    grid_delta8(dl, IQ1S_GRID[index], iq1_delta(h & 8u), out);
    store_bf16(dst + g * 8, out, 8);
}
}  // namespace ws
WS_BLOCK_KERNEL(iq1_m)
