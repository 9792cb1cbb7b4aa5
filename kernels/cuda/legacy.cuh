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


// ---- Magic-number code extraction (issue 56; docs/numerics.md, "CUDA
// legacy kernels"). A code u at bit p of a word, with u * 2^p < 2^23, ORed
// into 0x4B000000 is the f32 2^23 + u * 2^p, exactly. Subtracting
// 2^23 + c * 2^p (both in [2^23, 2^24): Sterbenz) is exact: (u - c) * 2^p,
// +0 when u == c, as the reference's (float)0. Multiplying that by
// d * 2^-p (exact: d is an f16, at least 2^-24 in magnitude or zero, p <= 12,
// so d * 2^-p is a normal f32, zero, infinity or NaN, never rounded) gives
// the f32 RN(d * (u - c)), the reference's own product: the same real
// number, rounded once (or the same infinity, or a NaN, which the output
// policy writes as its one canonical NaN). No code moves from its place
// but by the one shift of the upper half word.

// The f32 of `bits` (a code at bit p, the rest zero) ORed into 2^23.
WS_HD float magic(uint32_t bits) { return bits_float(bits | 0x4B000000u); }

// What magic8 needs of a code position, the same for every group of a
// thread when the grid stride is a multiple of 4 (hoisted out of the loop):
// codes `mask` wide at bits s and 8 + s of a half word, their bias c.
struct Magic {
    uint32_t m0, m1;  // mask << s, mask << (8 + s)
    float c0, c1;     // 2^23 + c * 2^s, 2^23 + c * 2^(8 + s)
    float p0, p1;     // 2^(112 - s), 2^(104 - s): d * 2^-112 (f16_down) to d * 2^-s, d * 2^-(8 + s)
};
WS_HD Magic magic_lane(uint32_t mask, uint32_t s, uint32_t c) {
    return Magic{mask << s, mask << (8 + s), bits_float(0x4B000000u | (c << s)), bits_float(0x4B000000u | (c << (8 + s))),
                 bits_float((239u - s) << 23), bits_float((231u - s) << 23)};
}

// The 8 values d * (q_j - c) (as f32: the reference's products, exactly)
// of 8 codes, one per byte of w0 (bytes 0..3) and w1 (4..7), each at bit
// s of its byte: byte pairs at bits s and 8 + s of w, w >> 16. Needs
// (mask << (8 + s)) < 2^23: s + width <= 15. d is a finite f16, given as
// its bits h.
WS_HD void magic8(uint32_t h, uint32_t w0, uint32_t w1, const Magic& L, float x[8]) {
    float f0 = mul(f16_down(h), L.p0), f1 = mul(f16_down(h), L.p1);
    uint32_t w[4] = {w0, w0 >> 16, w1, w1 >> 16};
    WS_UNROLL
    for (int i = 0; i < 4; i++) {
        x[2 * i] = mul(sub(magic(w[i] & L.m0), L.c0), f0);
        x[2 * i + 1] = mul(sub(magic(w[i] & L.m1), L.c1), f1);
    }
}

// Nibble j (0..7) of a quarter held as two words, at bit s of its byte.
WS_HD uint32_t word_nibble(uint32_t w0, uint32_t w1, int j, uint32_t s) { return ((j < 4 ? w0 : w1) >> (8 * (j % 4) + s)) & 0xFu; }

// Q5_0/Q5_1's 5-bit codes of one quarter as one byte each (bits 0..4):
// the 4 nibbles at bit s of each byte of w, bit 4 from bits 0..3 of h
// (bit i for byte i), spread to bit 8i + 4 by one multiply.
WS_HD uint32_t five_bit_bytes(uint32_t w, uint32_t s, uint32_t h) {
    return ((w >> s) & 0x0F0F0F0Fu) | (((h & 0xFu) * 0x02040810u) & 0x10101010u);
}

}  // namespace ws
