// Legacy 32-element block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0)
// -> BF16 or float16 (Out, common.cuh).
// One family per file, the same family names as the CPU kernels'
// (crates/weightstream-dequant/src/{scalar,x86,arm}/legacy.rs).
//
// Thread group g writes elements 8g..8g+7: block g / 4, quarter k = g % 4
// (legacy.cuh). A warp writes 512 contiguous bytes with 16-byte stores.
// Each format is a struct of:
// - `Lane lane(k)`: what depends only on the quarter;
// - `Raw load(blk, lane)`: the group's loaded bits (the f16 fields and the
//   two words of its 8 codes), every load issued before any decision;
// - `put<Out>(dst, raw, lane)`: the 8 outputs. When the block's f16
//   fields are finite, codes become f32 by the magic number (legacy.cuh
//   `magic8`: the reference's own products, exactly) and round without
//   the NaN test, which no value can take there (a finite f16 times a
//   code of at most 8 bits, plus a finite f16 m, is finite, and never a
//   NaN); otherwise `ref`, the reference formula element by element (the
//   kernels' code before issue 56), out of line on the GPU.
// kernels/tests/legacy_exhaustive.rs holds `put` to the reference formula
// on every f16 d (finite or not) and every code at every position.
//
// The grid-stride loop (legacy_thread, common.cuh block_thread): when the
// stride is a multiple of 4 (every launch of the executor: blocks of 256
// threads) and the group indices fit in 32 bits, the quarter is the same
// for all of a thread's groups (its constants are hoisted), indices are
// 32-bit, and each trip loads two groups (g, g + stride) before converting
// either. Otherwise (the host grid's odd geometries, or over 2^35 outputs)
// the general 64-bit loop, one group a trip, out of line.
#include "legacy.cuh"

