// Ternary formats (TQ1_0, TQ2_0) -> BF16 or float16 (Out, common.cuh).
// One family per file, the same family names as the CPU kernels'
// (crates/weightstream-dequant/src/{scalar,x86,arm}/ternary.rs).
//
// Every output is the reference's d * (q - 1) rounded once; a block has
// four such values at most (-d, 0 * d, d, 2d), so a thread rounds them once
// per unit of 16 outputs (units.cuh `tab4`: the reference's products, or,
// for a finite d, d and 2d rounded without the NaN test and -d, 0 * d from
// them by sign symmetry) and selects each output by a byte permute from
// its code (`store8_codes`). Only the codes' extraction is new, bit
// movement: kernels/tests/table_exhaustive.rs holds `put` to the reference
// formula for every f16 d (finite or not) x every code at every position,
// both outputs.
#include "units.cuh"

// TQ1_0: 48 bytes of 5 base-3 digits each, 4 bytes of 4, f16 d.
// Digit k of byte b: ((b * 3^k mod 256) * 3) >> 8. Elements 0..160: digit
// e / 32 of qs[e % 32]; 160..240: digit (e-160) / 16 of qs[32 + (e-160) % 16];
// 240..256: digit (e-240) / 4 of qh[(e-240) % 4]. x = d * (t - 1).
//
// Unit j (0..15): elements 16j..16j + 15, four words of 4 outputs each:
// word i is 4 bytes at qs + off + step * i, digit k_i. j < 10: bytes
// 16(j % 2) + 4i, digit j / 2; j < 15: bytes 32 + 4i, digit j - 10; j = 15:
// qh (the same 4 bytes for each i), digit i. Four digits at once: the
// even and odd bytes' products b * 3^k in 16-bit lanes (at most
// 255 * 81 < 2^16: no lane carries into the next), their low bytes times 3
// (< 768) in 16-bit lanes, whose high bytes are the digits.

namespace ws {

// Digit k of each byte of w, one a byte, for m = 3^k.
WS_HD uint32_t trits4(uint32_t w, uint32_t m) {
    uint32_t ev = ((w & 0x00FF00FFu) * m) & 0x00FF00FFu, od = (((w >> 8) & 0x00FF00FFu) * m) & 0x00FF00FFu;
    return byte_perm(ev * 3u, od * 3u, 0x7351);
}

struct TQ1 {
    static constexpr uint32_t UNITS = 16, ELEMS = tq1_0::ELEMS, BYTES = tq1_0::BYTES;
    // Word i: bytes off + step * i, multiplier byte i of m; outputs at lo.
    struct Lane {
        uint32_t off, step, m, lo;
    };
    struct Raw {
        uint32_t h, w[4];
    };
    static WS_HD Lane lane(uint32_t j) {
        const uint32_t pow3 = 0x1B090301u;  // 1, 3, 9, 27 (81: 0x51)
        uint32_t k = j < 10 ? j / 2 : j - 10, m = (k == 4 ? 0x51u : (pow3 >> (8 * k)) & 0xFFu) * 0x01010101u;
        if (j == 15) return Lane{tq1_0::QH, 0, pow3, 16 * j};
        return Lane{j < 10 ? tq1_0::QS + 16 * (j % 2) : tq1_0::QS + 32, 4, m, 16 * j};
    }
    static WS_HD Raw load(const uint8_t* blk, const Lane& L) {
        Raw r;
        r.h = load_u16(blk + tq1_0::D);
        WS_UNROLL
        for (int i = 0; i < 4; i++) r.w[i] = load_u32_even(blk + L.off + L.step * i);
        return r;
    }
    template <class Out>
    static WS_HD void put(uint16_t* dst, const Raw& r, const Lane& L, const float*) {
        Tab4 t = tab4<Out>(r.h);
        uint32_t c[4];
        WS_UNROLL
        for (int i = 0; i < 4; i++) c[i] = trits4(r.w[i], (L.m >> (8 * i)) & 0xFFu);
        store8_codes(dst + L.lo, t, c[0], c[1]);
        store8_codes(dst + L.lo + 8, t, c[2], c[3]);
    }
};

// TQ2_0: 64 bytes of 2-bit values laid out as Q2_K's, f16 d;
// x = d * (q - 1). Element e: bits 2((e % 128) / 32) of qs[32(e / 128) + e % 32].
// Unit j (0..15): 8 bytes qs[32h + 8g ..] (h = j / 8, g = j % 4), the
// crumbs at bits 4p and 4p + 2 (p = (j / 4) % 2): elements
// 128h + 64p + 8g .. + 8 and 32 further.
struct TQ2 {
    static constexpr uint32_t UNITS = 16, ELEMS = tq2_0::ELEMS, BYTES = tq2_0::BYTES;
    struct Lane {
        uint32_t qs, lo, s;
    };
    struct Raw {
        uint32_t h, w0, w1;
    };
    static WS_HD Lane lane(uint32_t j) {
        uint32_t h = j / 8, g = j % 4, p = (j / 4) % 2;
        return Lane{tq2_0::QS + 32 * h + 8 * g, 128 * h + 64 * p + 8 * g, 4 * p};
    }
    static WS_HD Raw load(const uint8_t* blk, const Lane& L) {
        return Raw{load_u16(blk + tq2_0::D), load_u32_even(blk + L.qs), load_u32_even(blk + L.qs + 4)};
    }
    template <class Out>
    static WS_HD void put(uint16_t* dst, const Raw& r, const Lane& L, const float*) {
        Tab4 t = tab4<Out>(r.h);
        WS_UNROLL
        for (uint32_t k = 0; k < 2; k++) {
            uint32_t s = L.s + 2 * k;
            store8_codes(dst + L.lo + 32 * k, t, (r.w0 >> s) & 0x03030303u, (r.w1 >> s) & 0x03030303u);
        }
    }
};

}  // namespace ws

WS_UNIT_KERNEL(tq1_0, TQ1)
WS_UNIT_KERNEL(tq2_0, TQ2)
