// Grid (codebook) i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M)
// -> BF16 or float16 (Out, common.cuh).
// One family per file, the same family names as the CPU kernels'
// (crates/weightstream-dequant/src/{scalar,x86,arm}/grid.rs).
//
// Thread group g writes elements e0 = 8 (g % 32) .. e0 + 7 of super-block
// g / 32 (a warp: one super-block). Each format is a struct of `lane(k)`
// (what depends only on k = g % 32: offsets and shifts), `load(blk, lane)`
// (every bit the group needs, its grid's selector entry included: see
// below) and `put<Out>(dst, raw, lane)`, run by common.cuh block_thread
// (two groups a trip, lane hoisted, 32-bit indices on every launch of the
// executor; the general loop otherwise).
//
// Every output of a group is one of a few values (docs/numerics.md, "CUDA
// grid kernels"): IQ2's (db * g) * +-1 for g in {8, 25, 43}, IQ3's for 8
// levels g, IQ1's dl * (g + delta) for g in {-1, 0, 1}. Where the group's
// f16 d is finite, `put` computes those values with the reference's own
// operations, rounds each once without the NaN test (none is a NaN: a
// finite d times at most 31 * 62 is finite), and picks every output from
// that table with a byte permute (PRMT): the grids are generated as
// selectors (block_tables.cuh *_SEL, scripts/gen_block_tables.py).
// A negative sign flips bit 15 of the picked value: the product by -1 is
// exact and rounding to nearest even is symmetric (for BF16 and float16
// alike, on any value that is not a NaN). Where d is infinite or NaN, the
// reference formula element by element (`ref`, the code before issue 56,
// out of line on the GPU). kernels/tests/iq_grid_exhaustive.rs holds
// `put` to the reference formula.
#include "iquant.cuh"

