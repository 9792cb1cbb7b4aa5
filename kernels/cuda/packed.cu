// The safetensors packs: E2M1 (FP4) pairs and INT4/INT8 words times their scales -> BF16
// or float16 (Out, common.cuh).
// One family per file, the same family names as the CPU kernels'
// (crates/weightstream-dequant/src/{scalar,x86,arm}/packed.rs).

// E2M1 (FP4) pairs times group scales: x = e2m1(q) * scale, one
// rounded f32 multiply (the safetensors NVFP4 and MXFP4 schemes; a global
// scale is folded into the scales on the host). Element 2k is the low
// nibble of byte k, element 2k + 1 the high one.
//
// Both families (issue 56): where the launch takes the specialised walk
// (scale_grid.cuh `Walk`: every executor launch of the usual layouts),
// each trip converts a unit of 16 elements under one scale (one 8-byte
// load for E2M1 and INT4, 16 for INT8; two 16-byte stores); a code becomes
// f32 by moving its bits (E2M1) or by the magic number (INT), exactly;
// the outputs round without the NaN test where the unit's scale and zero
// point make a NaN impossible, and units outside that gate take the
// reference formula out of line (docs/numerics.md, "CUDA scaled
// safetensors kernels"; kernels/tests/scaled_exhaustive.rs). Other
// launches: thread group g writes chunk elements 8g..8g+7 with the 64-bit
// cursor (scale_grid.cuh), 16-bit stores, out of line.
#include "common.cuh"
#include "scale_grid.cuh"
#include "units.cuh"

namespace ws {

// An E2M1 code as f32, built from its bits (sign 3, exponent 2 with bias
// 1, mantissa 1; exponent 0 holds 0 and 0.5): 0, 0.5, 1, 1.5, 2, 3, 4, 6
// and their negatives, -0 included. The CPU kernels look the values up in
// E2M1_VALUES (weightstream-blocks encoding.rs): two derivations, compared by
// the parity tests.
WS_HD float e2m1_to_f32(uint32_t q) {
    uint32_t e = (q >> 1) & 3u, m = q & 1u;
    uint32_t mag = e ? (((e + 126u) << 23) | (m << 22)) : (m ? 0x3F000000u : 0u);
    return bits_float(((q & 8u) << 28) | mag);
}

template <class Out>
WS_HD void e2m1_group(const uint8_t* src, uint16_t* dst, uint64_t n, const ScaleParams& p, uint64_t g) {
    uint64_t i = g * 8;
    uint32_t count = (uint32_t)((n - i) < 8 ? (n - i) : 8);
    uint32_t word = 0;
    for (uint32_t j = 0; j < (count + 1) / 2; j++) word |= (uint32_t)src[i / 2 + j] << (8 * j);
    GridCursor k = grid_cursor(p, p.first + i);  // p.first + i: the group's first matrix element
    for (uint32_t j = 0; j < count; j++) {
        dst[i + j] = Out::from_f32(mul(e2m1_to_f32((word >> (4 * j)) & 15u), scale_at(p, k)));  // 16-bit stores: the rare path
        grid_step(p, k);
    }
}

template <class Out>
WS_COLD void e2m1_thread_wide(const uint8_t* src, uint16_t* dst, uint64_t n, const ScaleParams& p, Coords c) {
    for (uint64_t g = c.first(); g < groups_of_8(n); g += c.stride()) e2m1_group<Out>(src, dst, n, p, g);
}

// Nibble j of w as the f32 of its bits in place: sign to bit 31, exponent
// and mantissa to bits 22..24 (the nibble at the top of a word, shifted
// right arithmetically by 6, masked). That f32 is the code's value times
// 2^-126, exactly: exponents 1..3 land as f32 normals 2^(e - 127) (1 + m/2),
// exponent 0 as the f32 subnormal m * 2^-127 (0.5 * 2^-126, or zero).
WS_HD float e2m1_down(uint32_t w, int j) {
    return bits_float((uint32_t)((int32_t)(w << (28 - 4 * j)) >> 6) & 0x81C00000u);
}

// `count` (<= 16) codes (the nibbles of v) times s, by the reference.
template <class Out>
WS_COLD void e2m1_unit_ref(uint16_t* dst, uint2 v, uint32_t count, float s) {
    for (uint32_t j = 0; j < count; j++) dst[j] = Out::from_f32(mul(e2m1_to_f32(((j < 8 ? v.x : v.y) >> (4 * (j % 8))) & 15u), s));
}

// One unit: 16 codes times s, to a 16-byte aligned dst. Times 2^126 the
// decoded f32 is the code's value (exact); the multiply by s is the
// reference's own; with s finite no product is a NaN (E2M1 has none), so
// the outputs round without the NaN test.
template <class Out>
WS_HD void e2m1_unit(uint16_t* dst, uint2 v, float s) {
    if (!f32_finite(s)) return e2m1_unit_ref<Out>(dst, v, UNIT, s);
    const float up = bits_float(253u << 23);  // 2^126
    uint32_t w[2] = {v.x, v.y}, o[8];
    WS_UNROLL
    for (int i = 0; i < 8; i++) {
        float lo = mul(mul(e2m1_down(w[i / 4], 2 * (i % 4)), up), s), hi = mul(mul(e2m1_down(w[i / 4], 2 * (i % 4) + 1), up), s);
        o[i] = Out::pack2_nonan(lo, hi);
    }
    store16_words(dst, o);
}

template <class Out>
WS_HD void e2m1_thread(const uint8_t* src, uint16_t* dst, uint64_t n, const ScaleParams& p, Coords c) {
    Walk w;
    if (!p.scales || !walk_start(p, n, c, w) || (reinterpret_cast<uintptr_t>(dst) & 15u)) return e2m1_thread_wide<Out>(src, dst, n, p, c);
    uint32_t units = (uint32_t)(n / UNIT), st = (uint32_t)c.stride(), u = (uint32_t)c.first();
    uint32_t align = (uint32_t)(reinterpret_cast<uintptr_t>(src) & 7u);
    for (; u < units; u += st) {
        float s = p.scales[w.index()];
        e2m1_unit<Out>(dst + (size_t)u * UNIT, load8(src + (size_t)u * (UNIT / 2), align), s);
        w.step();
    }
    uint32_t rest = (uint32_t)(n % UNIT);  // even: whole bytes
    if (u == units && rest) {
        uint4 v = load_tail(src + (size_t)u * (UNIT / 2), rest / 2);
        e2m1_unit_ref<Out>(dst + (size_t)u * UNIT, uint2{v.x, v.y}, rest, p.scales[w.index()]);
    }
}

}  // namespace ws