namespace ws {

// The grid-stride loop over a legacy format F (above; common.cuh
// block_thread: four groups a block).
template <class F, class Out>
WS_HD void legacy_thread(const uint8_t* src, uint16_t* dst, uint64_t n, Coords c) {
    block_thread<F, 4, Out>(src, dst, n, c);
}

// What a group of every legacy format carries: its quarter k, where its
// codes start (qs) and their magic-number constants; then its loaded bits,
// the block's f16 fields (hm: Q4_1's and Q5_1's m, else 0) and the two
// words of its 8 codes.
struct LegacyLane {
    uint32_t k, qs;
    Magic m;
};
struct LegacyRaw {
    uint32_t h, hm, w0, w1;
};

// The 8 outputs of a group whose codes sit in r.w0, r.w1 as L.m says:
// with the block's f16 fields finite, magic8 and the rounding without the
// NaN test (HAS_M: plus the reference's rounded add of m); otherwise F's
// reference formula, out of line. One body for all five formats.
template <class F, bool HAS_M, class Out>
WS_HD void magic_put(uint16_t* dst, const typename F::Raw& r, const typename F::Lane& L) {
    if (!f16_finite(r.h) || (HAS_M && !f16_finite(r.hm))) return F::template ref<Out>(dst, r, L.k);
    float x[8], m = HAS_M ? f16_finite_to_f32(r.hm) : 0.0f;
    magic8(r.h, r.w0, r.w1, L.m, x);
    uint32_t o[4];
    WS_UNROLL
    for (int i = 0; i < 4; i++) o[i] = HAS_M ? Out::pack2_nonan(add(x[2 * i], m), add(x[2 * i + 1], m)) : Out::pack2_nonan(x[2 * i], x[2 * i + 1]);
    store8_words(dst, o);
}

// Q4_0: a block is f16 d + 16 bytes; element j (j < 16) is the low
// nibble of qs[j], element j + 16 the high nibble; x = d * (q - 8).
struct Q4_0 {
    static constexpr uint32_t BYTES = q4_0::BYTES;
    using Lane = LegacyLane;
    using Raw = LegacyRaw;
    static WS_HD Lane lane(uint32_t k) { return Lane{k, q4_0::QS + 8 * (k & 1u), magic_lane(0xFu, 4 * (k >> 1), 8)}; }
    static WS_HD Raw load(const uint8_t* blk, const Lane& L) {
        return Raw{load_u16(blk + q4_0::D), 0u, load_u32_even(blk + L.qs), load_u32_even(blk + L.qs + 4)};
    }
    template <class Out>
    static WS_COLD void ref(uint16_t* dst, Raw r, uint32_t k) {
        float d = f16_to_f32((uint16_t)r.h);
        uint16_t out[8];
        WS_UNROLL
        for (int j = 0; j < 8; j++) out[j] = Out::from_f32(mul(d, (float)((int)word_nibble(r.w0, r.w1, j, 4 * (k >> 1)) - 8)));
        store8(dst, out, 8);
    }
    template <class Out>
    static WS_HD void put(uint16_t* dst, Raw r, const Lane& L) { magic_put<Q4_0, false, Out>(dst, r, L); }
};

// Q4_1: a block is f16 d, f16 m + 16 bytes of nibbles (as Q4_0);
// x = (d * q) + m, each operation rounded (gguf-py's order; no FMA).
struct Q4_1 {
    static constexpr uint32_t BYTES = q4_1::BYTES;
    using Lane = LegacyLane;
    using Raw = LegacyRaw;
    static WS_HD Lane lane(uint32_t k) { return Lane{k, q4_1::QS + 8 * (k & 1u), magic_lane(0xFu, 4 * (k >> 1), 0)}; }
    static WS_HD Raw load(const uint8_t* blk, const Lane& L) {
        return Raw{load_u16(blk + q4_1::D), load_u16(blk + q4_1::M), load_u32_even(blk + L.qs), load_u32_even(blk + L.qs + 4)};
    }
    template <class Out>
    static WS_COLD void ref(uint16_t* dst, Raw r, uint32_t k) {
        float d = f16_to_f32((uint16_t)r.h), m = f16_to_f32((uint16_t)r.hm);
        uint16_t out[8];
        WS_UNROLL
        for (int j = 0; j < 8; j++) out[j] = Out::from_f32(add(mul(d, (float)word_nibble(r.w0, r.w1, j, 4 * (k >> 1))), m));
        store8(dst, out, 8);
    }
    template <class Out>
    static WS_HD void put(uint16_t* dst, Raw r, const Lane& L) { magic_put<Q4_1, true, Out>(dst, r, L); }
};

// Q5_0: a block is f16 d, a u32 of high bits, 16 bytes of low
// nibbles (as Q4_0); element j's bit 4 is bit j of qh; x = d * (q - 16).
// Q5_1: f16 d, f16 m, qh, qs; q as in Q5_0 but unsigned; x = (d * q) + m.
// One struct for both (HAS_M: Q5_1).
template <bool HAS_M>
struct Q5 {
    static constexpr uint32_t BYTES = HAS_M ? q5_1::BYTES : q5_0::BYTES;
    static constexpr uint32_t D = HAS_M ? q5_1::D : q5_0::D, QH = HAS_M ? q5_1::QH : q5_0::QH;
    static constexpr uint32_t QS = HAS_M ? q5_1::QS : q5_0::QS;
    using Lane = LegacyLane;
    // Raw's w0, w1: the 5-bit codes, one a byte (legacy.cuh five_bit_bytes).
    using Raw = LegacyRaw;
    static WS_HD Lane lane(uint32_t k) { return Lane{k, QS + 8 * (k & 1u), magic_lane(0x1Fu, 0, HAS_M ? 0 : 16)}; }
    static WS_HD Raw load(const uint8_t* blk, const Lane& L) {
        uint32_t qh = qh_word(blk + QH) >> (8 * L.k), s = 4 * (L.k >> 1);
        return Raw{load_u16(blk + D), HAS_M ? (uint32_t)load_u16(blk + q5_1::M) : 0u,
                   five_bit_bytes(load_u32_even(blk + L.qs), s, qh), five_bit_bytes(load_u32_even(blk + L.qs + 4), s, qh >> 4)};
    }
    template <class Out>
    static WS_COLD void ref(uint16_t* dst, Raw r, uint32_t) {
        float d = f16_to_f32((uint16_t)r.h), m = f16_to_f32((uint16_t)r.hm);
        uint16_t out[8];
        WS_UNROLL
        for (int j = 0; j < 8; j++) {
            uint32_t q = ((j < 4 ? r.w0 : r.w1) >> (8 * (j % 4))) & 0x1Fu;
            out[j] = Out::from_f32(HAS_M ? add(mul(d, (float)q), m) : mul(d, (float)((int)q - 16)));
        }
        store8(dst, out, 8);
    }
    template <class Out>
    static WS_HD void put(uint16_t* dst, Raw r, const Lane& L) { magic_put<Q5, HAS_M, Out>(dst, r, L); }
};

// Q8_0: a block is f16 d + 32 int8; x = d * q.
struct Q8_0 {
    static constexpr uint32_t BYTES = q8_0::BYTES;
    using Lane = LegacyLane;
    // Raw's w0, w1: the int8 codes with bit 7 flipped, q + 128 (0..255).
    using Raw = LegacyRaw;
    static WS_HD Lane lane(uint32_t k) { return Lane{k, q8_0::QS + 8 * k, magic_lane(0xFFu, 0, 128)}; }
    static WS_HD Raw load(const uint8_t* blk, const Lane& L) {
        return Raw{load_u16(blk + q8_0::D), 0u, load_u32_even(blk + L.qs) ^ 0x80808080u, load_u32_even(blk + L.qs + 4) ^ 0x80808080u};
    }
    template <class Out>
    static WS_COLD void ref(uint16_t* dst, Raw r, uint32_t) {
        float d = f16_to_f32((uint16_t)r.h);
        uint16_t out[8];
        WS_UNROLL
        for (int j = 0; j < 8; j++) out[j] = Out::from_f32(mul(d, (float)(int8_t)(((j < 4 ? r.w0 : r.w1) >> (8 * (j % 4))) ^ 0x80u)));
        store8(dst, out, 8);
    }
    template <class Out>
    static WS_HD void put(uint16_t* dst, Raw r, const Lane& L) { magic_put<Q8_0, false, Out>(dst, r, L); }
};

// The names the host grid and the entry points use (WS_BLOCK_KERNEL's).
template <class Out>
WS_HD void q4_0_thread(const uint8_t* src, uint16_t* dst, uint64_t n, Coords c) { legacy_thread<Q4_0, Out>(src, dst, n, c); }
template <class Out>
WS_HD void q4_1_thread(const uint8_t* src, uint16_t* dst, uint64_t n, Coords c) { legacy_thread<Q4_1, Out>(src, dst, n, c); }
template <class Out>
WS_HD void q5_0_thread(const uint8_t* src, uint16_t* dst, uint64_t n, Coords c) { legacy_thread<Q5<false>, Out>(src, dst, n, c); }
template <class Out>
WS_HD void q5_1_thread(const uint8_t* src, uint16_t* dst, uint64_t n, Coords c) { legacy_thread<Q5<true>, Out>(src, dst, n, c); }
template <class Out>
WS_HD void q8_0_thread(const uint8_t* src, uint16_t* dst, uint64_t n, Coords c) { legacy_thread<Q8_0, Out>(src, dst, n, c); }

}  // namespace ws

// At most 32 registers: two groups in flight a trip must not cost warps
// (8 blocks of 256 per SM, as before).
// (WS_..._KERNEL(name) lines are how build/mirror.rs finds the kernels.)
#define WS_LEGACY_KERNEL(NAME) WS_BLOCK_KERNEL_ENTRY_BOUNDED(NAME, __launch_bounds__(256, 8))
WS_LEGACY_KERNEL(q4_0)
WS_LEGACY_KERNEL(q4_1)
WS_LEGACY_KERNEL(q5_0)
WS_LEGACY_KERNEL(q5_1)
WS_LEGACY_KERNEL(q8_0)
