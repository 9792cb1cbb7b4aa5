// llama.cpp's 1- and 2-bit d-scaled formats (Q1_0, Q2_0) -> BF16 or float16 (Out, common.cuh).
// One family per file, the same family names as the CPU kernels'
// (crates/weightstream-dequant/src/{scalar,x86,arm}/lowbit.rs); the
// reference is ggml-quants.c's dequantize_row_q1_0 / dequantize_row_q2_0.
//
// A block has two (Q1_0: d, -d) or four (Q2_0: (q - 1) * d) possible
// outputs: a thread rounds them once per unit of 16 outputs (units.cuh
// `tab4`, exactly the reference's values and rounding) and selects each
// output by a byte permute from its code (as ternary.cu). Only the codes'
// extraction is new, bit movement: kernels/tests/table_exhaustive.rs holds
// `put` to the reference formula for every f16 d (finite or not) x every
// code at every position, both outputs.
#include "units.cuh"

namespace ws {

// What both share: a unit's codes are the STEP (2 or 4) bytes at
// QS + STEP * j, its outputs 16j..16j + 15.
template <uint32_t QS, uint32_t STEP>
struct LowbitUnit {
    struct Lane {
        uint32_t qs, lo;
    };
    struct Raw {
        uint32_t h, w;
    };
    static WS_HD Lane lane(uint32_t j) { return Lane{QS + STEP * j, 16 * j}; }
    static WS_HD Raw load(const uint8_t* blk, const Lane& L) {
        return Raw{load_u16(blk), STEP == 2 ? (uint32_t)load_u16(blk + L.qs) : load_u32_even(blk + L.qs)};
    }
};
static_assert(q1_0::D == 0 && q2_0::D == 0, "d first");

// Q1_0: a block is f16 d + 16 bytes of bits; element j is bit j % 8 of
// qs[j / 8]: x = d where set, else -d (a negation, no multiply). Unit j
// (0..7): the 16 bits of qs[2j], qs[2j + 1] (a little-endian u16: blocks are
// 18 bytes), elements 16j... As table codes, bit b is entry 2b (T0 = -d,
// T2 = d): bits i..i+3 go to bit 1 of bytes 0..3 by one multiply (the four
// shifted copies 7i + 1 apart never overlap).
struct Q1 : LowbitUnit<q1_0::QS, 2> {
    static constexpr uint32_t UNITS = 8, ELEMS = q1_0::ELEMS, BYTES = q1_0::BYTES;
    static WS_HD uint32_t codes(uint32_t w, int i) { return (((w >> (4 * i)) & 0xFu) * 0x00408102u) & 0x02020202u; }
    template <class Out>
    static WS_HD void put(uint16_t* dst, const Raw& r, const Lane& L, const float*) {
        Tab4 t = tab4<Out>(r.h);
        store8_codes(dst + L.lo, t, codes(r.w, 0), codes(r.w, 1));
        store8_codes(dst + L.lo + 8, t, codes(r.w, 2), codes(r.w, 3));
    }
};

// Q2_0: a block is f16 d + 16 bytes of 2-bit codes; element j is
// bits 2(j % 4) of qs[j / 4]: x = (q - 1) * d, one rounded multiply.
// Unit j (0..3): the LE u32 at qs[4j] (even offsets: blocks are 18 bytes),
// elements 16j..: output 4b + c is crumb c of byte b. Crumb c of every
// byte, one a byte, makes selectors for outputs 4b + c; a permute pairs
// those of outputs 4b + c, 4b + c + 1.
struct Q2 : LowbitUnit<q2_0::QS, 4> {
    static constexpr uint32_t UNITS = 4, ELEMS = q2_0::ELEMS, BYTES = q2_0::BYTES;
    template <class Out>
    static WS_HD void put(uint16_t* dst, const Raw& r, const Lane& L, const float*) {
        Tab4 t = tab4<Out>(r.h);
        uint32_t s[4], o[8];
        WS_UNROLL
        for (int c = 0; c < 4; c++) s[c] = selectors((r.w >> (2 * c)) & 0x03030303u);
        WS_UNROLL
        for (uint32_t b = 0; b < 4; b++) {
            o[2 * b] = pick2(t, byte_perm(s[0], s[1], b | ((4 + b) << 4)));
            o[2 * b + 1] = pick2(t, byte_perm(s[2], s[3], b | ((4 + b) << 4)));
        }
        store8_words(dst + L.lo, o);
        store8_words(dst + L.lo + 8, o + 4);
    }
};

}  // namespace ws

WS_UNIT_KERNEL(q1_0, Q1)
WS_UNIT_KERNEL(q2_0, Q2)
