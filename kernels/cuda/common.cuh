// weightstream kernels: shared numerics and memory helpers.
//
// Everything here is `__host__ __device__`: the same source compiles with
// nvcc for the GPU and with a plain C++ compiler for the host, where the
// tests run every kernel's complete launch grid and compare the bits with
// the Rust CPU kernels (docs/numerics.md is the contract).
//
// Numerics: every input converts to f32 exactly; each f32 multiply, add or
// subtract rounds to nearest even (__fmul_rn, __fadd_rn, __fsub_rn: never
// contracted into an FMA; the fatbins are also built with --fmad=false); the
// result rounds once to the output type, a kernel template parameter `Out`
// (Bf16Out, F16Out below): to nearest even, every NaN as 0x7FC0 (BF16) or
// 0x7E00 (float16). Build without fast math.
#pragma once

#include <stdint.h>
#ifndef __CUDACC__
#include <string.h>
#define __host__
#define __device__
#define __forceinline__ inline
#endif

#include "formats.cuh"

#define WS_HD __host__ __device__ __forceinline__
// Kernel pointer parameters: source, destination and tables never alias
// (nvcc may then read them through the read-only data path).
#define WS_RESTRICT __restrict__
#ifdef __CUDACC__
#define WS_UNROLL _Pragma("unroll")
#else
#define WS_UNROLL
#endif

namespace ws {

constexpr uint16_t CANONICAL_NAN = 0x7FC0;
constexpr uint16_t CANONICAL_NAN_F16 = 0x7E00;

WS_HD uint32_t float_bits(float x) {
#ifdef __CUDA_ARCH__
    return __float_as_uint(x);
#else
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
#endif
}

WS_HD float bits_float(uint32_t u) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float x;
    memcpy(&x, &u, 4);
    return x;
#endif
}

// One IEEE multiply, round to nearest even.
WS_HD float mul(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}

// One IEEE add and one subtract, round to nearest even; with `mul`, the
// K-quants' `d * q - m` stays two roundings (never an FMA).
WS_HD float add(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}

WS_HD float sub(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}

// x rounded to IEEE binary16 precision, as f32 (nearest even, past 65504
// to infinity, f16 subnormals as multiples of 2^-24): what torch's f16
// arithmetic keeps of a product. Two rounded adds by a power of two whose
// ulp is f16's quantum there; the Rust kernels do the same (numerics.rs
// round_f16).
WS_HD float round_f16(float x) {
    uint32_t bits = float_bits(x), sign = bits & 0x80000000u, mag = bits & 0x7FFFFFFFu;
    if (mag > 0x7F800000u) return x;  // NaN
    float a = bits_float(mag), r;
    if (a >= 65520.0f) r = bits_float(0x7F800000u);
    else if (a < 6.103515625e-05f) r = sub(add(a, 0.5f), 0.5f);
    else {
        float c = bits_float((mag & 0x7F800000u) + (13u << 23));
        r = sub(add(a, c), c);
    }
    return bits_float(float_bits(r) | sign);
}

