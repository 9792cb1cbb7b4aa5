// Shared by the 32-element block kernels (Q4_0, Q4_1, Q5_0, Q5_1): which
// bytes and nibbles a thread group reads. Group g writes elements
// 8(g % 4) .. 8(g % 4) + 7 of block g / 4: quarters 0 and 1 are the low
// nibbles of qs[0..8] and qs[8..16], quarters 2 and 3 the high nibbles.
#pragma once

#include "common.cuh"

namespace ws {

// The 8 nibbles of quarter `k` of a block whose nibbles start at `qs`.
WS_HD void quarter_nibbles(const uint8_t* qs, uint32_t k, uint8_t out[8]) {
    uint8_t b[8];
    load8_even(qs + 8 * (k & 1u), b);
    uint32_t shift = (k >> 1) * 4;
    WS_UNROLL
    for (int j = 0; j < 8; j++) out[j] = (uint8_t)((b[j] >> shift) & 0xF);
}

// Bit j of a 5-bit format's little-endian u32 `qh` (only 2-byte aligned:
// Q5_0 blocks are 22 bytes), as the quant's bit 4.
WS_HD uint32_t qh_word(const uint8_t* qh) { return (uint32_t)load_u16(qh) | ((uint32_t)load_u16(qh + 2) << 16); }

}  // namespace ws
