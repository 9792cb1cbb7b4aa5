// Shared by the IQ, FP4 and ternary kernels: lookup-table reads, the
// scale decodes, and the boilerplate every block kernel has. Group g of a
// kernel writes elements 8g..8g+7 with one 16-byte store; for the 256-element
// super-blocks that is elements e0 = 8 (g % 32) .. of super-block g / 32
// (kquant.cuh's k_group). Tables: block_tables.cuh (generated from gguf-py).
#pragma once

#include "block_tables.cuh"
#include "kquant.cuh"

namespace ws {

// Value j of a grid entry (byte j, as ggml packs it).
WS_HD uint32_t grid_byte(uint64_t entry, int j) { return (uint32_t)(entry >> (8 * j)) & 0xFFu; }

// 8 bytes at any address (MXFP4 blocks are 17 bytes: odd starts).
WS_HD void load8_any(const uint8_t* p, uint8_t out[8]) {
    WS_UNROLL
    for (int i = 0; i < 8; i++) out[i] = p[i];
}

// +1 or -1 for bit j of a sign pattern: multiplied after the grid value,
// as gguf-py does (exact either way).
WS_HD float sign_of(uint32_t signs, int j) { return ((signs >> j) & 1u) ? -1.0f : 1.0f; }

// 8 outputs (db * grid[j]) * sign[j] of an IQ2/IQ3 group.
template <class Out>
WS_HD void grid_signed8(float db, uint64_t entry, uint32_t signs, uint16_t out[8]) {
    WS_UNROLL
    for (int j = 0; j < 8; j++) out[j] = Out::from_f32(mul(mul(db, (float)grid_byte(entry, j)), sign_of(signs, j)));
}

// 8 outputs dl * (grid[j] + delta) of an IQ1 group (grid values -1, 0, 1).
template <class Out>
WS_HD void grid_delta8(float dl, uint64_t entry, float delta, uint16_t out[8]) {
    WS_UNROLL
    for (int j = 0; j < 8; j++) out[j] = Out::from_f32(mul(dl, add((float)(int8_t)grid_byte(entry, j), delta)));
}

// 8 outputs d * table[q[j]] (IQ4 levels, doubled E2M1 values).
template <class Out>
WS_HD void lut8(float d, const int8_t* table, const uint8_t q[8], uint16_t out[8]) {
    WS_UNROLL
    for (int j = 0; j < 8; j++) out[j] = Out::from_f32(mul(d, (float)table[q[j]]));
}

// The nibbles at `shift` (0 or 4) of 8 bytes.
WS_HD void nibbles8(const uint8_t b[8], uint32_t shift, uint8_t out[8]) {
    WS_UNROLL
    for (int j = 0; j < 8; j++) out[j] = (uint8_t)((b[j] >> shift) & 0xFu);
}

// (d * (0.5 + s)) * k: the IQ2 (k = 0.25) and IQ3_XXS (k = 0.5) sub-block scale.
WS_HD float half_step_scale(float d, uint32_t s, float k) { return mul(mul(d, add(0.5f, (float)s)), k); }

// 0.125, negative where the IQ1 delta flag is set.
WS_HD float iq1_delta(bool negative) { return negative ? -0.125f : 0.125f; }

// Half of an E8M0 scale, 2^(e - 128), from bits (subnormal for e < 2).
WS_HD float e8m0_half(uint32_t e) { return bits_float(e < 2 ? 0x00200000u << e : (e - 1) << 23); }

// Half of an unsigned E4M3 scale as gguf-py's NVFP4 decodes it: bit 7
// ignored, 0x00 and 0x7F are 0, exponent 0 subnormal, no NaN.
WS_HD float ue4m3_half(uint32_t x) {
    if (x == 0 || x == 0x7Fu) return 0.0f;
    uint32_t e = (x >> 3) & 0xFu, m = x & 7u;
    return e == 0 ? mul((float)m, 0.0009765625f) : bits_float(((e + 119u) << 23) | (m << 20));
}

}  // namespace ws