#ifdef __CUDACC__
// NAME writes BF16, NAME_f16 float16 (kernels/build/mirror.rs registers both).
#define WS_E2M1_ENTRY(NAME, OUT)                                                                                         \
    extern "C" __global__ void __launch_bounds__(256, 8) NAME(const uint8_t* WS_RESTRICT src, uint16_t* WS_RESTRICT dst, uint64_t n,                \
                                    const float* WS_RESTRICT scales, uint64_t first, uint64_t cols, uint64_t block_rows,  \
                                    uint64_t block_cols, uint64_t grid_cols, WS_DIVISOR_PARAMS) {                         \
        ws::e2m1_thread<OUT>(src, dst, n, WS_SCALE_PARAMS(scales, first, cols, block_rows, block_cols, grid_cols),        \
                             ws::coords());                                                                               \
    }
#define WS_E2M1_KERNEL(NAME) WS_E2M1_ENTRY(NAME, ws::Bf16Out) WS_E2M1_ENTRY(NAME##_f16, ws::F16Out)
WS_E2M1_KERNEL(ws_e2m1)
#endif

// Packed integers (compressed-tensors pack-quantized INT4/INT8):
// x = f32(q - zero) * scale, rounded to F16 first when the scales are F16
// (round_f16: the reference computes in the scale's dtype), then to Out
// (for float16 output that second rounding changes nothing).
// Values are stored with a 2^(bits-1) offset, INT4 two per byte (low
// nibble first), INT8 one per byte; zero points (f32, exact) are laid out
// like the scales (scale_grid.cuh), null for symmetric packs. The loop
// is chosen once per launch for the F16 rounding, so each loop's body is
// straight code (at most 40 registers: 6 blocks of 256 per SM, against 4
// before issue 56).

