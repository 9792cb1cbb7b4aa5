// Shared by the K-quant kernels (kquant.cu; 256-element super-blocks):
// group g writes elements e0 .. e0 + 7, e0 = 8 (g % 32), of super-block
// g / 32. Eight consecutive elements always share one sub-block scale
// (sub-blocks are 16 or 32 elements) and one bit position in every packed
// field, so a group decodes its scale once and reads each field as 8
// consecutive bytes. Everything that depends only on g % 32 (offsets,
// shifts, masks) is a format's `Lane`, hoisted out of the grid-stride loop
// where the stride is a multiple of 32 (kquant_thread).
#pragma once

#include "legacy.cuh"

namespace ws {

// ---- The reference decode (the kernels' code before issue 56; the cold
// path for blocks with a non-finite f16 field).

struct KGroup {
    const uint8_t* blk;
    uint32_t e0;  // first element, a multiple of 8
};

WS_HD KGroup k_group(const uint8_t* src, uint64_t g, uint32_t bytes) {
    return KGroup{src + (g >> 5) * bytes, (uint32_t)(g & 31) * 8};
}

// The 2-bit fields of elements e0..e0+7 in 64 bytes `qs` (Q2_K, Q3_K, and
// Q6_K's high bits): 32-byte halves of 128 elements, four 32-element
// groups per half at shifts 0, 2, 4, 6.
WS_HD void crumbs8(const uint8_t* qs, uint32_t e0, uint8_t out[8]) {
    uint8_t b[8];
    load8_even(qs + 32 * (e0 / 128) + e0 % 32, b);
    uint32_t shift = 2 * ((e0 % 128) / 32);
    WS_UNROLL
    for (int j = 0; j < 8; j++) out[j] = (uint8_t)((b[j] >> shift) & 3u);
}

// The nibbles of elements e0..e0+7 in 128 bytes `qs` (Q4_K, Q5_K): 32-byte
// groups, low nibbles for even 32-element sub-blocks, high for odd.
WS_HD void k_nibbles8(const uint8_t* qs, uint32_t e0, uint8_t out[8]) {
    uint32_t k = e0 / 32;
    uint8_t b[8];
    load8_even(qs + 32 * (k / 2) + e0 % 32, b);
    uint32_t shift = 4 * (k % 2);
    WS_UNROLL
    for (int j = 0; j < 8; j++) out[j] = (uint8_t)((b[j] >> shift) & 0xFu);
}

// Scale and min j (0..7) of Q4_K/Q5_K's 12 packed bytes (ggml's
// get_scale_min_k4).
WS_HD void k4_scale_min(const uint8_t* sc, uint32_t j, uint32_t* scale, uint32_t* min) {
    if (j < 4) {
        *scale = sc[j] & 0x3Fu;
        *min = sc[j + 4] & 0x3Fu;
    } else {
        *scale = (sc[j + 4] & 0x0Fu) | ((sc[j - 4] >> 2) & 0x30u);
        *min = (sc[j + 4] >> 4) | ((sc[j] >> 2) & 0x30u);
    }
}

}  // namespace ws

