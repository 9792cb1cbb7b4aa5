// 4-bit codes through a 16-entry table (IQ4_NL, IQ4_XS, MXFP4, NVFP4)
// -> BF16 or float16 (Out, common.cuh).
// One family per file, the same family names as the CPU kernels'
// (crates/weightstream-dequant/src/{scalar,x86,arm}/lut4.rs).
//
// Every output is the reference's x = scale * (float)TABLE[q]: one rounded
// multiply of the block's (or sub-block's) f32 scale by the code's level
// (IQ4NL_VALUES, or E2M1_DOUBLED for FP4), rounded once to the output.
//
// A thread converts units of 16 outputs (units.cuh): the low and the high
// nibbles of 8 bytes of one block, two 8-output runs, one load of the codes
// and one scale decode for both. The levels sit as f32 in a 16-entry
// shared-memory table, filled once per CTA from the same int8 table the
// reference converts (one word per bank: lookups never conflict), read by
// byte offset: 4 x the nibble, taken from the word of codes two bytes'
// nibbles at a time ((w << 2) & 0x3C3C3C3C: the low nibbles times 4 in each
// byte; (w >> 2) & 0x3C3C3C3C: the high ones). The multiply is the
// reference's own, on the same two values.
//
// Rounding without the NaN test (pack2_nonan, equal to from_f32 on every
// non-NaN f32): no value here is a NaN when the scale is finite (a finite
// scale times a level of magnitude at most 127: finite or, for MXFP4's
// largest scales, an infinity; never inf * 0). MXFP4's e8m0_half and
// NVFP4's ue4m3_half are finite for every byte, so they always take it;
// IQ4_NL and IQ4_XS take it where the f16 d is finite, and otherwise
// `ref`, the reference formula with the NaN test, out of line.
// kernels/tests/lut4_exhaustive.rs holds `put` to the reference formula
// for every scale (every f16 d, every IQ4_XS sub-scale, every E8M0 and
// UE4M3 byte) times every code at every position, both outputs.
#include "iquant.cuh"
#include "legacy.cuh"
#include "units.cuh"