namespace ws {

struct IntParams {
    ScaleParams s;
    const float* zeros;
    bool round_f16;
};

WS_HD float zero_at(const IntParams& p, const GridCursor& k) { return p.zeros ? p.zeros[grid_index(p.s, k)] : 0.0f; }

template <class Out>
WS_HD uint16_t int_value(int q, float zero, float scale, bool to_f16) {
    float x = mul(sub((float)q, zero), scale);
    return Out::from_f32(to_f16 ? round_f16(x) : x);
}

template <class Out, int BITS>
WS_HD void int_group(const uint8_t* src, uint16_t* dst, uint64_t n, const IntParams& p, uint64_t g) {
    uint64_t i = g * 8;
    uint32_t count = (uint32_t)((n - i) < 8 ? (n - i) : 8);
    const uint8_t* s = src + (BITS == 4 ? i / 2 : i);
    GridCursor k = grid_cursor(p.s, p.s.first + i);  // p.s.first + i: the group's first matrix element
    for (uint32_t j = 0; j < count; j++) {
        int q = BITS == 4 ? (int)((s[j / 2] >> (4 * (j & 1))) & 15u) - 8 : (int)s[j] - 128;
        dst[i + j] = int_value<Out>(q, zero_at(p, k), scale_at(p.s, k), p.round_f16);  // 16-bit stores: the rare path
        grid_step(p.s, k);
    }
}

template <class Out, int BITS>
WS_COLD void int_thread_wide(const uint8_t* src, uint16_t* dst, uint64_t n, const IntParams& p, Coords c) {
    for (uint64_t g = c.first(); g < groups_of_8(n); g += c.stride()) int_group<Out, BITS>(src, dst, n, p, g);
}

// A unit's 16 codes: INT8 one a byte of v (x, y, z, w), INT4 one a nibble
// of v.x, v.y (low nibble first).
template <int BITS>
WS_HD uint32_t int_code(uint4 v, uint32_t j) {
    uint32_t w[4] = {v.x, v.y, v.z, v.w};
    return BITS == 4 ? (w[j / 8] >> (4 * (j % 8))) & 15u : (w[j / 4] >> (8 * (j % 4))) & 255u;
}

// `count` (<= 16) outputs of a unit, by the reference.
template <class Out, int BITS>
WS_COLD void int_unit_ref(uint16_t* dst, uint4 v, uint32_t count, float z, float s, bool to_f16) {
    for (uint32_t j = 0; j < count; j++) dst[j] = int_value<Out>((int)int_code<BITS>(v, j) - (1 << (BITS - 1)), z, s, to_f16);
}

// round_f16 of an x with |x| in [2^-14, 65520) or x = +-0 (int_fast's
// gate): the f32 mantissa rounded to f16's 10 bits, to nearest even, on
// the bits (an f16 normal's quantum is 2^-10 of its binade, exactly as the
// reference's add and subtract of 2^(e + 13) round; a carry into the
// exponent is the binade above; the sign is untouched; zeros stay).
WS_HD float round_f16_normal(float x) {
    uint32_t b = float_bits(x);
#ifdef __CUDA_ARCH__
    uint32_t lsb = __umulhi(b & 0x2000u, 0x80000u);  // bit 13, on the multiply pipe (as bf16_round_high)
#else
    uint32_t lsb = (b >> 13) & 1u;
#endif
    return bits_float((b + 0xFFFu + lsb) & 0xFFFFE000u);
}

// Whether the output policy writes float16.
template <class Out>
WS_HD constexpr bool writes_f16() { return false; }
template <>
WS_HD constexpr bool writes_f16<F16Out>() { return true; }

// Whether a unit with zero point z and scale s takes the fast path: both
// finite (no product is a NaN), and with F16 rounding, z an integer of
// magnitude <= 2^23 (so q - z is 0 or at least 1 in magnitude, exactly),
// |s| >= 2^-14 (so a nonzero product is an f16 normal or larger) and
// (2^(BITS-1) + |z|) |s| <= 65000 (so no product reaches 65520, where
// round_f16 gives infinity; the rounded bound errs by far less than the
// margin).
template <int BITS>
WS_HD bool int_fast(float z, float s, bool to_f16) {
    if (!f32_finite(z) || !f32_finite(s)) return false;
    if (!to_f16) return true;
    float az = bits_float(float_bits(z) & 0x7FFFFFFFu), as = bits_float(float_bits(s) & 0x7FFFFFFFu);
    const float big = 8388608.0f;  // 2^23
    return az <= big && sub(add(az, big), big) == az && as >= 6.103515625e-05f &&
           mul(add(az, (float)(1 << (BITS - 1))), as) <= 65000.0f;
}

// One unit: 16 codes to a 16-byte aligned dst. A code u becomes f32 by
// the magic number (legacy.cuh), one code a byte (INT4: the nibbles
// spread to bytes first): the byte b permuted under 0x4B is 2^23 + b
// exactly, and minus 2^23 + 2^(BITS - 1) (Sterbenz) q itself, +0 for 0. Then the reference's
// own subtract and multiply; the rounding through F16 on the bits
// (round_f16_normal) and the output's without the NaN test, inside
// int_fast's gate; the reference out of line otherwise.
template <class Out, int BITS, bool TO_F16>
WS_HD void int_unit(uint16_t* dst, uint4 v, float z, float s) {
    if (!int_fast<BITS>(z, s, TO_F16)) return int_unit_ref<Out, BITS>(dst, v, UNIT, z, s, TO_F16);
    // The codes one a byte (INT4: the even nibbles' bytes, then the odd ones').
    uint32_t b[4] = {v.x, v.y, v.z, v.w};
    if (BITS == 4) b[0] = v.x & 0x0F0F0F0Fu, b[1] = (v.x >> 4) & 0x0F0F0F0Fu, b[2] = v.y & 0x0F0F0F0Fu, b[3] = (v.y >> 4) & 0x0F0F0F0Fu;
    const float c = bits_float(0x4B000000u | (1u << (BITS - 1)));  // 2^23 + 2^(BITS - 1)
    float x[16];
    WS_UNROLL
    for (int j = 0; j < 16; j++) {
        // Code j's byte: INT8 byte j % 4 of word j / 4; INT4 byte (j % 8) / 2 of word 2 (j / 8) + j % 2.
        uint32_t word = BITS == 4 ? b[2 * (j / 8) + j % 2] : b[j / 4], at = BITS == 4 ? (j % 8) / 2 : j % 4;
        x[j] = sub(bits_float(byte_perm(word, 0x4B000000u, 0x7540u | at)), c);
    }
    uint32_t o[8];
    WS_UNROLL
    for (int i = 0; i < 8; i++) {
        float lo = mul(sub(x[2 * i], z), s), hi = mul(sub(x[2 * i + 1], z), s);
        // Writing float16, the rounding to F16 precision first changes nothing (both round
        // to nearest even at the same bit, and the gate keeps x an f16 normal or zero).
        bool twice = TO_F16 && !writes_f16<Out>();
        o[i] = twice ? Out::pack2_nonan(round_f16_normal(lo), round_f16_normal(hi)) : Out::pack2_nonan(lo, hi);
    }
    store16_words(dst, o);
}

template <class Out, int BITS, bool TO_F16>
WS_HD void int_walk(const uint8_t* src, uint16_t* dst, uint64_t n, const IntParams& p, Coords c, Walk w) {
    uint32_t units = (uint32_t)(n / UNIT), st = (uint32_t)c.stride(), u = (uint32_t)c.first();
    uint32_t align = (uint32_t)(reinterpret_cast<uintptr_t>(src) & (BITS == 4 ? 7u : 15u));
    for (; u < units; u += st) {
        uint32_t at = w.index();
        float s = p.s.scales[at], z = p.zeros ? p.zeros[at] : 0.0f;
        uint4 v;
        if (BITS == 4) {
            uint2 a = load8(src + (size_t)u * (UNIT / 2), align);
            v = uint4{a.x, a.y, 0u, 0u};
        } else {
            v = load16(src + (size_t)u * UNIT, align);
        }
        int_unit<Out, BITS, TO_F16>(dst + (size_t)u * UNIT, v, z, s);
        w.step();
    }
    uint32_t rest = (uint32_t)(n % UNIT);  // INT4: even (whole bytes)
    if (u == units && rest) {
        uint4 v = load_tail(src + (size_t)u * UNIT * BITS / 8, rest * BITS / 8);
        uint32_t at = w.index();
        int_unit_ref<Out, BITS>(dst + (size_t)u * UNIT, v, rest, p.zeros ? p.zeros[at] : 0.0f, p.s.scales[at], TO_F16);
    }
}

template <class Out, int BITS>
WS_HD void int_thread(const uint8_t* src, uint16_t* dst, uint64_t n, const IntParams& p, Coords c) {
    Walk w;
    if (!p.s.scales || !walk_start(p.s, n, c, w) || (reinterpret_cast<uintptr_t>(dst) & 15u)) return int_thread_wide<Out, BITS>(src, dst, n, p, c);
    if (p.round_f16)
        int_walk<Out, BITS, true>(src, dst, n, p, c, w);
    else
        int_walk<Out, BITS, false>(src, dst, n, p, c, w);
}

}  // namespace ws