WS_HD uint16_t f32_to_bf16(float x) {
    uint32_t b = float_bits(x);
    if ((b & 0x7FFFFFFFu) > 0x7F800000u) return CANONICAL_NAN;
    return (uint16_t)((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}

// f32 -> IEEE binary16 bits, round to nearest even: from 65520 (the tie
// above 65504) to infinity, below 2^-14 to multiples of 2^-24 (f16
// subnormals), at most 2^-25 to a signed zero; every NaN 0x7E00. The same
// code on host and device, so the host grid gives the GPU's bits
// (cvt.rn.f16.f32 rounds non-NaNs alike but keeps NaN payloads, and the
// host has no such instruction to compare); kernels/tests/f16_rounding.rs
// holds it to weightstream-dequant's f32_to_f16 on all 2^32 inputs.
// All three results are computed and one selected (no divergent branch):
// - normal f16 (and infinity from 65520, by the carry out of 0x7BFF):
//   rebias the exponent (127 -> 15) and round the 13 dropped bits to
//   nearest even with integer adds;
// - below 2^-14: one IEEE add of 0.5, whose ulp is f16's subnormal
//   quantum 2^-24, rounds to nearest even; the sum's low bits are the f16
//   (0x400, the smallest normal, where it rounds up).
// Cheaper than shifting the subnormals by their exponent (half the
// integer instructions per output, bench/gpu/sass_budget.py --out f16).
WS_HD uint16_t f32_to_f16(float x) {
    uint32_t b = float_bits(x), a = b & 0x7FFFFFFFu;
    uint32_t normal = (a - 0x38000000u + 0x0FFFu + ((a >> 13) & 1u)) >> 13;
    uint32_t subnormal = float_bits(add(bits_float(a), 0.5f)) - 0x3F000000u;
    uint32_t h = a >= 0x47800000u ? 0x7C00u : a < 0x38800000u ? subnormal : normal;
    return a > 0x7F800000u ? CANONICAL_NAN_F16 : (uint16_t)(((b >> 16) & 0x8000u) | h);
}

// f32_to_f16 of an x that is not a NaN, without the NaN test (the same
// bits for every other input).
WS_HD uint16_t f32_to_f16_nonan(float x) {
    uint32_t b = float_bits(x), a = b & 0x7FFFFFFFu;
    uint32_t normal = (a - 0x38000000u + 0x0FFFu + ((a >> 13) & 1u)) >> 13;
    uint32_t subnormal = float_bits(add(bits_float(a), 0.5f)) - 0x3F000000u;
    uint32_t h = a >= 0x47800000u ? 0x7C00u : a < 0x38800000u ? subnormal : normal;
    return (uint16_t)(((b >> 16) & 0x8000u) | h);
}

// f32_to_bf16's rounding of a non-NaN x, left in the high half of the
// result: bits + 0x7FFF + bit 16 (bit 16 by a multiply-high on the GPU,
// which runs on the multiply pipe, not the integer/logic one).
WS_HD uint32_t bf16_round_high(float x) {
    uint32_t b = float_bits(x);
#ifdef __CUDA_ARCH__
    return b + 0x7FFFu + __umulhi(b & 0x10000u, 0x10000u);
#else
    return b + 0x7FFFu + ((b >> 16) & 1u);
#endif
}

// The high halves of two words: lo's in bits 0..15, hi's in 16..31.
WS_HD uint32_t high_halves(uint32_t lo, uint32_t hi) {
#ifdef __CUDA_ARCH__
    return __byte_perm(lo, hi, 0x7632);
#else
    return (lo >> 16) | (hi & 0xFFFF0000u);
#endif
}

// PTX prmt.b32 (PRMT), the one byte permute of every kernel: byte k of
// the result is byte (s >> 4k) & 7 of the pool {b, a} (a: bytes 0..3);
// with bit 3 of that nibble set, that byte's sign replicated. Written as
// inline PTX: __byte_perm masks each selector's bit 3 first, an
// instruction per runtime selector, and no selector here sets it.
WS_HD uint32_t byte_perm(uint32_t a, uint32_t b, uint32_t s) {
#ifdef __CUDA_ARCH__
    uint32_t r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(s));
    return r;
#else
    uint64_t x = a | ((uint64_t)b << 32);
    auto byte = [&](uint32_t n) {
        uint32_t v = (uint32_t)(x >> (8 * (n & 7u))) & 0xFFu;
        return n & 8u ? (uint32_t)(uint8_t)((int8_t)v >> 7) : v;
    };
    return byte(s & 0xFu) | byte((s >> 4) & 0xFu) << 8 | byte((s >> 8) & 0xFu) << 16 | byte((s >> 12) & 0xFu) << 24;
#endif
}

// IEEE binary16 -> f32, exact, by bit manipulation on both host and device.
// Branch-free: all three encodings are computed and one is selected, so a
// kernel's loads that follow the decode of a scale are not held behind a
// branch on the loaded value (the GPU issues them together).
WS_HD float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu;
    uint32_t man = h & 0x3FFu;
    // Zero or subnormal: man * 2^-24, a normal f32 (or zero), exact.
    uint32_t sub = float_bits(mul((float)man, 5.9604644775390625e-8f));
    uint32_t normal = (exp + 112u) << 23, special = 0x7F800000u;
    uint32_t high = exp == 0x1Fu ? special : normal;
    return bits_float(sign | (exp == 0 ? sub : high | (man << 13)));
}