// ---- The fast path's helpers (issue 56; docs/numerics.md, "CUDA K-quant
// kernels"), in their own namespace: every kernel source shares one
// translation unit on the host.
namespace ws {
namespace kq {

// Bit movement.

// x rotated left by n (0..31): every bit moves by n modulo 32, so bit b of
// byte i lands at 8i + b + n whichever way the lane's n points.
WS_HD uint32_t rotl(uint32_t x, uint32_t n) {
#ifdef __CUDA_ARCH__
    return __funnelshift_l(x, x, n);
#else
    return (x << n) | (x >> ((32u - n) & 31u));
#endif
}

// a where m is set, b elsewhere: one LOP3 (with m an immediate; written
// as (a & m) | (b & ~m) the compiler spends two, one per constant).
WS_HD uint32_t bitsel(uint32_t a, uint32_t b, uint32_t m) {
#ifdef __CUDA_ARCH__
    uint32_t r;
    asm("lop3.b32 %0, %1, %2, %3, 0xCA;" : "=r"(r) : "r"(m), "r"(a), "r"(b));  // m ? a : b, bit by bit
    return r;
#else
    return (a & m) | (b & ~m);
#endif
}

// (a & m) | c in one LOP3 (written out, with m and c constants, the
// compiler spends two).
WS_HD uint32_t and_or(uint32_t a, uint32_t m, uint32_t c) {
#ifdef __CUDA_ARCH__
    uint32_t r;
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(r) : "r"(a), "r"(m), "r"(c));
    return r;
#else
    return (a & m) | c;
#endif
}

// Whether both f16 halves of a word are finite (exponent fields < 31): an
// all-ones field plus 1 carries into its half's top bit, and no half
// carries into the other (0x7C00 + 0x400 = 0x8000).
WS_HD bool f16x2_finite(uint32_t h) { return (((h & 0x7C007C00u) + 0x04000400u) & 0x80008000u) == 0; }

// 2^e as an f32 (e a normal exponent).
WS_HD float pow2f(int e) { return bits_float((uint32_t)(127 + e) << 23); }

// The 8 values dl * (code - C) of 8 codes held two to a half word, M
// wide at bits 0 and 8 of u[i]: a code u ORed into the f32 2^23 is 2^23 + u
// (or 2^23 + u * 2^8), exactly; subtracting 2^23 + C (2^23 + C * 2^8: both
// in [2^23, 2^24), Sterbenz) is exact, +0 when u == C, as the reference's
// (float)0; times dl (dl * 2^-8, exact: dl is zero or at least 2^-24 in
// magnitude) that is RN(dl * (u - C)), the reference's product: the same
// real number, rounded once (legacy.cuh's argument).
template <uint32_t M, uint32_t C>
WS_HD void magic8_dl(float dl, const uint32_t u[4], float x[8]) {
    float dl8 = mul(dl, pow2f(-8));
    WS_UNROLL
    for (int i = 0; i < 4; i++) {
        x[2 * i] = mul(sub(bits_float(and_or(u[i], M, 0x4B000000u)), magic(C)), dl);
        x[2 * i + 1] = mul(sub(bits_float(and_or(u[i], M << 8, 0x4B000000u)), magic(C << 8)), dl8);
    }
}

// A finite f16's value times sc (an integer of at most 8 bits, as f32),
// exactly: f16_down(h) is d * 2^-112, times sc * 2^112 (exact) is d * sc,
// at most 19 significant bits, zero or at least 2^-24 in magnitude.
WS_HD float f16_times(uint32_t h, float sc) { return mul(f16_down(h), mul(sc, pow2f(112))); }

// ---- Loads and stores. VEC: the address is aligned for the width (the
// fast loop checks the source's alignment once, kquant_thread); otherwise
// 2-byte loads (GDS chunks are only 2-aligned). The host reads bytes.
struct W2 {
    uint32_t x, y;
};
struct W4 {
    uint32_t x, y, z, w;
};
template <bool VEC>
WS_HD uint32_t ld32(const uint8_t* p) {
#ifdef __CUDA_ARCH__
    if (VEC) return *reinterpret_cast<const uint32_t*>(p);
#endif
    return load_u32_even(p);
}
template <bool VEC>
WS_HD W2 ld64(const uint8_t* p) {
#ifdef __CUDA_ARCH__
    if (VEC) {
        uint2 v = *reinterpret_cast<const uint2*>(p);
        return W2{v.x, v.y};
    }
#endif
    return W2{load_u32_even(p), load_u32_even(p + 4)};
}
template <bool VEC>
WS_HD W4 ld128(const uint8_t* p) {
#ifdef __CUDA_ARCH__
    if (VEC) {
        uint4 v = *reinterpret_cast<const uint4*>(p);
        return W4{v.x, v.y, v.z, v.w};
    }
#endif
    return W4{load_u32_even(p), load_u32_even(p + 4), load_u32_even(p + 8), load_u32_even(p + 12)};
}
// The 4 half words of 8 bytes at a 2-byte aligned address, each in a word.
WS_HD void ld_halves(const uint8_t* p, uint32_t u[4]) {
    WS_UNROLL
    for (int i = 0; i < 4; i++) u[i] = load_u16(p + 2 * i);
}

// Whether p is `align`-byte aligned on the device (the host reads bytes:
// always).
WS_HD bool aligned_to(const void* p, uint32_t align) {
#ifdef __CUDA_ARCH__
    return (reinterpret_cast<uintptr_t>(p) & (align - 1)) == 0;
#else
    (void)p;
    (void)align;
    return true;
#endif
}

// 8 outputs packed two to a word; ALIGNED: dst is 16-byte aligned (checked
// once by the fast loop).
template <bool ALIGNED>
WS_HD void store8w(uint16_t* dst, const uint32_t o[4]) {
#ifdef __CUDA_ARCH__
    if (ALIGNED) {
        *reinterpret_cast<uint4*>(dst) = make_uint4(o[0], o[1], o[2], o[3]);
        return;
    }
#endif
    store8_words(dst, o);
}

// ---- The grid-stride loop over a K-quant format F (kquant.cu), each
// group: F::load (every load issued before any decision); where the
// block's f16 fields are finite, F::values (the reference's f32 values,
// exactly) rounded without the NaN test (k_fast); otherwise F::ref, the
// reference code, out of line on the GPU.
template <class F, class Out, bool FAST>
WS_HD void k_fast(uint16_t* dst, const typename F::Raw& r, const typename F::Lane& L) {
    float x[8];
    F::values(r, L, x);
    uint32_t o[4];
    WS_UNROLL
    for (int i = 0; i < 4; i++) o[i] = Out::pack2_nonan(x[2 * i], x[2 * i + 1]);
    store8w<FAST>(dst, o);
}

template <class F, class Out, bool FAST>
WS_HD void k_put(uint16_t* dst, const uint8_t* src, uint64_t g, const typename F::Raw& r, const typename F::Lane& L) {
    if (!F::finite(r)) return F::template ref<Out>(dst, k_group(src, g, F::BYTES));
    k_fast<F, Out, FAST>(dst, r, L);
}

// One group a trip from group `first` on, 64-bit indices, 2-byte loads:
// any geometry, any alignment (the host grid's odd geometries, GDS
// chunks), and the rest of a fast loop that met a non-finite block.
template <class F, class Out>
WS_COLD void kquant_thread_wide(const uint8_t* src, uint16_t* dst, uint64_t n, uint64_t first, uint64_t stride) {
    for (uint64_t g = first; g < n / 8; g += stride) {
        typename F::Lane lane = F::lane((uint32_t)(g & 31));
        const uint8_t* blk = src + (g >> 5) * F::BYTES;
        k_put<F, Out, false>(dst + g * 8, src, g, F::template load<false>(blk, lane), lane);
    }
}

// When the stride is a multiple of 32 (every launch of the executor: blocks
// of 256 threads), the group indices fit in 32 bits, the source is aligned
// for F's vector loads and the destination to 16 bytes: the lane's
// constants hoisted, 32-bit indices, two groups a trip (g, g + stride),
// both loaded before either converts, no call in the loop's path: at a
// block with a non-finite field (the same for a whole warp, one
// super-block) the thread's remaining groups go to kquant_thread_wide.
// Otherwise kquant_thread_wide.
template <class F, class Out>
WS_HD void kquant_thread(const uint8_t* src, uint16_t* dst, uint64_t n, Coords c) {
    uint64_t groups = n / 8, first = c.first(), stride = c.stride();
    if (stride % 32 != 0 || groups + 2 * stride > 0xFFFFFFFFu || !aligned_to(src, F::ALIGN) || !aligned_to(dst, 16))
        return kquant_thread_wide<F, Out>(src, dst, n, first, stride);
    uint32_t g = (uint32_t)first, st = (uint32_t)stride, end = (uint32_t)groups;
    typename F::Lane lane = F::lane(g & 31);
    // g + 2 st < end + st <= 2^32 - 1: no wrap.
    for (; g + st < end; g += 2 * st) {
        typename F::Raw a = F::template load<true>(src + (size_t)(g >> 5) * F::BYTES, lane);
        typename F::Raw b = F::template load<true>(src + (size_t)((g + st) >> 5) * F::BYTES, lane);
        if (!F::finite(a) || !F::finite(b)) break;
        k_fast<F, Out, true>(dst + (size_t)g * 8, a, lane);
        k_fast<F, Out, true>(dst + (size_t)(g + st) * 8, b, lane);
    }
    if (g < end) {  // one group left (in the pipeline's chunks, often a thread's only one), or a break
        typename F::Raw a = F::template load<true>(src + (size_t)(g >> 5) * F::BYTES, lane);
        if (g + st < end || !F::finite(a)) return kquant_thread_wide<F, Out>(src, dst, n, g, stride);
        k_fast<F, Out, true>(dst + (size_t)g * 8, a, lane);
    }
}

}  // namespace kq
}  // namespace ws