namespace ws {

// A unit's place in its block: its first code byte qs, its first output lo
// (the high nibbles' outputs at lo + F::HI), its sub-block k; and its
// loaded bits: the scale field(s) s and the 8 code bytes.
struct Lut4Lane {
    uint32_t qs, lo, k;
};
struct Lut4Raw {
    uint32_t s, w0, w1;
};

// The slow path: the reference formula, NaN test included.
template <class F, class Out>
WS_COLD void lut4_ref(uint16_t* dst, Lut4Raw r, Lut4Lane L, const float* tab) {
    float s = F::ref_scale(r.s, L);
    uint16_t lo[8], hi[8];
    WS_UNROLL
    for (int j = 0; j < 8; j++) {
        uint32_t b = ((j < 4 ? r.w0 : r.w1) >> (8 * (j % 4))) & 0xFFu;
        lo[j] = Out::from_f32(mul(s, tab[b & 0xFu]));
        hi[j] = Out::from_f32(mul(s, tab[b >> 4]));
    }
    store8(dst + L.lo, lo, 8);
    store8(dst + L.lo + F::HI, hi, 8);
}

// The 16 outputs of a unit: levels read by byte offset, times the scale.
template <class F, class Out>
WS_HD void lut4_put(uint16_t* dst, Lut4Raw r, const Lut4Lane& L, const float* tab) {
    if (!F::finite(r.s)) return lut4_ref<F, Out>(dst, r, L, tab);
    float s = F::scale(r.s, L), lo[8], hi[8];
    WS_UNROLL
    for (int i = 0; i < 2; i++) {
        uint32_t w = i ? r.w1 : r.w0, l4 = (w << 2) & 0x3C3C3C3Cu, h4 = (w >> 2) & 0x3C3C3C3Cu;
        WS_UNROLL
        for (int j = 0; j < 4; j++) {
            lo[4 * i + j] = mul(s, table_at(tab, (l4 >> (8 * j)) & 0xFFu));
            hi[4 * i + j] = mul(s, table_at(tab, (h4 >> (8 * j)) & 0xFFu));
        }
    }
    store8_nonan<Out>(dst + L.lo, lo);
    store8_nonan<Out>(dst + L.lo + F::HI, hi);
}

// What the four formats share (units.cuh's F). A format F defines UNITS,
// ELEMS, BYTES, HI, lane(j), load(blk, lane) and scale(s, lane); one whose
// scale can be infinite or NaN also `finite(s)` and the reference decode
// `ref_scale(s, lane)` (the defaults: every scale field finite, one decode).
template <class F>
struct Lut4 {
    using Lane = Lut4Lane;
    using Raw = Lut4Raw;
    static WS_HD bool finite(uint32_t) { return true; }
    static WS_HD float ref_scale(uint32_t s, const Lane& L) { return F::scale(s, L); }
    template <class Out>
    static WS_HD void put(uint16_t* dst, Raw r, const Lane& L, const float* tab) { lut4_put<F, Out>(dst, r, L, tab); }
};

// IQ4_NL: f16 d, 16 bytes of nibbles (as Q4_0's: low nibbles are elements
// 0..15, high 16..31); x = d * IQ4NL_VALUES[q]. Unit j (0, 1): bytes
// 8j..8j+7, elements 8j.. and 16 + 8j...
struct IQ4NL : Lut4<IQ4NL> {
    static constexpr uint32_t UNITS = 2, ELEMS = iq4_nl::ELEMS, BYTES = iq4_nl::BYTES, HI = 16;
    static WS_HD Lane lane(uint32_t j) { return Lane{iq4_nl::QS + 8 * j, 8 * j, 0}; }
    static WS_HD Raw load(const uint8_t* blk, const Lane& L) {
        return Raw{load_u16(blk + iq4_nl::D), load_u32_even(blk + L.qs), load_u32_even(blk + L.qs + 4)};
    }
    static WS_HD bool finite(uint32_t h) { return f16_finite(h); }
    static WS_HD float scale(uint32_t h, const Lane&) { return f16_finite_to_f32(h); }
    static WS_HD float ref_scale(uint32_t h, const Lane&) { return f16_to_f32((uint16_t)h); }
};

// IQ4_XS: f16 d, u16 scales_h, 4 bytes scales_l, 128 bytes of nibbles; per
// 32-element sub-block k a 6-bit scale (nibble k of scales_l, bits
// 2k..2k+1 of scales_h) minus 32 and 16 bytes laid out as IQ4_NL's;
// x = (d * (sc - 32)) * IQ4NL_VALUES[q]. Unit j (0..15): sub-block j / 2,
// its bytes 8(j % 2)... The scale field: d | sc << 16.
struct IQ4XS : Lut4<IQ4XS> {
    static constexpr uint32_t UNITS = 16, ELEMS = iq4_xs::ELEMS, BYTES = iq4_xs::BYTES, HI = 16;
    static WS_HD Lane lane(uint32_t j) { return Lane{iq4_xs::QS + 16 * (j / 2) + 8 * (j % 2), 32 * (j / 2) + 8 * (j % 2), j / 2}; }
    static WS_HD Raw load(const uint8_t* blk, const Lane& L) {
        uint32_t lo = (blk[iq4_xs::SCALES_L + L.k / 2] >> (4 * (L.k % 2))) & 0xFu;
        uint32_t hi = (load_u16(blk + iq4_xs::SCALES_H) >> (2 * L.k)) & 3u;
        return Raw{load_u16(blk + iq4_xs::D) | (lo << 16) | (hi << 20), load_u32_even(blk + L.qs), load_u32_even(blk + L.qs + 4)};
    }
    static WS_HD bool finite(uint32_t s) { return f16_finite(s); }
    static WS_HD float scale(uint32_t s, const Lane&) { return mul(f16_finite_to_f32(s & 0xFFFFu), (float)((int)(s >> 16) - 32)); }
    static WS_HD float ref_scale(uint32_t s, const Lane&) { return mul(f16_to_f32((uint16_t)s), (float)((int)(s >> 16) - 32)); }
};

// MXFP4: E8M0 e, 16 bytes of E2M1 nibbles (low, then high);
// x = 2^(e-128) * E2M1_DOUBLED[q]. Blocks are 17 bytes, so they start at odd
// addresses: bytes are read one by one. Units as IQ4_NL's.
struct MXFP4 : Lut4<MXFP4> {
    static constexpr uint32_t UNITS = 2, ELEMS = mxfp4::ELEMS, BYTES = mxfp4::BYTES, HI = 16;
    static WS_HD Lane lane(uint32_t j) { return Lane{mxfp4::QS + 8 * j, 8 * j, 0}; }
    static WS_HD Raw load(const uint8_t* blk, const Lane& L) {
        uint8_t b[8];
        load8_any(blk + L.qs, b);
        return Raw{blk[mxfp4::E], b[0] | (b[1] << 8) | (b[2] << 16) | ((uint32_t)b[3] << 24),
                   b[4] | (b[5] << 8) | (b[6] << 16) | ((uint32_t)b[7] << 24)};
    }
    static WS_HD float scale(uint32_t e, const Lane&) { return e8m0_half(e); }
};

// NVFP4: 4 UE4M3 scales (one per 16 elements), 32 bytes of E2M1 nibbles:
// sub-block k's 8 bytes, low nibbles then high; x = (s / 2) * E2M1_DOUBLED[q].
// Unit k (0..3): sub-block k, elements 16k.. and 16k + 8...
struct NVFP4 : Lut4<NVFP4> {
    static constexpr uint32_t UNITS = 4, ELEMS = nvfp4::ELEMS, BYTES = nvfp4::BYTES, HI = 8;
    static WS_HD Lane lane(uint32_t k) { return Lane{nvfp4::QS + 8 * k, 16 * k, k}; }
    static WS_HD Raw load(const uint8_t* blk, const Lane& L) {
        return Raw{blk[nvfp4::D + L.k], load_u32_even(blk + L.qs), load_u32_even(blk + L.qs + 4)};
    }
    static WS_HD float scale(uint32_t s, const Lane&) { return ue4m3_half(s); }
};

// The level tables as f32, (float)TABLE[q] exactly (the host's; the GPU
// fills the same values into shared memory, WS_LUT4_KERNEL).
struct Levels {
    float v[16];
};
WS_HD Levels levels_of(const int8_t* t) {
    Levels l;
    for (int i = 0; i < 16; i++) l.v[i] = (float)t[i];
    return l;
}

// The host grid's names (with the host's table; the entry points below
// fill the same values into shared memory).
#define WS_LUT4_THREAD(NAME, F, TABLE)                                                   \
    template <class Out>                                                                 \
    inline void NAME##_thread(const uint8_t* src, uint16_t* dst, uint64_t n, Coords c) { \
        static const Levels l = levels_of(TABLE);                                        \
        unit_thread<F, Out>(src, dst, n, c, l.v);                                        \
    }