// Whether an f16 is finite (exponent field < 31).
WS_HD bool f16_finite(uint32_t h) { return (h & 0x7C00u) != 0x7C00u; }

// A finite f16's value times 2^-112 as an f32, exactly: its sign, exponent
// and mantissa moved into f32 position (f16 subnormals become f32
// subnormals, m * 2^-136). Multiplying by 2^112 (or by legacy.cuh Magic's
// p0, p1) is then exact (the products are d, d * 2^-s, d * 2^-(8 + s):
// normal or zero; the kernels are built without flush-to-zero), and costs
// no integer instructions beyond these two (f16_to_f32 needs about 8).
WS_HD float f16_down(uint32_t h) { return bits_float(((h & 0x7FFFu) << 13) | ((h & 0x8000u) << 16)); }
// A finite f16's value as f32, exactly, through f16_down.
WS_HD float f16_finite_to_f32(uint32_t h) { return mul(f16_down(h), bits_float(239u << 23) /* 2^112 */); }

// The output policies, every kernel's `Out` template parameter: one kernel
// body per format, instantiated for each output (kernel `ws_<name>` writes
// BF16, `ws_<name>_f16` float16). `from_f32` is the one rounding of a
// reference value; float sources convert with `from_f16_bits` /
// `from_bf16_bits`, a bit copy where the source is the output's own type
// (the executor copies those without a kernel, as the CPU kernels do).
// Bf16Out is exactly the code the kernels had before the parameter, so the
// BF16 instantiations compile to the same machine code.
struct Bf16Out {
    static WS_HD uint16_t from_f32(float x) { return f32_to_bf16(x); }
    static WS_HD uint16_t from_f16_bits(uint16_t h) { return f32_to_bf16(f16_to_f32(h)); }
    static WS_HD uint16_t from_bf16_bits(uint16_t b) { return b; }
    // from_f32 of two values that are not NaN (a fast path's precondition),
    // lo in bits 0..15: the same bits without the NaN test.
    static WS_HD uint32_t pack2_nonan(float lo, float hi) { return high_halves(bf16_round_high(lo), bf16_round_high(hi)); }
};

struct F16Out {
    static WS_HD uint16_t from_f32(float x) { return f32_to_f16(x); }
    static WS_HD uint16_t from_f16_bits(uint16_t h) { return h; }
    // BF16 -> f32 is exact (the high half of the bits), then one rounding.
    static WS_HD uint16_t from_bf16_bits(uint16_t b) { return f32_to_f16(bits_float((uint32_t)b << 16)); }
    static WS_HD uint32_t pack2_nonan(float lo, float hi) {
        return (uint32_t)f32_to_f16_nonan(lo) | ((uint32_t)f32_to_f16_nonan(hi) << 16);
    }
};

// OCP E4M3FN: bias 7, no infinities, S.1111.111 is NaN.
WS_HD float e4m3_to_f32(uint8_t v) {
    uint32_t mag = v & 0x7Fu;
    if (mag == 0x7Fu) return bits_float(0x7FC00000u);
    uint32_t e = mag >> 3, m = mag & 7u;
    float x = e ? bits_float(((e + 120u) << 23) | (m << 20)) : mul((float)m, 0.001953125f);  // m * 2^-9
    return (v & 0x80u) ? -x : x;
}

// E5M2: bias 15, IEEE-like with infinities and NaNs.
WS_HD float e5m2_to_f32(uint8_t v) {
    uint32_t mag = v & 0x7Fu;
    uint32_t e = mag >> 2, m = mag & 3u;
    float x;
    if (e == 31u) x = bits_float(0x7F800000u | (m << 21));
    else if (e == 0u) x = mul((float)m, 1.52587890625e-5f);  // m * 2^-16
    else x = bits_float(((e + 112u) << 23) | (m << 21));
    return (v & 0x80u) ? -x : x;
}

// Little-endian u16 at a 2-byte aligned address (block fields in device
// scratch: block sizes 18 and 34 are even and scratch bases are aligned).
WS_HD uint16_t load_u16(const uint8_t* p) {
#ifdef __CUDA_ARCH__
    return *reinterpret_cast<const uint16_t*>(p);
#else
    return (uint16_t)(p[0] | (p[1] << 8));
#endif
}

