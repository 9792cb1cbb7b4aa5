// Grid (codebook) i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M)
// -> BF16 or float16 (Out, common.cuh).
// One family per file, the same family names as the CPU kernels'
// (crates/weightstream-dequant/src/{scalar,x86,arm}/grid.rs).

// IQ2_XXS: f16 d; per 32 elements two u32: four grid index bytes,
// and four 7-bit sign indices with a 4-bit scale s on top;
// db = (d * (0.5 + s)) * 0.25, x = (db * IQ2XXS_GRID[i][j]) * ±1.
#include "iquant.cuh"

namespace ws {
template <class Out>
WS_HD void iq2_xxs_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    KGroup k = k_group(src, g, iq2_xxs::BYTES);
    uint32_t ib = k.e0 / 32, l = (k.e0 % 32) / 8;
    const uint8_t* pair = k.blk + iq2_xxs::QS + 8 * ib;
    uint32_t aux = load_u32_even(pair + 4);
    float db = half_step_scale(f16_to_f32(load_u16(k.blk + iq2_xxs::D)), aux >> 28, 0.25f);
    uint16_t out[8];
    grid_signed8<Out>(db, IQ2XXS_GRID[pair[l]], KSIGNS[(aux >> (7 * l)) & 0x7Fu], out);
    store8(dst + g * 8, out, 8);
}
}  // namespace ws
WS_BLOCK_KERNEL(iq2_xxs)

// IQ2_XS: f16 d; per 8 elements a u16 (9-bit grid index, 7-bit
// sign index); a 4-bit scale per 16; db as IQ2_XXS's.

namespace ws {
template <class Out>
WS_HD void iq2_xs_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    KGroup k = k_group(src, g, iq2_xs::BYTES);
    uint32_t i = k.e0 / 8;
    uint32_t q = load_u16(k.blk + iq2_xs::QS + 2 * i);
    float db = half_step_scale(f16_to_f32(load_u16(k.blk + iq2_xs::D)), iq2_group_scale(k.blk + iq2_xs::SCALES, i), 0.25f);
    uint16_t out[8];
    grid_signed8<Out>(db, IQ2XS_GRID[q & 511u], KSIGNS[q >> 9], out);
    store8(dst + g * 8, out, 8);
}
}  // namespace ws
WS_BLOCK_KERNEL(iq2_xs)

// IQ2_S: f16 d; per 8 elements a grid index byte with 2 high bits
// from qh and an explicit sign byte; a 4-bit scale per 16; db as IQ2_XXS's.

namespace ws {
template <class Out>
WS_HD void iq2_s_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    KGroup k = k_group(src, g, iq2_s::BYTES);
    uint32_t i = k.e0 / 8;
    uint32_t hi = (k.blk[iq2_s::QH + i / 4] >> (2 * (i % 4))) & 3u;
    float db = half_step_scale(f16_to_f32(load_u16(k.blk + iq2_s::D)), iq2_group_scale(k.blk + iq2_s::SCALES, i), 0.25f);
    uint16_t out[8];
    grid_signed8<Out>(db, IQ2S_GRID[k.blk[iq2_s::QS + i] | (hi << 8)], k.blk[iq2_s::SIGNS + i], out);
    store8(dst + g * 8, out, 8);
}
}  // namespace ws
WS_BLOCK_KERNEL(iq2_s)

// IQ3_XXS: f16 d; 64 grid index bytes (4 values each); per 32
// elements a u32 of four 7-bit sign indices and a 4-bit scale s;
// db = (d * (0.5 + s)) * 0.5, x = (db * grid) * ±1.