WS_LUT4_THREAD(iq4_nl, IQ4NL, IQ4NL_VALUES)
WS_LUT4_THREAD(iq4_xs, IQ4XS, IQ4NL_VALUES)
WS_LUT4_THREAD(mxfp4, MXFP4, E2M1_DOUBLED)
WS_LUT4_THREAD(nvfp4, NVFP4, E2M1_DOUBLED)

}  // namespace ws

// Entry points: the CTA's level table in shared memory first. At most 32
// registers (8 blocks of 256 per SM, as before).
// (WS_..._KERNEL(name, ...) lines are how build/mirror.rs finds the kernels.)
#ifdef __CUDACC__
#define WS_LUT4_ENTRY(NAME, F, TABLE, OUT, SUFFIX)                                                    \
    extern "C" __global__ void __launch_bounds__(256, 8)                                              \
        ws_##NAME##SUFFIX(const uint8_t* WS_RESTRICT src, uint16_t* WS_RESTRICT dst, uint64_t n) {     \
        __shared__ float tab[16];                                                                     \
        for (uint32_t i = threadIdx.x; i < 16; i += blockDim.x) tab[i] = (float)ws::TABLE[i];         \
        __syncthreads();                                                                              \
        ws::unit_thread<ws::F, OUT>(src, dst, n, ws::coords(), tab);                                  \
    }
#define WS_LUT4_KERNEL(NAME, F, TABLE) WS_LUT4_ENTRY(NAME, F, TABLE, ws::Bf16Out, ) WS_LUT4_ENTRY(NAME, F, TABLE, ws::F16Out, _f16)
#else
#define WS_LUT4_KERNEL(NAME, F, TABLE)
#endif
WS_LUT4_KERNEL(iq4_nl, IQ4NL, IQ4NL_VALUES)
WS_LUT4_KERNEL(iq4_xs, IQ4XS, IQ4NL_VALUES)
WS_LUT4_KERNEL(mxfp4, MXFP4, E2M1_DOUBLED)
WS_LUT4_KERNEL(nvfp4, NVFP4, E2M1_DOUBLED)