// A little-endian u32 at a 2-byte aligned address (IQ2_XXS/IQ3_XXS words
// sit at odd multiples of 2; legacy blocks are 18, 20, 22, 24 or 34 bytes).
WS_HD uint32_t load_u32_even(const uint8_t* p) { return (uint32_t)load_u16(p) | ((uint32_t)load_u16(p + 2) << 16); }

// 8 bytes at a 2-byte aligned address.
WS_HD void load8_even(const uint8_t* p, uint8_t out[8]) {
#ifdef __CUDA_ARCH__
    const uint16_t* q = reinterpret_cast<const uint16_t*>(p);
    WS_UNROLL
    for (int i = 0; i < 4; i++) {
        uint16_t w = q[i];
        out[2 * i] = (uint8_t)w;
        out[2 * i + 1] = (uint8_t)(w >> 8);
    }
#else
    memcpy(out, p, 8);
#endif
}

// Store `count` (<= 8) 16-bit outputs (BF16 or float16 bits); one 16-byte
// store when all 8 go to a 16-byte aligned address.
WS_HD void store8(uint16_t* dst, const uint16_t v[8], uint32_t count) {
#ifdef __CUDA_ARCH__
    if (count == 8 && (reinterpret_cast<uintptr_t>(dst) & 15u) == 0) {
        uint4 u;
        u.x = v[0] | ((uint32_t)v[1] << 16);
        u.y = v[2] | ((uint32_t)v[3] << 16);
        u.z = v[4] | ((uint32_t)v[5] << 16);
        u.w = v[6] | ((uint32_t)v[7] << 16);
        *reinterpret_cast<uint4*>(dst) = u;
        return;
    }
#endif
    for (uint32_t j = 0; j < count; j++) dst[j] = v[j];
}

// Store 8 outputs packed two to a word (w[i]: outputs 2i, 2i + 1); one
// 16-byte store where dst is 16-byte aligned.
WS_HD void store8_words(uint16_t* dst, const uint32_t w[4]) {
#ifdef __CUDA_ARCH__
    if ((reinterpret_cast<uintptr_t>(dst) & 15u) == 0) {
        *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
        return;
    }
#endif
    for (int j = 0; j < 8; j++) dst[j] = (uint16_t)(w[j / 2] >> (16 * (j % 2)));
}

// Cold code kept out of line on the GPU (a rare slow path: its body is
// not inlined into the hot loop); inline on the host.
#ifdef __CUDACC__
#define WS_COLD __host__ __device__ __noinline__
#else
#define WS_COLD inline
#endif

// The launch coordinates a kernel's per-thread work is a function of.
struct Coords {
    uint32_t block, thread, block_dim, grid_dim;
    WS_HD uint64_t first() const { return (uint64_t)block * block_dim + thread; }
    WS_HD uint64_t stride() const { return (uint64_t)grid_dim * block_dim; }
};

#ifdef __CUDA_ARCH__
__device__ __forceinline__ Coords coords() { return Coords{blockIdx.x, threadIdx.x, blockDim.x, gridDim.x}; }
#endif

// Each thread produces groups of 8 outputs: this many groups for n outputs.
WS_HD uint64_t groups_of_8(uint64_t n) { return (n + 7) / 8; }

// The grid-stride loop of a block format F whose blocks hold G groups of 8
// outputs (G a power of two: 4 for the 32-element legacy blocks, 32 for the
// 256-element super-blocks), F a struct of:
// - `Lane lane(k)`: what depends only on the group's place k = g % G in
//   its block;
// - `Raw load(blk, lane)`: the group's loaded bits, every load issued
//   before any decision;
// - `put<Out>(dst, raw, lane)`: its 8 outputs.
// When the stride is a multiple of G (every launch of the executor: blocks
// of 256 threads) and the group indices fit in 32 bits, k is the same for
// all of a thread's groups (its lane is hoisted), indices are 32-bit, and
// each trip loads two groups (g, g + stride) before converting either.
// Otherwise (the host grid's odd geometries, or over 2^35 outputs) the
// general 64-bit loop, one group a trip, out of line.
template <class F, uint32_t G, class Out>
WS_COLD void block_thread_wide(const uint8_t* src, uint16_t* dst, uint64_t n, Coords c) {
    for (uint64_t g = c.first(); g < n / 8; g += c.stride()) {
        typename F::Lane lane = F::lane((uint32_t)(g % G));
        F::template put<Out>(dst + g * 8, F::load(src + (g / G) * F::BYTES, lane), lane);
    }
}

