// K-quants (256-element super-blocks: Q2_K ... Q6_K) -> BF16 or float16
// (Out, common.cuh). One family per file, the same family names as the CPU
// kernels' (crates/weightstream-dequant/src/{scalar,x86,arm}/kquant.rs).
//
// Thread group g writes elements e0 .. e0 + 7 (e0 = 8 (g % 32)) of
// super-block g / 32 (kquant.cuh). Each format is a struct of:
// - `Lane lane(k)`: what depends only on k = g % 32: field offsets, the
//   shifts, rotations and permutes that gather the group's codes and its
//   sub-block's scale (and min);
// - `Raw load<VEC>(blk, lane)`: the group's loaded bits;
// - `finite(raw)`: whether the block's f16 fields are finite;
// - `values(raw, lane, x)`: the 8 reference values as f32, exactly, when
//   they are: codes gathered two to a half word at bits 0 and 8 become
//   f32 by the magic number (kquant.cuh `magic8_dl`), times the
//   sub-block's dl = d * sc (and dl * 2^-8), exact (at most 19
//   significant bits), so each product rounds as the reference's
//   (d * sc) * q does: the same real number; then the reference's own
//   subtraction of dmin * m where the format has one (computed exactly, as
//   the reference's). No NaN can arise (finite f16 fields, codes and
//   scales of at most 8 bits), so kquant.cuh `k_fast` rounds without the
//   NaN test;
// - `ref<Out>(dst, group)`: the reference code element by element (the
//   kernels' code before issue 56), out of line on the GPU, for blocks
//   with an infinite or NaN field.
// The grid-stride loop is kquant.cuh `kquant_thread`: two groups a trip
// with the lane's constants hoisted where the stride is a multiple of 32
// (and the source aligned for the format's loads), the general 64-bit loop
// otherwise. docs/numerics.md, "CUDA K-quant kernels".
// kernels/tests/kquant_exhaustive.rs holds `values` to the reference f32
// values on every f16 d (and dmin) times every sub-block scale (and min)
// times every code, and `k_put` to the reference outputs on every
// non-finite field and on whole blocks, for both outputs.
#include "kquant.cuh"