namespace ws {
template <class Out>
WS_HD void iq3_xxs_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    KGroup k = k_group(src, g, iq3_xxs::BYTES);
    uint32_t ib = k.e0 / 32, l = (k.e0 % 32) / 8;
    uint32_t aux = load_u32_even(k.blk + iq3_xxs::SCALES + 4 * ib);
    float db = half_step_scale(f16_to_f32(load_u16(k.blk + iq3_xxs::D)), aux >> 28, 0.5f);
    const uint8_t* idx = k.blk + iq3_xxs::QS + 8 * ib + 2 * l;
    uint64_t entry = (uint64_t)IQ3XXS_GRID[idx[0]] | ((uint64_t)IQ3XXS_GRID[idx[1]] << 32);
    uint16_t out[8];
    grid_signed8<Out>(db, entry, KSIGNS[(aux >> (7 * l)) & 0x7Fu], out);
    store8(dst + g * 8, out, 8);
}
}  // namespace ws
WS_BLOCK_KERNEL(iq3_xxs)

// IQ3_S: f16 d; per 4 elements a grid index byte with a ninth bit
// from qh; sign bytes per 8; a 4-bit scale s per 32: db = d * (1 + 2s).

namespace ws {
WS_HD uint32_t iq3_s_index(const uint8_t* blk, uint32_t i) {
    return blk[iq3_s::QS + i] | (((uint32_t)(blk[iq3_s::QH + i / 8] >> (i % 8)) & 1u) << 8);
}

template <class Out>
WS_HD void iq3_s_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    KGroup k = k_group(src, g, iq3_s::BYTES);
    uint32_t ib = k.e0 / 32, l = (k.e0 % 32) / 8, i = 8 * ib + 2 * l;
    uint32_t s = (k.blk[iq3_s::SCALES + ib / 2] >> (4 * (ib % 2))) & 0xFu;
    float db = mul(f16_to_f32(load_u16(k.blk + iq3_s::D)), (float)(1 + 2 * s));
    uint64_t entry = (uint64_t)IQ3S_GRID[iq3_s_index(k.blk, i)] | ((uint64_t)IQ3S_GRID[iq3_s_index(k.blk, i + 1)] << 32);
    uint16_t out[8];
    grid_signed8<Out>(db, entry, k.blk[iq3_s::SIGNS + 4 * ib + l], out);
    store8(dst + g * 8, out, 8);
}
}  // namespace ws
WS_BLOCK_KERNEL(iq3_s)

// IQ1_S: f16 d; 32 grid index bytes; per 32 elements a u16 of four
// 3-bit high index parts, a 3-bit scale s (bits 12..14) and the delta's sign
// (bit 15); x = (d * (2s + 1)) * (grid + delta), grid values -1, 0, 1.

namespace ws {
template <class Out>
WS_HD void iq1_s_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    KGroup k = k_group(src, g, iq1_s::BYTES);
    uint32_t ib = k.e0 / 32, l = (k.e0 % 32) / 8;
    uint32_t qh = load_u16(k.blk + iq1_s::QH + 2 * ib);
    float dl = mul(f16_to_f32(load_u16(k.blk + iq1_s::D)), (float)(2 * ((qh >> 12) & 7u) + 1));
    uint32_t index = k.blk[iq1_s::QS + 4 * ib + l] | (((qh >> (3 * l)) & 7u) << 8);
    uint16_t out[8];
    grid_delta8<Out>(dl, IQ1S_GRID[index], iq1_delta(qh & 0x8000u), out);
    store8(dst + g * 8, out, 8);
}
}  // namespace ws
WS_BLOCK_KERNEL(iq1_s)

// IQ1_M: 32 grid index bytes; per 8 elements a nibble of qh (3 high
// index bits, the delta's sign); four u16 scales holding a 3-bit s per 16
// elements, their top nibbles together the f16 d; x = (d * (2s + 1)) *
// (grid + delta).

namespace ws {
template <class Out>
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
    grid_delta8<Out>(dl, IQ1S_GRID[index], iq1_delta(h & 8u), out);
    store8(dst + g * 8, out, 8);
}
}  // namespace ws
WS_BLOCK_KERNEL(iq1_m)