template <class F, uint32_t G, class Out>
WS_HD void block_thread(const uint8_t* src, uint16_t* dst, uint64_t n, Coords c) {
    uint64_t groups = n / 8, first = c.first(), stride = c.stride();
    if (stride % G != 0 || groups + 2 * stride > 0xFFFFFFFFu) return block_thread_wide<F, G, Out>(src, dst, n, c);
    uint32_t g = (uint32_t)first, st = (uint32_t)stride, end = (uint32_t)groups;
    typename F::Lane lane = F::lane(g % G);
    // g + 2 st < end + st <= 2^32 - 1: no wrap.
    for (; g + st < end; g += 2 * st) {
        typename F::Raw a = F::load(src + (size_t)(g / G) * F::BYTES, lane);
        typename F::Raw b = F::load(src + (size_t)((g + st) / G) * F::BYTES, lane);
        F::template put<Out>(dst + (size_t)g * 8, a, lane);
        F::template put<Out>(dst + (size_t)(g + st) * 8, b, lane);
    }
    if (g < end) F::template put<Out>(dst + (size_t)g * 8, F::load(src + (size_t)(g / G) * F::BYTES, lane), lane);
}

}  // namespace ws

// A block kernel's grid-stride loop (`<name>_thread<Out>`, what the host
// grid runs) and entry points (`ws_<name>` writing BF16, `ws_<name>_f16`
// writing float16) around its `<name>_group<Out>(src, dst, g)`, which
// writes outputs 8g .. 8g + 7; n is a whole number of blocks.
// WS_BLOCK_KERNEL_ENTRY_BOUNDED adds launch bounds: (256, 8) holds a
// kernel to 32 registers, 8 blocks of 256 (launch.rs BLOCK_DIM, every
// launch's) per SM.
#ifdef __CUDACC__
#define WS_BLOCK_KERNEL_ENTRY_BOUNDED(NAME, BOUNDS)                                                             \
    extern "C" __global__ void BOUNDS ws_##NAME(const uint8_t* WS_RESTRICT src, uint16_t* WS_RESTRICT dst, uint64_t n) { \
        ws::NAME##_thread<ws::Bf16Out>(src, dst, n, ws::coords());                                              \
    }                                                                                                           \
    extern "C" __global__ void BOUNDS ws_##NAME##_f16(const uint8_t* WS_RESTRICT src, uint16_t* WS_RESTRICT dst, uint64_t n) { \
        ws::NAME##_thread<ws::F16Out>(src, dst, n, ws::coords());                                               \
    }
#define WS_BLOCK_KERNEL_ENTRY(NAME)                                                                             \
    extern "C" __global__ void ws_##NAME(const uint8_t* WS_RESTRICT src, uint16_t* WS_RESTRICT dst, uint64_t n) {     \
        ws::NAME##_thread<ws::Bf16Out>(src, dst, n, ws::coords());                                              \
    }                                                                                                           \
    extern "C" __global__ void ws_##NAME##_f16(const uint8_t* WS_RESTRICT src, uint16_t* WS_RESTRICT dst, uint64_t n) { \
        ws::NAME##_thread<ws::F16Out>(src, dst, n, ws::coords());                                               \
    }
#else
#define WS_BLOCK_KERNEL_ENTRY_BOUNDED(NAME, BOUNDS)
#define WS_BLOCK_KERNEL_ENTRY(NAME)
#endif
#define WS_BLOCK_KERNEL(NAME)                                                                   \
    namespace ws {                                                                              \
    template <class Out>                                                                        \
    WS_HD void NAME##_thread(const uint8_t* src, uint16_t* dst, uint64_t n, Coords c) {         \
        for (uint64_t g = c.first(); g < n / 8; g += c.stride()) NAME##_group<Out>(src, dst, g); \
    }                                                                                           \
    }                                                                                           \
    WS_BLOCK_KERNEL_ENTRY(NAME)
