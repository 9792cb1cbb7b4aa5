// The kernels compiled for the host: each entry point runs a kernel's
// complete launch grid (every block, every thread) sequentially, calling the
// same per-thread functions the GPU runs. Used by the CI parity tests.
// Every kernel source and WS_HOST_BLOCKS (kernels/build.rs writes it).
#include "host_kernels.inc"

namespace {
template <class F>
void grid(uint32_t grid_dim, uint32_t block_dim, F f) {
    for (uint32_t b = 0; b < grid_dim; b++)
        for (uint32_t t = 0; t < block_dim; t++) f(ws::Coords{b, t, block_dim, grid_dim});
}

// Call f with the output policy `out` names: 0 BF16, 1 float16 (launch.rs
// passes OutDtype so), as a value whose type is the kernel's Out.
template <class F>
void with_out(int out, F f) {
    if (out == 1)
        f(ws::F16Out{});
    else
        f(ws::Bf16Out{});
}

struct HostField {
    const char* name;
    uint32_t offset;
};
}  // namespace

extern "C" {
// A block format's kernel, by ggml type id, writing `out` (with_out).
// Returns 0, or -1 for a format without a kernel here.
int ws_host_block(uint32_t ggml_id, int out, const uint8_t* src, uint16_t* dst, uint64_t n, uint32_t g, uint32_t b) {
    int rc = -1;
    with_out(out, [&](auto o) {
        using Out = decltype(o);
        switch (ggml_id) {
#define WS_HOST_BLOCK_CASE(NS)                                                                \
    case ws::NS::GGML_ID:                                                                     \
        grid(g, b, [&](ws::Coords c) { ws::NS##_thread<Out>(src, dst, n, c); });              \
        rc = 0;                                                                               \
        break;
            WS_HOST_BLOCKS(WS_HOST_BLOCK_CASE)
#undef WS_HOST_BLOCK_CASE
            default: break;
        }
    });
    return rc;
}
void ws_host_f32(int out, const uint8_t* src, uint16_t* dst, uint64_t n, uint32_t g, uint32_t b) {
    with_out(out, [&](auto o) { grid(g, b, [&](ws::Coords c) { ws::f32_thread<decltype(o)>(src, dst, n, c); }); });
}
// 16-bit float sources: F16 when f16_src, else BF16 (the executor
// launches F16 -> BF16 and BF16 -> float16; the other two are copies).
void ws_host_half(int f16_src, int out, const uint8_t* src, uint16_t* dst, uint64_t n, uint32_t g, uint32_t b) {
    with_out(out, [&](auto o) {
        using Out = decltype(o);
        if (f16_src)
            grid(g, b, [&](ws::Coords c) { ws::half_thread<Out, true>(src, dst, n, c); });
        else
            grid(g, b, [&](ws::Coords c) { ws::half_thread<Out, false>(src, dst, n, c); });
    });
}
// The scaled kernels: element 0 E4M3, 1 E5M2, 2 E2M1, 3 INT4, 4 INT8
// (launch.rs Element); zeros and round_f16 for the integers.
void ws_host_scaled(int element, int out, const uint8_t* src, uint16_t* dst, uint64_t n, const float* scales,
                    uint64_t first, uint64_t cols, uint64_t block_rows, uint64_t block_cols, uint64_t grid_cols,
                    WS_DIVISOR_PARAMS, const float* zeros, int round_f16, uint32_t g, uint32_t b) {
    ws::ScaleParams p = WS_SCALE_PARAMS(scales, first, cols, block_rows, block_cols, grid_cols);
    ws::IntParams ip{p, zeros, round_f16 != 0};
    with_out(out, [&](auto o) {
        using Out = decltype(o);
        if (element == 0)
            grid(g, b, [&](ws::Coords c) { ws::fp8_thread<Out, true>(src, dst, n, p, c); });
        else if (element == 1)
            grid(g, b, [&](ws::Coords c) { ws::fp8_thread<Out, false>(src, dst, n, p, c); });
        else if (element == 2)
            grid(g, b, [&](ws::Coords c) { ws::e2m1_thread<Out>(src, dst, n, p, c); });
        else if (element == 3)
            grid(g, b, [&](ws::Coords c) { ws::int_thread<Out, 4>(src, dst, n, ip, c); });
        else
            grid(g, b, [&](ws::Coords c) { ws::int_thread<Out, 8>(src, dst, n, ip, c); });
    });
}

// The GPTQ repack (gptq.cu) over its whole grid. Returns 0, or -1 for a
// format without a target (the kernel writes nothing then).
int ws_host_gptq(const uint8_t* src, uint32_t* qweight, uint64_t n, uint16_t* scales, uint64_t rows, uint64_t width,
                 uint64_t col_start, uint32_t format, uint32_t block_elems, uint32_t block_bytes, uint32_t bits,
                 uint32_t group, uint32_t g, uint32_t b) {
    uint8_t probe[8];
    uint8_t zero_block[256] = {0};
    if (!ws::gptq_codes8(format, zero_block, 0, probe)) return -1;
    ws::GptqParams p{rows, width, col_start, format, block_elems, block_bytes, bits, group};
    grid(g, b, [&](ws::Coords c) { ws::gptq_thread(src, qweight, n, scales, p, c); });
    return 0;
}

// The FP4 repack (fp4.cu) over its whole grid. Returns 0, or -1 for a
// format without a target (the kernel writes nothing then).
int ws_host_fp4(const uint8_t* src, uint32_t* packed, uint64_t n, uint8_t* scales, uint64_t rows, uint64_t width,
                uint64_t col_start, uint32_t format, uint32_t block_elems, uint32_t block_bytes, uint32_t group, uint32_t g,
                uint32_t b) {
    if (format != ws::mxfp4::GGML_ID && format != ws::nvfp4::GGML_ID) return -1;
    ws::Fp4Params p{rows, width, col_start, format, block_elems, block_bytes, group};
    grid(g, b, [&](ws::Coords c) { ws::fp4_thread(src, packed, n, scales, p, c); });
    return 0;
}

// The kernels' f32 -> float16 rounding (common.cuh f32_to_f16) of n f32
// bit patterns, for the exhaustive comparison with the CPU's.
void ws_host_f32_to_f16(const uint32_t* bits, uint16_t* out, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) out[i] = ws::F16Out::from_f32(ws::bits_float(bits[i]));
}

// Issue 56's exactness checks of the legacy kernels (kernels/tests/
// legacy_exhaustive.rs). Rounding without the NaN test, `pack2_nonan`,
// against `from_f32` on every f32 bit pattern that is not a NaN: the
// number that differ (writing `out`, with_out); `compared` gets how many
// were compared.
uint64_t ws_host_nonan_rounding_mismatches(int out, uint64_t* compared) {
    uint64_t bad = 0, n = 0;
    with_out(out, [&](auto o) {
        using Out = decltype(o);
        for (uint64_t b = 0; b < (1ull << 32); b += 2) {
            float lo = ws::bits_float((uint32_t)b), hi = ws::bits_float((uint32_t)b + 1);
            bool lo_nan = ((uint32_t)b & 0x7FFFFFFFu) > 0x7F800000u, hi_nan = ((uint32_t)(b + 1) & 0x7FFFFFFFu) > 0x7F800000u;
            uint32_t got = Out::pack2_nonan(lo_nan ? 0.0f : lo, hi_nan ? 0.0f : hi);
            if (!lo_nan) bad += (uint16_t)got != Out::from_f32(lo), n++;
            if (!hi_nan) bad += (uint16_t)(got >> 16) != Out::from_f32(hi), n++;
        }
    });
    *compared = n;
    return bad;
}

// Every legacy format's `put` (all four quarters of a block) against the
// reference formula of docs/numerics.md written out element by element,
// on every f16 d (finite or not) and every code value at every position;
// for Q4_1 and Q5_1 with m in {1/3 as f16, -2^-24, NaN}; for Q5_0 and
// Q5_1 with qh all zeros, all ones and a mixed word. Returns the outputs
// that differ; `compared` gets the number compared.
uint64_t ws_host_legacy_exhaustive(uint32_t ggml_id, int out, uint64_t* compared) {
    uint64_t bad = 0, n = 0;
    with_out(out, [&](auto o) {
        using Out = decltype(o);
        auto run = [&](auto fmt, const uint8_t* blk, uint32_t qs_at, uint32_t ms, auto value) {
            using F = decltype(fmt);
            uint16_t got[32];
            for (uint32_t k = 0; k < 4; k++) {
                typename F::Lane lane = F::lane(k);
                F::template put<Out>(got + 8 * k, F::load(blk, lane), lane);
            }
            float d = ws::f16_to_f32(ws::load_u16(blk)), m = ws::f16_to_f32((uint16_t)ms);
            for (uint32_t e = 0; e < 32; e++) {
                uint16_t want = Out::from_f32(value(d, m, blk + qs_at, e));
                bad += got[e] != want;
                n++;
            }
        };
        auto nib = [](const uint8_t* qs, uint32_t e) { return (uint32_t)(e < 16 ? qs[e] & 15 : qs[e - 16] >> 4); };
        const uint16_t ms[3] = {0x3555, 0x8001, 0x7E00};
        const uint32_t qhs[3] = {0, 0xFFFFFFFFu, 0x5A3C96E1u};
        uint8_t blk[34];
        for (uint32_t h = 0; h < 65536; h++) {
            blk[0] = (uint8_t)h;
            blk[1] = (uint8_t)(h >> 8);
            if (ggml_id == ws::q8_0::GGML_ID) {
                for (uint32_t v = 0; v < 256; v++) {
                    for (uint32_t i = 0; i < 32; i++) blk[ws::q8_0::QS + i] = (uint8_t)(v + 37 * i);
                    run(ws::Q8_0{}, blk, ws::q8_0::QS, 0, [&](float d, float, const uint8_t* qs, uint32_t e) {
                        return ws::mul(d, (float)(int8_t)qs[e]);
                    });
                }
                continue;
            }
            for (uint32_t v = 0; v < 16; v++) {
                uint8_t qs[16];
                for (uint32_t i = 0; i < 16; i++) qs[i] = (uint8_t)(v | (((v + i) & 15) << 4));
                if (ggml_id == ws::q4_0::GGML_ID) {
                    memcpy(blk + ws::q4_0::QS, qs, 16);
                    run(ws::Q4_0{}, blk, ws::q4_0::QS, 0, [&](float d, float, const uint8_t* q, uint32_t e) {
                        return ws::mul(d, (float)((int)nib(q, e) - 8));
                    });
                } else if (ggml_id == ws::q4_1::GGML_ID) {
                    memcpy(blk + ws::q4_1::QS, qs, 16);
                    for (uint16_t m : ms) {
                        blk[ws::q4_1::M] = (uint8_t)m;
                        blk[ws::q4_1::M + 1] = (uint8_t)(m >> 8);
                        run(ws::Q4_1{}, blk, ws::q4_1::QS, m, [&](float d, float mf, const uint8_t* q, uint32_t e) {
                            return ws::add(ws::mul(d, (float)nib(q, e)), mf);
                        });
                    }
                } else if (ggml_id == ws::q5_0::GGML_ID || ggml_id == ws::q5_1::GGML_ID) {
                    bool has_m = ggml_id == ws::q5_1::GGML_ID;
                    uint32_t qh_at = has_m ? ws::q5_1::QH : ws::q5_0::QH, qs_at = has_m ? ws::q5_1::QS : ws::q5_0::QS;
                    memcpy(blk + qs_at, qs, 16);
                    for (uint32_t qh : qhs) {
                        for (int i = 0; i < 4; i++) blk[qh_at + i] = (uint8_t)(qh >> (8 * i));
                        for (int mi = has_m ? 0 : 2; mi < 3; mi++) {
                            uint16_t m = ms[mi];
                            if (has_m) {
                                blk[ws::q5_1::M] = (uint8_t)m;
                                blk[ws::q5_1::M + 1] = (uint8_t)(m >> 8);
                            }
                            auto code = [&](const uint8_t* q, uint32_t e) { return nib(q, e) | (((qh >> e) & 1u) << 4); };
                            if (has_m)
                                run(ws::Q5<true>{}, blk, qs_at, m, [&](float d, float mf, const uint8_t* q, uint32_t e) {
                                    return ws::add(ws::mul(d, (float)code(q, e)), mf);
                                });
                            else
                                run(ws::Q5<false>{}, blk, qs_at, 0, [&](float d, float, const uint8_t* q, uint32_t e) {
                                    return ws::mul(d, (float)((int)code(q, e) - 16));
                                });
                        }
                    }
                } else {
                    bad = ~0ull;
                    return;
                }
            }
        }
    });
    *compared = n;
    return bad;
}

// n / d by the kernels' multiply-high division (scale_grid.cuh), for the
// divisor tests.
uint64_t ws_host_quotient(uint64_t n, uint64_t d, uint64_t magic, uint64_t shifts) {
    return ws::quotient(ws::divisor(d, magic, shifts), n);
}

// formats.cuh as compiled, for the mirror test: entry i's name, ggml id,
// elements, bytes and up to 8 fields (names and offsets). Returns the
// number of fields, or -1 past the last entry.
int ws_host_block_layout(uint32_t i, const char** name, uint32_t* ggml_id, uint32_t* elems, uint32_t* bytes,
                         const char** field_names, uint32_t* field_offsets) {
    uint32_t k = 0;
#define WS_LAYOUT_ENTRY(NAME, NS, ...)                                              \
    if (k++ == i) {                                                                 \
        using namespace ws;                                                         \
        static const HostField fields[] = __VA_ARGS__;                              \
        *name = NAME;                                                               \
        *ggml_id = NS::GGML_ID;                                                     \
        *elems = NS::ELEMS;                                                         \
        *bytes = NS::BYTES;                                                         \
        uint32_t nf = sizeof(fields) / sizeof(fields[0]);                           \
        for (uint32_t f = 0; f < nf && f < 8; f++) {                                \
            field_names[f] = fields[f].name;                                        \
            field_offsets[f] = fields[f].offset;                                    \
        }                                                                           \
        return (int)nf;                                                             \
    }
    WS_BLOCK_LAYOUTS(WS_LAYOUT_ENTRY)
#undef WS_LAYOUT_ENTRY
    return -1;
}
}

// ==== K-quant kernels (issue 56; kernels/tests/kquant_exhaustive.rs) ====
// Each format's fast path (cuda/kquant.cu `values`: the f32 values before
// the rounding) against the reference formula of docs/numerics.md written
// out here element by element, bit for bit in f32; blocks with a non-finite
// f16 field through the whole `k_put` against that formula rounded by
// `from_f32`, for both outputs; and every block of a part through `k_put`
// for both outputs once per f16 value (`whole`).
namespace {
float kq_f16(const uint8_t* p) { return ws::f16_to_f32(ws::load_u16(p)); }

// The reference values (docs/numerics.md's table).
float kq_ref_q2_k(const uint8_t* b, float d, float dmin, uint32_t e) {
    uint32_t sm = b[ws::q2_k::SCALES + e / 16];
    uint32_t q = (b[ws::q2_k::QS + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3u;
    return ws::sub(ws::mul(ws::mul(d, (float)(sm & 15u)), (float)q), ws::mul(dmin, (float)(sm >> 4)));
}
float kq_ref_q3_k(const uint8_t* b, float d, float, uint32_t e) {
    const uint8_t* s = b + ws::q3_k::SCALES;
    uint32_t k = e / 16, lo = k < 8 ? s[k] & 15u : (uint32_t)s[k - 8] >> 4, hi = (s[8 + k % 4] >> (2 * (k / 4))) & 3u;
    int q = (int)((b[ws::q3_k::QS + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3u);
    if (!((b[ws::q3_k::HMASK + e % 32] >> (e / 32)) & 1u)) q -= 4;
    return ws::mul(ws::mul(d, (float)((int)(lo | hi << 4) - 32)), (float)q);
}
template <bool QH>
float kq_ref_q45_k(const uint8_t* b, float d, float dmin, uint32_t e) {
    const uint8_t* s = b + ws::q4_k::SCALES;
    uint32_t k = e / 32, sc, m;
    if (k < 4) {
        sc = s[k] & 63u;
        m = s[k + 4] & 63u;
    } else {
        sc = (s[k + 4] & 15u) | (uint32_t)(s[k - 4] >> 6) << 4;
        m = (uint32_t)(s[k + 4] >> 4) | (uint32_t)(s[k] >> 6) << 4;
    }
    uint32_t qs = QH ? ws::q5_k::QS : ws::q4_k::QS, q = (b[qs + 32 * (k / 2) + e % 32] >> (4 * (k % 2))) & 15u;
    if (QH) q |= ((b[ws::q5_k::QH + e % 32] >> k) & 1u) << 4;
    return ws::sub(ws::mul(ws::mul(d, (float)sc), (float)q), ws::mul(dmin, (float)m));
}
float kq_ref_q6_k(const uint8_t* b, float d, float, uint32_t e) {
    uint32_t h = e / 128, i = e % 128;
    uint32_t lo = (b[ws::q6_k::QL + 64 * h + i % 64] >> (4 * (i / 64))) & 15u, hi = (b[ws::q6_k::QH + 32 * h + i % 32] >> (2 * (i / 32))) & 3u;
    return ws::mul(ws::mul(d, (float)(int8_t)b[ws::q6_k::SCALES + e / 16]), (float)((int)(lo + 16 * hi) - 32));
}

// Groups (lanes) k0 .. k0 + count - 1 of one block: finite fields compare
// `values` in f32 (or, with `whole`, `k_put` for both outputs); non-finite
// ones `k_put`.
template <class F, float (*ref)(const uint8_t*, float, float, uint32_t)>
void kq_block(const uint8_t* blk, uint32_t d_at, int dmin_at, bool whole, uint32_t k0, uint32_t count, uint64_t& bad, uint64_t& n) {
    float d = kq_f16(blk + d_at), dmin = dmin_at < 0 ? 0.0f : kq_f16(blk + dmin_at);
    for (uint32_t k = k0; k < k0 + count; k++) {
        typename F::Lane lane = F::lane(k);
        typename F::Raw r = F::template load<false>(blk, lane);
        if (F::finite(r) && !whole) {
            float x[8];
            F::values(r, lane, x);
            for (uint32_t j = 0; j < 8; j++, n++) bad += ws::float_bits(x[j]) != ws::float_bits(ref(blk, d, dmin, 8 * k + j));
            continue;
        }
        uint16_t got[8];
        ws::kq::k_put<F, ws::Bf16Out, false>(got, blk, k, r, lane);
        for (uint32_t j = 0; j < 8; j++, n++) bad += got[j] != ws::Bf16Out::from_f32(ref(blk, d, dmin, 8 * k + j));
        ws::kq::k_put<F, ws::F16Out, false>(got, blk, k, r, lane);
        for (uint32_t j = 0; j < 8; j++, n++) bad += got[j] != ws::F16Out::from_f32(ref(blk, d, dmin, 8 * k + j));
    }
}

void kq_put16(uint8_t* p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

// Codes: element e of a block gets code (t + e / 2 + e / 64) mod `codes`
// (t chosen per block): for each pair position (e even, odd) every code
// within e < 2 codes, and over t every code at every element.
uint32_t kq_code(uint32_t t, uint32_t e, uint32_t codes) { return (t + e / 2 + e / 64) % codes; }

// Format `id`'s block body (all but d and dmin) for round v: sub-block k's
// scale (or, `min_first`, its min) is v + c k modulo the levels (Q6_K: its
// i8 scale 4v + k mod 4), so neighbours differ and the sub-block compared
// in round (v, h) (kquant_exhaustive) meets every level as v runs, for
// every h; codes kq_code(v mod codes, e). Returns false for no format.
bool kq_fill(uint32_t id, uint32_t v, bool min_first, uint8_t* blk) {
    memset(blk, 0, 256);
    if (id == ws::q2_k::GGML_ID || id == ws::q4_k::GGML_ID || id == ws::q5_k::GGML_ID) {
        bool k2 = id == ws::q2_k::GGML_ID, qh = id == ws::q5_k::GGML_ID;
        uint32_t levels = k2 ? 16 : 64, codes = k2 ? 4 : qh ? 32 : 16, t = v % codes, sc[16], m[16];
        for (uint32_t k = 0; k < 16; k++) {
            uint32_t a = (v + (k2 ? 2 * k : qh ? 8 * (k / 2) : 8 * k)) % levels, b = (5 * a + 3) % levels;
            sc[k] = min_first ? b : a;
            m[k] = min_first ? a : b;
        }
        if (k2) {
            for (uint32_t k = 0; k < 16; k++) blk[ws::q2_k::SCALES + k] = (uint8_t)(sc[k] | m[k] << 4);
            for (uint32_t e = 0; e < 256; e++) blk[ws::q2_k::QS + 32 * (e / 128) + e % 32] |= (uint8_t)(kq_code(t, e, codes) << (2 * ((e % 128) / 32)));
            return true;
        }
        uint8_t* s = blk + ws::q4_k::SCALES;  // get_scale_min_k4's packing
        for (uint32_t j = 0; j < 4; j++) {
            s[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
            s[j + 4] = (uint8_t)(m[j] | (m[j + 4] >> 4) << 6);
            s[j + 8] = (uint8_t)((sc[j + 4] & 15u) | (m[j + 4] & 15u) << 4);
        }
        uint32_t qs = qh ? ws::q5_k::QS : ws::q4_k::QS;
        for (uint32_t e = 0; e < 256; e++) {
            uint32_t q = kq_code(t, e, codes), k = e / 32;
            blk[qs + 32 * (k / 2) + e % 32] |= (uint8_t)((q & 15u) << (4 * (k % 2)));
            if (qh) blk[ws::q5_k::QH + e % 32] |= (uint8_t)((q >> 4) << k);
        }
        return true;
    }
    if (id == ws::q3_k::GGML_ID) {  // sub-block k's 6-bit scale v + 4k mod 64 (sc = that - 32)
        for (uint32_t k = 0; k < 16; k++) {
            uint32_t s6 = (v + 4 * k) % 64;
            blk[ws::q3_k::SCALES + k % 8] |= (uint8_t)((s6 & 15u) << (4 * (k / 8)));
            blk[ws::q3_k::SCALES + 8 + k % 4] |= (uint8_t)((s6 >> 4) << (2 * (k / 4)));
        }
        for (uint32_t e = 0; e < 256; e++) {  // code u = crumb | hmask bit << 2: x = dl * (u - 4)
            uint32_t u = kq_code(v % 8, e, 8);
            blk[ws::q3_k::QS + 32 * (e / 128) + e % 32] |= (uint8_t)((u & 3u) << (2 * ((e % 128) / 32)));
            blk[ws::q3_k::HMASK + e % 32] |= (uint8_t)((u >> 2) << (e / 32));
        }
        return true;
    }
    if (id == ws::q6_k::GGML_ID) {
        // Sub-blocks k, k + 4, k + 8, k + 12 share the i8 scale 4v + k (every
        // one of the 256 over v) and hold its 64 codes, 16 each; over v
        // every code at every element.
        for (uint32_t k = 0; k < 16; k++) blk[ws::q6_k::SCALES + k] = (uint8_t)(4 * v + k % 4);
        for (uint32_t e = 0; e < 256; e++) {
            uint32_t k = e / 16, q = (16 * (k / 4) + (e % 16 + v) % 16 + 16 * (v / 16)) % 64, half = e / 128, r = e % 128;
            blk[ws::q6_k::QL + 64 * half + r % 64] |= (uint8_t)((q & 15u) << (4 * (r / 64)));
            blk[ws::q6_k::QH + 32 * half + r % 32] |= (uint8_t)((q >> 4) << (2 * (r / 32)));
        }
        return true;
    }
    return false;
}

// The groups of round (v, h) one part compares (kquant_exhaustive), as
// (first, count), and the block's d and dmin offsets (dmin -1: none).
struct KqPlan {
    uint32_t d_at;
    int dmin_at;
    uint32_t levels;
};
KqPlan kq_plan(uint32_t id) {
    if (id == ws::q2_k::GGML_ID) return KqPlan{ws::q2_k::D, (int)ws::q2_k::DMIN, 16};
    if (id == ws::q3_k::GGML_ID) return KqPlan{ws::q3_k::D, -1, 64};
    if (id == ws::q6_k::GGML_ID) return KqPlan{ws::q6_k::D, -1, 64};
    return KqPlan{ws::q4_k::D, (int)ws::q4_k::DMIN, 64};
}

void kq_run(uint32_t id, const uint8_t* blk, bool whole, uint32_t k0, uint32_t count, uint64_t& bad, uint64_t& n) {
    KqPlan p = kq_plan(id);
    if (id == ws::q2_k::GGML_ID) kq_block<ws::kq::Q2K, kq_ref_q2_k>(blk, p.d_at, p.dmin_at, whole, k0, count, bad, n);
    if (id == ws::q3_k::GGML_ID) kq_block<ws::kq::Q3K, kq_ref_q3_k>(blk, p.d_at, p.dmin_at, whole, k0, count, bad, n);
    if (id == ws::q4_k::GGML_ID) kq_block<ws::kq::K45<false>, kq_ref_q45_k<false>>(blk, p.d_at, p.dmin_at, whole, k0, count, bad, n);
    if (id == ws::q5_k::GGML_ID) kq_block<ws::kq::K45<true>, kq_ref_q45_k<true>>(blk, p.d_at, p.dmin_at, whole, k0, count, bad, n);
    if (id == ws::q6_k::GGML_ID) kq_block<ws::kq::Q6K, kq_ref_q6_k>(blk, p.d_at, p.dmin_at, whole, k0, count, bad, n);
}
}  // namespace

extern "C" {
// Part 0: every f16 d (all 65536: finite ones through `values`, the others
// through `k_put`) times every sub-block scale (with dmin = +0, so the
// value is dl * q itself) times every code at both positions of a pair
// (the f32 arithmetic; each round compares the groups that hold every
// code, their sub-block turning with (v + h), so the bit movement of every
// group is covered too); part 1 (Q2_K, Q4_K, Q5_K): d = -0 (so the value
// is -0 - dmin * m: each dmin * m, its sign of zero included, by itself),
// every f16 dmin times every min, one group a round; part 2: whole blocks
// through `k_put` for both outputs, each f16 value once as d (and once as
// dmin). Returns the values that differ (~0 for a format or part without
// a test); `compared` gets the number compared.
uint64_t ws_host_kquant_exhaustive(uint32_t ggml_id, uint32_t part, uint64_t* compared) {
    uint64_t bad = 0, n = 0;
    uint8_t blk[256];
    KqPlan p = kq_plan(ggml_id);
    // Groups a round holding every code at both pair positions (a sub-block,
    // Q2_K half of one, Q5_K two of the same scale, Q6_K all): `span`, the
    // one compared turning with (v + h) so that its level runs through all
    // as v does (kq_fill); part 1 one group of it.
    uint32_t span = ggml_id == ws::q2_k::GGML_ID ? 2 : ggml_id == ws::q3_k::GGML_ID ? 2 : ggml_id == ws::q4_k::GGML_ID ? 4 : ggml_id == ws::q5_k::GGML_ID ? 8 : 32;
    uint32_t take = ggml_id == ws::q2_k::GGML_ID ? 1 : span;
    if (!kq_fill(ggml_id, 0, false, blk) || part > 2 || (part == 1 && p.dmin_at < 0)) {
        *compared = 0;
        return ~0ull;
    }
    for (uint32_t v = 0; v < p.levels; v++) {
        kq_fill(ggml_id, v, part == 1, blk);
        for (uint32_t h = 0; h < 65536; h++) {
            if (part == 2 && v != h % p.levels) continue;
            // (d, dmin): part 0 (h, +0), part 1 (-0, h), part 2 (h, h * 40503 mod 2^16: a bijection).
            uint32_t d = part == 1 ? 0x8000u : h, dm = part == 0 ? 0u : part == 1 ? h : (h * 40503u) & 0xFFFFu;
            kq_put16(blk + p.d_at, d);
            if (p.dmin_at >= 0) kq_put16(blk + p.dmin_at, dm);
            uint32_t first = (v + h) % (32 / span) * span + (part == 1 ? v % take : 0);
            kq_run(ggml_id, blk, part == 2, part == 2 ? 0 : first, part == 2 ? 32 : part == 1 ? 1 : take, bad, n);
        }
    }
    *compared = n;
    return bad;
}
}