#ifdef __CUDACC__
#define WS_INT_ENTRY(NAME, OUT, BITS)                                                                               \
    extern "C" __global__ void __launch_bounds__(256, 6) NAME(const uint8_t* WS_RESTRICT src, uint16_t* WS_RESTRICT dst, uint64_t n,           \
                                    const float* WS_RESTRICT scales, uint64_t first, uint64_t cols,                  \
                                    uint64_t block_rows, uint64_t block_cols, uint64_t grid_cols, WS_DIVISOR_PARAMS, \
                                    const float* WS_RESTRICT zeros, uint64_t round_f16) {                            \
        ws::IntParams p{WS_SCALE_PARAMS(scales, first, cols, block_rows, block_cols, grid_cols), zeros,              \
                        round_f16 != 0};                                                                             \
        ws::int_thread<OUT, BITS>(src, dst, n, p, ws::coords());                                                     \
    }
// NAME writes BF16, NAME_f16 float16 (kernels/build/mirror.rs registers both).
#define WS_INT_KERNEL(NAME, BITS) WS_INT_ENTRY(NAME, ws::Bf16Out, BITS) WS_INT_ENTRY(NAME##_f16, ws::F16Out, BITS)
WS_INT_KERNEL(ws_int4, 4)
WS_INT_KERNEL(ws_int8, 8)
#endif