namespace ws {
namespace kq {

// Q2_K: 16 bytes of (4-bit scale | 4-bit min << 4) per 16
// elements, 64 bytes of 2-bit quants, f16 d and dmin;
// x = (d * sc) * q - (dmin * m), each operation rounded (no FMA).
struct Q2K {
    static constexpr uint32_t BYTES = q2_k::BYTES, ALIGN = 4;
    struct Lane {
        uint32_t qs, sc, sh;  // byte offsets of the codes and the scale byte; the crumbs' shift
    };
    struct Raw {
        uint32_t h, sm, w0, w1;  // d | dmin << 16; the scale byte; 8 code bytes
    };
    static WS_HD Lane lane(uint32_t k) { return Lane{q2_k::QS + 32 * (k / 16) + 8 * (k % 4), q2_k::SCALES + k / 2, 2 * ((k % 16) / 4)}; }
    template <bool VEC>
    static WS_HD Raw load(const uint8_t* blk, const Lane& L) {
        return Raw{ld32<VEC>(blk + q2_k::D), blk[L.sc], ld32<VEC>(blk + L.qs), ld32<VEC>(blk + L.qs + 4)};
    }
    static WS_HD bool finite(const Raw& r) { return f16x2_finite(r.h); }
    static WS_HD void values(const Raw& r, const Lane& L, float x[8]) {
        float sc = sub(magic(r.sm & 0xFu), magic(0)), m16 = sub(magic(r.sm & 0xF0u), magic(0));
        float ml = mul(mul(f16_down(r.h >> 16), pow2f(108)), m16);  // (dmin * 2^-4) * (m * 2^4)
        uint32_t u[4] = {r.w0 >> L.sh, r.w0 >> (16 + L.sh), r.w1 >> L.sh, r.w1 >> (16 + L.sh)};
        magic8_dl<3u, 0>(f16_times(r.h, sc), u, x);
        WS_UNROLL
        for (int j = 0; j < 8; j++) x[j] = sub(x[j], ml);
    }
    template <class Out>
    static WS_COLD void ref(uint16_t* dst, KGroup k) {
        float d = f16_to_f32(load_u16(k.blk + q2_k::D)), dmin = f16_to_f32(load_u16(k.blk + q2_k::DMIN));
        uint32_t sm = k.blk[q2_k::SCALES + k.e0 / 16];
        float dl = mul(d, (float)(sm & 0xFu)), ml = mul(dmin, (float)(sm >> 4));
        uint8_t q[8];
        crumbs8(k.blk + q2_k::QS, k.e0, q);
        uint16_t out[8];
        WS_UNROLL
        for (int j = 0; j < 8; j++) out[j] = Out::from_f32(sub(mul(dl, (float)q[j]), ml));
        store8(dst, out, 8);
    }
};

// Q3_K: 32 bytes of high bits, 64 bytes of 2-bit quants, 12 bytes
// of 6-bit signed scales (per 16 elements), f16 d;
// x = (d * sc) * q, q = the 2 bits minus 4 where the hmask bit is clear.
// Fast path: the code u = crumb | hmask bit << 2 (0..7), x = dl * (u - 4).

// Scale j (0..15): the low nibble of byte j (j < 8) or high nibble of byte
// j - 8, with two high bits from bytes 8..11, minus 32.
WS_HD int q3_k_scale(const uint8_t* sc, uint32_t j) {
    uint32_t lo = j < 8 ? (sc[j] & 0x0Fu) : (uint32_t)(sc[j - 8] >> 4);
    uint32_t hi = (sc[8 + j % 4] >> (2 * (j / 4))) & 3u;
    return (int)(lo | (hi << 4)) - 32;
}

struct Q3K {
    static constexpr uint32_t BYTES = q3_k::BYTES, ALIGN = 2;
    struct Lane {
        uint32_t qs, hm, sa, sb;   // offsets of the codes, the high bits, the two scale bytes
        uint32_t ssh, srot;        // the scale's low nibble: its shift; its high bits: their rotation
        uint32_t sh, hrot;         // the crumbs' shift; the hmask bit's rotation (to bit 2)
    };
    struct Raw {
        uint32_t h, s6, q[4], hb[4];  // d; the 6-bit scale; codes and high bits, a half word each
    };
    static WS_HD Lane lane(uint32_t k) {
        uint32_t j = k / 2;
        return Lane{q3_k::QS + 32 * (k / 16) + 8 * (k % 4), q3_k::HMASK + 8 * (k % 4), q3_k::SCALES + j % 8, q3_k::SCALES + 8 + j % 4,
                    4 * (j / 8), (4u - 2 * (j / 4)) & 31u, 2 * ((k % 16) / 4), (2u - k / 4) & 31u};
    }
    template <bool VEC>
    static WS_HD Raw load(const uint8_t* blk, const Lane& L) {
        Raw r;
        r.h = load_u16(blk + q3_k::D);
        // The scale's nibble (bits 0..3) and high bits (to bits 4, 5).
        r.s6 = bitsel((uint32_t)blk[L.sa] >> L.ssh, rotl(blk[L.sb], L.srot), 0x0Fu) & 0x3Fu;
        ld_halves(blk + L.qs, r.q);
        ld_halves(blk + L.hm, r.hb);
        return r;
    }
    static WS_HD bool finite(const Raw& r) { return f16_finite(r.h); }
    static WS_HD void values(const Raw& r, const Lane& L, float x[8]) {
        float sc = sub(magic(r.s6), magic(32));  // sc - 32, exactly
        uint32_t u[4];
        WS_UNROLL
        for (int i = 0; i < 4; i++) u[i] = bitsel(r.q[i] >> L.sh, rotl(r.hb[i], L.hrot), 0x0303u);
        magic8_dl<7u, 4>(f16_times(r.h, sc), u, x);
    }
    template <class Out>
    static WS_COLD void ref(uint16_t* dst, KGroup k) {
        float d = f16_to_f32(load_u16(k.blk + q3_k::D));
        float dl = mul(d, (float)q3_k_scale(k.blk + q3_k::SCALES, k.e0 / 16));
        uint8_t q[8], h[8];
        crumbs8(k.blk + q3_k::QS, k.e0, q);
        load8_even(k.blk + q3_k::HMASK + k.e0 % 32, h);
        uint32_t bit = k.e0 / 32;
        uint16_t out[8];
        WS_UNROLL
        for (int j = 0; j < 8; j++) out[j] = Out::from_f32(mul(dl, (float)((int)q[j] - (((h[j] >> bit) & 1u) ? 0 : 4))));
        store8(dst, out, 8);
    }
};


// Q4_K: f16 d, dmin; 12 bytes of 6-bit scales and mins (per 32
// elements); 128 bytes of nibbles; x = (d * sc) * q - (dmin * m), each
// operation rounded (gguf-py's order; no FMA).
// Q5_K: as Q4_K with 32 bytes of high bits: element 32k + l takes
// bit k of qh[l] as bit 4; x = (d * sc) * q - (dmin * m).
// One struct for both (QH: Q5_K).

// k4_scale_min's scale and min of sub-block j from the 12 bytes as words
// s0, s1, s2, by the lane's constants: sc in bits 0..5, m in bits 8..13.
struct K4Scale {
    uint32_t sel, sh, ma, mb;
};
WS_HD K4Scale k4_lane(uint32_t j) {
    uint32_t i = j % 4;
    uint32_t sel = i | (4 + i) << 4;  // byte i of s0 (or s2), byte i of s1 (or s2 >> 4)
    return j < 4 ? K4Scale{sel, 0, 0x3F3Fu, 0} : K4Scale{sel, 2, 0x3030u, 0x0F0Fu};
}
// j < 4: bytes j of s0 and s1, 6 bits each; j >= 4: the top two bits of
// those bytes (i = j - 4) over the nibbles of byte i of s2, low for sc,
// high for m.
WS_HD uint32_t k4_scm(uint32_t s0, uint32_t s1, uint32_t s2, const K4Scale& k) {
    uint32_t x = byte_perm(s0, s1, k.sel), y = byte_perm(s2, s2 >> 4, k.sel);
    return ((x >> k.sh) & k.ma) | (y & k.mb);
}

template <bool QH>
struct K45 {
    static constexpr uint32_t BYTES = QH ? q5_k::BYTES : q4_k::BYTES, ALIGN = 16;
    static constexpr uint32_t QS = QH ? q5_k::QS : q4_k::QS;
    struct Lane {
        uint32_t qs, qh, s, hrot;  // offsets of the codes and the high bits; the nibbles' shift; qh bit j to bit 4
        K4Scale k;
    };
    struct Raw {
        uint32_t h, s0, s1, s2, w0, w1, q0, q1;  // d | dmin << 16; the scales; 8 code bytes; 8 qh bytes
    };
    static WS_HD Lane lane(uint32_t k) {
        uint32_t j = k / 4;
        return Lane{QS + 32 * (j / 2) + 8 * (k % 4), q5_k::QH + 8 * (k % 4), 4 * (j % 2), (4u - j) & 31u, k4_lane(j)};
    }
    template <bool VEC>
    static WS_HD Raw load(const uint8_t* blk, const Lane& L) {
        W4 hd = ld128<VEC>(blk);
        W2 w = ld64<VEC>(blk + L.qs), q = QH ? ld64<VEC>(blk + L.qh) : W2{0, 0};
        return Raw{hd.x, hd.y, hd.z, hd.w, w.x, w.y, q.x, q.y};
    }
    static WS_HD bool finite(const Raw& r) { return f16x2_finite(r.h); }
    static WS_HD void values(const Raw& r, const Lane& L, float x[8]) {
        uint32_t scm = k4_scm(r.s0, r.s1, r.s2, L.k);
        float sc = sub(magic(scm & 0x3Fu), magic(0)), m256 = sub(magic(scm & 0x3F00u), magic(0));
        float ml = mul(mul(f16_down(r.h >> 16), pow2f(104)), m256);  // (dmin * 2^-8) * (m * 2^8)
        uint32_t w0 = r.w0 >> L.s, w1 = r.w1 >> L.s;
        if (QH) {  // 5-bit codes, one a byte: the nibble, bit j of the qh byte as bit 4
            w0 = bitsel(w0, rotl(r.q0, L.hrot), 0x0F0F0F0Fu);
            w1 = bitsel(w1, rotl(r.q1, L.hrot), 0x0F0F0F0Fu);
        }
        uint32_t u[4] = {w0, w0 >> 16, w1, w1 >> 16};
        magic8_dl<QH ? 0x1Fu : 0xFu, 0>(f16_times(r.h, sc), u, x);
        WS_UNROLL
        for (int j = 0; j < 8; j++) x[j] = sub(x[j], ml);
    }
    template <class Out>
    static WS_COLD void ref(uint16_t* dst, KGroup k) {
        float d = f16_to_f32(load_u16(k.blk + q4_k::D)), dmin = f16_to_f32(load_u16(k.blk + q4_k::DMIN));
        uint32_t sub_block = k.e0 / 32, sc, m;
        k4_scale_min(k.blk + q4_k::SCALES, sub_block, &sc, &m);
        float dl = mul(d, (float)sc), ml = mul(dmin, (float)m);
        uint8_t q[8], h[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        k_nibbles8(k.blk + QS, k.e0, q);
        if (QH) load8_even(k.blk + q5_k::QH + k.e0 % 32, h);
        uint16_t out[8];
        WS_UNROLL
        for (int j = 0; j < 8; j++) out[j] = Out::from_f32(sub(mul(dl, (float)(q[j] | (((h[j] >> sub_block) & 1u) << 4))), ml));
        store8(dst, out, 8);
    }
};

// Q6_K: 128 bytes of low nibbles, 64 bytes of 2-bit highs, 16 x i8
// scales (per 16 elements), f16 d; x = (d * sc) * (q - 32). In each
// 128-element half, element i's low nibble is in ql[i % 64] (low nibbles
// for i < 64, high for the rest) and its high bits are crumb i of qh.
// Fast path: codes assembled in place, two to a half word (bits sl, 8 +
// sl), the crumbs rotated beside their nibbles.
struct Q6K {
    static constexpr uint32_t BYTES = q6_k::BYTES, ALIGN = 2;
    struct Lane {
        uint32_t ql, qh, sc;  // offsets of the nibbles, the crumbs, the scale
        uint32_t sl, hrot;    // the nibbles' shift; the crumbs' rotation to bits 4, 5
    };
    struct Raw {
        uint32_t h;
        int32_t sc;
        uint32_t l[4], c[4];  // nibbles and crumbs, a half word each
    };
    static WS_HD Lane lane(uint32_t k) {
        uint32_t e0 = 8 * k, i0 = e0 % 128;
        return Lane{q6_k::QL + 64 * (e0 / 128) + i0 % 64, q6_k::QH + 32 * (e0 / 128) + i0 % 32, q6_k::SCALES + e0 / 16, 4 * (i0 / 64),
                    (4u - 2 * (i0 / 32)) & 31u};
    }
    template <bool VEC>
    static WS_HD Raw load(const uint8_t* blk, const Lane& L) {
        Raw r;
        r.h = load_u16(blk + q6_k::D);
        r.sc = (int8_t)blk[L.sc];
        ld_halves(blk + L.ql, r.l);
        ld_halves(blk + L.qh, r.c);
        return r;
    }
    static WS_HD bool finite(const Raw& r) { return f16_finite(r.h); }
    static WS_HD void values(const Raw& r, const Lane& L, float x[8]) {
        uint32_t u[4];
        WS_UNROLL
        for (int i = 0; i < 4; i++) u[i] = bitsel(r.l[i] >> L.sl, rotl(r.c[i], L.hrot), 0x0F0Fu);
        magic8_dl<0x3Fu, 32>(f16_times(r.h, (float)r.sc), u, x);
    }
    template <class Out>
    static WS_COLD void ref(uint16_t* dst, KGroup k) {
        float d = f16_to_f32(load_u16(k.blk + q6_k::D));
        float dl = mul(d, (float)(int8_t)k.blk[q6_k::SCALES + k.e0 / 16]);
        uint32_t half = k.e0 / 128, i0 = k.e0 % 128;
        uint8_t lo[8], hi[8];
        load8_even(k.blk + q6_k::QL + 64 * half + i0 % 64, lo);
        crumbs8(k.blk + q6_k::QH, k.e0, hi);
        uint32_t shift = 4 * (i0 / 64);
        uint16_t out[8];
        WS_UNROLL
        for (int j = 0; j < 8; j++) out[j] = Out::from_f32(mul(dl, (float)((int)(((lo[j] >> shift) & 0xFu) | ((uint32_t)hi[j] << 4)) - 32)));
        store8(dst, out, 8);
    }
};

}  // namespace kq

// The names the host grid and the entry points use (WS_BLOCK_KERNEL's).
template <class Out>
WS_HD void q2_k_thread(const uint8_t* src, uint16_t* dst, uint64_t n, Coords c) { kq::kquant_thread<kq::Q2K, Out>(src, dst, n, c); }
template <class Out>
WS_HD void q3_k_thread(const uint8_t* src, uint16_t* dst, uint64_t n, Coords c) { kq::kquant_thread<kq::Q3K, Out>(src, dst, n, c); }
template <class Out>
WS_HD void q4_k_thread(const uint8_t* src, uint16_t* dst, uint64_t n, Coords c) { kq::kquant_thread<kq::K45<false>, Out>(src, dst, n, c); }
template <class Out>
WS_HD void q5_k_thread(const uint8_t* src, uint16_t* dst, uint64_t n, Coords c) { kq::kquant_thread<kq::K45<true>, Out>(src, dst, n, c); }
template <class Out>
WS_HD void q6_k_thread(const uint8_t* src, uint16_t* dst, uint64_t n, Coords c) { kq::kquant_thread<kq::Q6K, Out>(src, dst, n, c); }

}  // namespace ws

// At most 32 registers: two groups in flight a trip must not cost warps
// (8 blocks of 256 per SM, as the legacy kernels).
// (WS_..._KERNEL(name) lines are how build/mirror.rs finds the kernels.)
#define WS_KQUANT_KERNEL(NAME) WS_BLOCK_KERNEL_ENTRY_BOUNDED(NAME, __launch_bounds__(256, 8))
WS_KQUANT_KERNEL(q2_k)
WS_KQUANT_KERNEL(q3_k)
WS_KQUANT_KERNEL(q4_k)
WS_KQUANT_KERNEL(q5_k)
WS_KQUANT_KERNEL(q6_k)