namespace ws {

// Out's bits of a value that is not a NaN, in bits 16..31 (bits 0..15
// anything): BF16's rounding leaves it there (common.cuh bf16_round_high).
template <class Out>
struct High;
template <>
struct High<Bf16Out> {
    static WS_HD uint32_t of(float x) { return bf16_round_high(x); }
};
template <>
struct High<F16Out> {
    static WS_HD uint32_t of(float x) { return (uint32_t)f32_to_f16_nonan(x) << 16; }
};

// The sign bits 2i and 2i + 1 of s (s < 2^8) at bits 15 and 31: s times
// 2^(15 - 2i) + 2^(30 - 2i) puts bit 2i at 15 and bit 2i + 1 at 31 (the
// two shifted copies of s do not overlap, so nothing carries).
WS_HD uint32_t sign_pair(uint32_t s, int i) { return (s * ((1u << (15 - 2 * i)) + (1u << (30 - 2 * i)))) & 0x80008000u; }

// A table of 3 values as two words for PRMT: value 0 at bytes 0-1, 1 at
// 2-3 (a), 2 at 6-7 (b's high half): selector bytes 0x10, 0x32, 0x76
// (gen_block_tables.py SEL3).
struct Tab3 {
    uint32_t a, b;
};
template <class Out>
WS_HD Tab3 tab3(float x0, float x1, float x2) {
    return Tab3{high_halves(High<Out>::of(x0), High<Out>::of(x1)), High<Out>::of(x2)};
}

// 8 outputs from a 3-value table: selector bytes sel0 (outputs 0..3), sel1
// (4..7), the sign bits s (bit j: output j negated).
WS_HD void pick3(const Tab3& t, uint32_t sel0, uint32_t sel1, uint32_t s, uint32_t o[4]) {
    uint32_t sel[4] = {sel0, sel0 >> 16, sel1, sel1 >> 16};
    WS_UNROLL
    for (int i = 0; i < 4; i++) o[i] = byte_perm(t.a, t.b, sel[i]) ^ sign_pair(s, i);
}

// A table of 8 values as byte planes: low bytes of values 0..3, 4..7 (lo0,
// lo1) and high bytes (hi0, hi1), so one PRMT picks 4 low (or high) bytes
// by 4 index nibbles.
struct Tab8 {
    uint32_t lo0, lo1, hi0, hi1;
};
template <class Out>
WS_HD Tab8 tab8(const float x[8]) {
    uint32_t t[4];  // [lo 2i, lo 2i + 1, hi 2i, hi 2i + 1]
    WS_UNROLL
    for (int i = 0; i < 4; i++) t[i] = byte_perm(High<Out>::of(x[2 * i]), High<Out>::of(x[2 * i + 1]), 0x7362);
    return Tab8{byte_perm(t[0], t[1], 0x5410), byte_perm(t[2], t[3], 0x5410), byte_perm(t[0], t[1], 0x7632), byte_perm(t[2], t[3], 0x7632)};
}

// 8 outputs from an 8-value table: index nibbles sel0 (outputs 0..3),
// sel1 (4..7), sign bits s.
WS_HD void pick8(const Tab8& t, uint32_t sel0, uint32_t sel1, uint32_t s, uint32_t o[4]) {
    uint32_t sel[2] = {sel0, sel1};
    WS_UNROLL
    for (int i = 0; i < 2; i++) {
        uint32_t lo = byte_perm(t.lo0, t.lo1, sel[i]), hi = byte_perm(t.hi0, t.hi1, sel[i]);
        o[2 * i] = byte_perm(lo, hi, 0x5140) ^ sign_pair(s, 2 * i);
        o[2 * i + 1] = byte_perm(lo, hi, 0x7362) ^ sign_pair(s, 2 * i + 1);
    }
}

// What a group loads, every format: d's f16 bits, the bits its sub-block
// scale comes from (F::scale), the 8 sign bits (IQ1: the delta's sign
// flag), the grid index (IQ3: two, the second in bits 16..31) for the
// reference, and the selector entry (sel0, sel1: above).
struct GridRaw {
    uint32_t h, sc, s, idx, sel0, sel1;
};

// IQ2 and IQ3 (F::LEVELS values g, F::level(k) the k-th): (db * g) * +-1.
template <class F, class Out>
WS_COLD void signed_ref(uint16_t* dst, GridRaw r) {
    uint16_t out[8];
    grid_signed8<Out>(F::scale(f16_to_f32((uint16_t)r.h), r), F::entry(r), r.s, out);
    store8(dst, out, 8);
}

template <class F, class Out>
WS_HD void signed_put(uint16_t* dst, const GridRaw& r) {
    if (!f16_finite(r.h)) return signed_ref<F, Out>(dst, r);
    float db = F::scale(f16_finite_to_f32(r.h), r);
    uint32_t o[4];
    if (F::LEVELS == 3) {
        pick3(tab3<Out>(mul(db, F::level(0)), mul(db, F::level(1)), mul(db, F::level(2))), r.sel0, r.sel1, r.s, o);
    } else {
        float x[8];
        WS_UNROLL
        for (int k = 0; k < 8; k++) x[k] = mul(db, F::level(k));
        pick8(tab8<Out>(x), r.sel0, r.sel1, r.s, o);
    }
    store8_words(dst, o);
}

// IQ1: dl * (g + delta), g in {-1, 0, 1}, delta -0.125 where r.s is set.
template <class F, class Out>
WS_COLD void delta_ref(uint16_t* dst, GridRaw r) {
    uint16_t out[8];
    grid_delta8<Out>(F::scale(f16_to_f32((uint16_t)r.h), r), IQ1S_GRID[r.idx], iq1_delta(r.s != 0), out);
    store8(dst, out, 8);
}

template <class F, class Out>
WS_HD void delta_put(uint16_t* dst, const GridRaw& r) {
    if (!f16_finite(r.h)) return delta_ref<F, Out>(dst, r);
    float dl = F::scale(f16_finite_to_f32(r.h), r), delta = iq1_delta(r.s != 0);
    uint32_t o[4];
    pick3(tab3<Out>(mul(dl, add(-1.0f, delta)), mul(dl, add(0.0f, delta)), mul(dl, add(1.0f, delta))), r.sel0, r.sel1, 0, o);
    store8_words(dst, o);
}

// A group's GridRaw with a 3-value grid's selector entry (u64).
WS_HD GridRaw raw3(uint32_t h, uint32_t sc, uint32_t s, uint32_t idx, uint64_t sel) {
    return GridRaw{h, sc, s, idx, (uint32_t)sel, (uint32_t)(sel >> 32)};
}

// What every format F shares: its Raw, and `put`: signed outputs (IQ2,
// IQ3: F::LEVELS levels) or, for LEVELS 0, IQ1's.
template <class F>
struct GridFormat {
    using Raw = GridRaw;
    template <class Out, class Lane>
    static WS_HD void put(uint16_t* dst, const GridRaw& r, const Lane&) {
        if constexpr (F::LEVELS != 0)
            signed_put<F, Out>(dst, r);
        else
            delta_put<F, Out>(dst, r);
    }
};

// IQ2 (F: IQ2_XXS, IQ2_XS, IQ2_S): levels 8, 25, 43 (gguf-py's grid_map),
// db = (d * (0.5 + s)) * 0.25, x = (db * grid[j]) * +-1.
template <class F>
struct Iq2 : GridFormat<F> {
    static constexpr uint32_t LEVELS = 3;
    static WS_HD float level(int k) { return k == 0 ? 8.0f : k == 1 ? 25.0f : 43.0f; }
    static WS_HD float scale(float d, const GridRaw& r) { return half_step_scale(d, r.sc, 0.25f); }
};

// IQ2_XXS: f16 d; per 32 elements two u32: four grid index bytes, and
// four 7-bit sign indices (KSIGNS) with the 4-bit scale s on top.
struct Iq2Xxs : Iq2<Iq2Xxs> {
    static constexpr uint32_t BYTES = iq2_xxs::BYTES;
    struct Lane {
        uint32_t idx, aux, shift;  // offsets of the index byte and the aux u32; 7 l
    };
    static WS_HD Lane lane(uint32_t k) { return Lane{iq2_xxs::QS + 8 * (k / 4) + k % 4, iq2_xxs::QS + 8 * (k / 4) + 4, 7 * (k % 4)}; }
    static WS_HD GridRaw load(const uint8_t* blk, const Lane& L) {
        uint32_t aux = load_u32_even(blk + L.aux), idx = blk[L.idx];
        return raw3(load_u16(blk + iq2_xxs::D), aux >> 28, KSIGNS[(aux >> L.shift) & 0x7Fu], idx, IQ2XXS_SEL[idx]);
    }
    static WS_HD uint64_t entry(const GridRaw& r) { return IQ2XXS_GRID[r.idx]; }
};

// IQ2_XS: f16 d; per 8 elements a u16 (9-bit grid index, 7-bit sign
// index); a 4-bit scale per 16.
struct Iq2Xs : Iq2<Iq2Xs> {
    static constexpr uint32_t BYTES = iq2_xs::BYTES;
    struct Lane {
        uint32_t q, sc, shift;  // offsets of the u16 and the scale byte; the nibble's shift
    };
    static WS_HD Lane lane(uint32_t k) { return Lane{iq2_xs::QS + 2 * k, iq2_xs::SCALES + k / 4, 4 * (k / 2 % 2)}; }
    static WS_HD GridRaw load(const uint8_t* blk, const Lane& L) {
        uint32_t q = load_u16(blk + L.q), idx = q & 511u;
        return raw3(load_u16(blk + iq2_xs::D), (blk[L.sc] >> L.shift) & 0xFu, KSIGNS[q >> 9], idx, IQ2XS_SEL[idx]);
    }
    static WS_HD uint64_t entry(const GridRaw& r) { return IQ2XS_GRID[r.idx]; }
};

// IQ2_S: f16 d; per 8 elements a grid index byte with 2 high bits from qh
// and an explicit sign byte; a 4-bit scale per 16.
struct Iq2S : Iq2<Iq2S> {
    static constexpr uint32_t BYTES = iq2_s::BYTES;
    struct Lane {
        uint32_t qs, qh, hshift, sshift;  // offsets of the index and qh bytes (signs, scales after them)
    };
    static WS_HD Lane lane(uint32_t k) { return Lane{iq2_s::QS + k, iq2_s::QH + k / 4, 2 * (k % 4), 4 * (k / 2 % 2)}; }
    static WS_HD GridRaw load(const uint8_t* blk, const Lane& L) {
        uint32_t idx = blk[L.qs] | (((uint32_t)blk[L.qh] >> L.hshift & 3u) << 8);
        uint32_t sc = (blk[L.qh + (iq2_s::SCALES - iq2_s::QH)] >> L.sshift) & 0xFu;
        return raw3(load_u16(blk + iq2_s::D), sc, blk[L.qs + (iq2_s::SIGNS - iq2_s::QS)], idx, IQ2S_SEL[idx]);
    }
    static WS_HD uint64_t entry(const GridRaw& r) { return IQ2S_GRID[r.idx]; }
};

// IQ3 (F: IQ3_XXS, IQ3_S): 8 levels, grid entries of 4 values, two a
// group (GridRaw idx: i0 | i1 << 16; sel0, sel1: their selectors);
// x = (db * grid[j]) * +-1.
template <class F>
struct Iq3 : GridFormat<F> {
    static constexpr uint32_t LEVELS = 8;
};

// A group's GridRaw with two entries of an 8-value grid: their indices
// i0, i1 and selector grid `sel`.
WS_HD GridRaw raw8(uint32_t h, uint32_t sc, uint32_t s, uint32_t i0, uint32_t i1, const uint16_t* sel) {
    return GridRaw{h, sc, s, i0 | i1 << 16, sel[i0], sel[i1]};
}

// IQ3_XXS: f16 d; 64 grid index bytes (levels 4, 12, .., 52, 62); per 32
// elements a u32 of four 7-bit sign indices and the 4-bit scale s;
// db = (d * (0.5 + s)) * 0.5.
struct Iq3Xxs : Iq3<Iq3Xxs> {
    static constexpr uint32_t BYTES = iq3_xxs::BYTES;
    struct Lane {
        uint32_t idx, aux, shift;  // offsets of the two index bytes and the aux u32; 7 l
    };
    static WS_HD Lane lane(uint32_t k) { return Lane{iq3_xxs::QS + 2 * k, iq3_xxs::SCALES + 4 * (k / 4), 7 * (k % 4)}; }
    static WS_HD GridRaw load(const uint8_t* blk, const Lane& L) {
        uint32_t aux = load_u32_even(blk + L.aux), w = load_u16(blk + L.idx);
        return raw8(load_u16(blk + iq3_xxs::D), aux >> 28, KSIGNS[(aux >> L.shift) & 0x7Fu], w & 0xFFu, w >> 8, IQ3XXS_SEL);
    }
    static WS_HD float level(int k) { return k == 7 ? 62.0f : (float)(8 * k + 4); }
    static WS_HD float scale(float d, const GridRaw& r) { return half_step_scale(d, r.sc, 0.5f); }
    static WS_HD uint64_t entry(const GridRaw& r) { return IQ3XXS_GRID[r.idx & 0xFFFFu] | ((uint64_t)IQ3XXS_GRID[r.idx >> 16] << 32); }
};

// IQ3_S: f16 d; per 4 elements a grid index byte (levels 1, 3, .., 15)
// with a ninth bit from qh; sign bytes per 8; a 4-bit scale s per 32:
// db = d * (1 + 2s).
struct Iq3S : Iq3<Iq3S> {
    static constexpr uint32_t BYTES = iq3_s::BYTES;
    struct Lane {
        uint32_t k, qh, hshift, sc, sshift;  // offsets of the qh and scale bytes, their shifts
    };
    static WS_HD Lane lane(uint32_t k) { return Lane{k, iq3_s::QH + k / 4, 2 * (k % 4), iq3_s::SCALES + k / 8, 4 * (k / 4 % 2)}; }
    static WS_HD GridRaw load(const uint8_t* blk, const Lane& L) {
        uint32_t w = load_u16(blk + iq3_s::QS + 2 * L.k), hb = (uint32_t)blk[L.qh] >> L.hshift;
        uint32_t i0 = (w & 0xFFu) | (hb & 1u) << 8, i1 = (w >> 8) | (hb & 2u) << 7;
        return raw8(load_u16(blk + iq3_s::D), (blk[L.sc] >> L.sshift) & 0xFu, blk[iq3_s::SIGNS + L.k], i0, i1, IQ3S_SEL);
    }
    static WS_HD float level(int k) { return (float)(2 * k + 1); }
    static WS_HD float scale(float d, const GridRaw& r) { return mul(d, (float)(1 + 2 * r.sc)); }
    static WS_HD uint64_t entry(const GridRaw& r) { return IQ3S_GRID[r.idx & 0xFFFFu] | ((uint64_t)IQ3S_GRID[r.idx >> 16] << 32); }
};

// IQ1 (F: IQ1_S, IQ1_M): grid values -1, 0, 1 (IQ1S_GRID, GridRaw idx),
// the 3-bit scale s in GridRaw sc, the delta's sign flag in GridRaw s;
// x = (d * (2s + 1)) * (grid[j] + delta).
template <class F>
struct Iq1 : GridFormat<F> {
    static constexpr uint32_t LEVELS = 0;
    static WS_HD float scale(float d, const GridRaw& r) { return mul(d, (float)(2 * r.sc + 1)); }
};

// IQ1_S: f16 d; 32 grid index bytes; per 32 elements a u16 qh of four
// 3-bit high index parts, the scale s (bits 12..14) and the delta's sign
// (bit 15).
struct Iq1S : Iq1<Iq1S> {
    static constexpr uint32_t BYTES = iq1_s::BYTES;
    struct Lane {
        uint32_t k, qh, shift;  // offset of qh; 3 l
    };
    static WS_HD Lane lane(uint32_t k) { return Lane{k, iq1_s::QH + 2 * (k / 4), 3 * (k % 4)}; }
    static WS_HD GridRaw load(const uint8_t* blk, const Lane& L) {
        uint32_t qh = load_u16(blk + L.qh), idx = blk[iq1_s::QS + L.k] | ((qh >> L.shift) & 7u) << 8;
        return raw3(load_u16(blk + iq1_s::D), (qh >> 12) & 7u, qh & 0x8000u, idx, IQ1S_SEL[idx]);
    }
};

// IQ1_M: 32 grid index bytes; per 8 elements a nibble of qh (3 high index
// bits, the delta's sign); four u16 scales holding a 3-bit s per 16
// elements, their top nibbles together the f16 d.
struct Iq1M : Iq1<Iq1M> {
    static constexpr uint32_t BYTES = iq1_m::BYTES;
    struct Lane {
        uint32_t k, sc, sshift, qh, hshift;  // offsets of the scale u16 and the qh byte, their shifts
    };
    static WS_HD Lane lane(uint32_t k) { return Lane{k, iq1_m::SCALES + 2 * (k / 8), 3 * (k / 2 % 4), iq1_m::QH + k / 2, 4 * (k % 2)}; }
    static WS_HD GridRaw load(const uint8_t* blk, const Lane& L) {
        const uint8_t* sc = blk + iq1_m::SCALES;
        uint32_t s0 = load_u16(sc), s1 = load_u16(sc + 2), s2 = load_u16(sc + 4), s3 = load_u16(sc + 6);
        uint32_t h = (s0 >> 12) | ((s1 >> 8) & 0x00F0u) | ((s2 >> 4) & 0x0F00u) | (s3 & 0xF000u);
        uint32_t q = (uint32_t)blk[L.qh] >> L.hshift, idx = blk[iq1_m::QS + L.k] | (q & 7u) << 8;
        return raw3(h, (load_u16(blk + L.sc) >> L.sshift) & 7u, q & 8u, idx, IQ1S_SEL[idx]);
    }
};

#define WS_GRID_THREAD(NAME, F)                                                    \
    template <class Out>                                                           \
    WS_HD void NAME##_thread(const uint8_t* src, uint16_t* dst, uint64_t n, Coords c) { \
        block_thread<F, 32, Out>(src, dst, n, c);                                  \
    }
WS_GRID_THREAD(iq2_xxs, Iq2Xxs)
WS_GRID_THREAD(iq2_xs, Iq2Xs)
WS_GRID_THREAD(iq2_s, Iq2S)
WS_GRID_THREAD(iq3_xxs, Iq3Xxs)
WS_GRID_THREAD(iq3_s, Iq3S)
WS_GRID_THREAD(iq1_s, Iq1S)
WS_GRID_THREAD(iq1_m, Iq1M)

}  // namespace ws

// At most 32 registers (8 blocks of 256 per SM), as the legacy kernels.
// (WS_..._KERNEL(name) lines are how build/mirror.rs finds the kernels.)
#define WS_GRID_KERNEL(NAME) WS_BLOCK_KERNEL_ENTRY_BOUNDED(NAME, __launch_bounds__(256, 8))
WS_GRID_KERNEL(iq2_xxs)
WS_GRID_KERNEL(iq2_xs)
WS_GRID_KERNEL(iq2_s)
WS_GRID_KERNEL(iq3_xxs)
WS_GRID_KERNEL(iq3_s)
WS_GRID_KERNEL(iq1_s)
WS_GRID_KERNEL(iq1_m)
