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

// ---- Issue 56: the table and low-bit kernels (lut4.cu, ternary.cu,
// lowbit.cu; kernels/tests/table_exhaustive.rs). ----
namespace {
// Every unit of one block through the kernel code (lane, load, put: both
// fast and slow paths), against `ref(blk, e)`, the reference value of
// element e written out from the format's layout.
template <class F, class Out, class Ref>
void table_block(const uint8_t* blk, const float* tab, Ref ref, uint64_t& bad, uint64_t& n) {
    uint16_t got[256];
    for (uint32_t j = 0; j < F::UNITS; j++) {
        typename F::Lane lane = F::lane(j);
        F::template put<Out>(got, F::load(blk, lane), lane, tab);
    }
    for (uint32_t e = 0; e < F::ELEMS; e++, n++) bad += got[e] != Out::from_f32(ref(blk, e));
}

// Nibble e of 32 elements laid out as Q4_0's (low nibbles 0..15, high 16..31).
uint32_t nibble32(const uint8_t* qs, uint32_t e) { return e < 16 ? qs[e] & 15u : qs[e - 16] >> 4; }

// The low-bit formats' check: every f16 d (finite or not) x `patterns`
// blocks whose codes `set(blk, s)` puts every code at every element; then
// every byte value at every code byte (bytes at, at + len; v + 37i for
// v = 0..255) with a few d values (the selection of an output depends on
// its code alone, the table on d alone).
template <class F, class Out, class Set, class Ref>
void lowbit_sweep(uint32_t d_at, uint32_t at, uint32_t len, uint32_t patterns, Set set, Ref ref, uint64_t& bad, uint64_t& n) {
    uint8_t blk[256] = {0};
    for (uint32_t h = 0; h < 65536; h++) {
        blk[d_at] = (uint8_t)h, blk[d_at + 1] = (uint8_t)(h >> 8);
        for (uint32_t s = 0; s < patterns; s++) {
            set(blk, s);
            table_block<F, Out>(blk, nullptr, ref, bad, n);
        }
    }
    const uint16_t ds[8] = {0x3C00, 0xB555, 0x0001, 0x8000, 0x7BFF, 0x7C00, 0xFC00, 0x7E01};
    for (uint16_t h : ds) {
        blk[d_at] = (uint8_t)h, blk[d_at + 1] = (uint8_t)(h >> 8);
        for (uint32_t v = 0; v < 256; v++) {
            for (uint32_t i = 0; i < len; i++) blk[at + i] = (uint8_t)(v + 37 * i);
            table_block<F, Out>(blk, nullptr, ref, bad, n);
        }
    }
}

// TQ1_0's digit k (0..4) of byte b, the reference's way.
uint32_t tq1_digit(uint32_t b, uint32_t k) {
    const uint32_t pow3[5] = {1, 3, 9, 27, 81};
    return (((b * pow3[k]) & 0xFFu) * 3u) >> 8;
}

// TQ1_0's trit of element e (0..2), the reference's way.
uint32_t tq1_trit(const uint8_t* b, uint32_t e) {
    if (e < 160) return tq1_digit(b[ws::tq1_0::QS + e % 32], e / 32);
    if (e < 240) return tq1_digit(b[ws::tq1_0::QS + 32 + (e - 160) % 16], (e - 160) / 16);
    return tq1_digit(b[ws::tq1_0::QH + (e - 240) % 4], (e - 240) / 4);
}

// 16 bytes of nibble pattern v: byte i holds code (v + i) & 15 low and
// (v + 3i + 5) & 15 high, so each half holds every code once, and over the
// 16 values of v every code sits at every position.
void nibble_pattern(uint8_t* qs, uint32_t v) {
    for (uint32_t i = 0; i < 16; i++) qs[i] = (uint8_t)(((v + i) & 15u) | (((v + 3 * i + 5) & 15u) << 4));
}
}  // namespace

extern "C" {
// A table or low-bit format's kernel code against the reference formula
// (kernels/tests/table_exhaustive.rs says what each covers). Returns the
// outputs that differ, or ~0 for another format; `compared` gets the
// number compared.
uint64_t ws_host_table_exhaustive(uint32_t ggml_id, int out, uint64_t* compared) {
    uint64_t bad = 0, n = 0;
    with_out(out, [&](auto o) {
        using Out = decltype(o);
        using namespace ws;
        static const Levels iq4 = levels_of(IQ4NL_VALUES), e2m1 = levels_of(E2M1_DOUBLED);
        uint8_t blk[256];
        if (ggml_id == iq4_nl::GGML_ID) {
            // Every f16 d (finite or not) x every code at every position.
            for (uint32_t h = 0; h < 65536; h++) {
                blk[0] = (uint8_t)h, blk[1] = (uint8_t)(h >> 8);
                for (uint32_t v = 0; v < 16; v++) {
                    nibble_pattern(blk + iq4_nl::QS, v);
                    table_block<IQ4NL, Out>(blk, iq4.v, [](const uint8_t* b, uint32_t e) {
                        return mul(f16_to_f32(load_u16(b)), (float)IQ4NL_VALUES[nibble32(b + iq4_nl::QS, e)]);
                    }, bad, n);
                }
            }
        } else if (ggml_id == iq4_xs::GGML_ID) {
            // Every f16 d x every 6-bit sub-scale, each (d, sub-scale) once,
            // at sub-block position (sc + d + t) % 8: every sub-scale at every
            // position; each sub-block holds every code in both nibble halves
            // (so every d x sub-scale x code), a pattern that moves with d, t, k
            // (every code at every position).
            for (uint32_t h = 0; h < 65536; h++) {
                blk[0] = (uint8_t)h, blk[1] = (uint8_t)(h >> 8);
                for (uint32_t t = 0; t < 8; t++) {
                    uint32_t sh = 0;
                    memset(blk + iq4_xs::SCALES_L, 0, 4);
                    for (uint32_t k = 0; k < 8; k++) {
                        uint32_t sc = 8 * t + ((k + h + t) & 7);
                        blk[iq4_xs::SCALES_L + k / 2] |= (uint8_t)((sc & 15) << (4 * (k % 2)));
                        sh |= (sc >> 4) << (2 * k);
                        nibble_pattern(blk + iq4_xs::QS + 16 * k, h + 3 * t + 5 * k);
                    }
                    blk[iq4_xs::SCALES_H] = (uint8_t)sh, blk[iq4_xs::SCALES_H + 1] = (uint8_t)(sh >> 8);
                    table_block<IQ4XS, Out>(blk, iq4.v, [](const uint8_t* b, uint32_t e) {
                        uint32_t k = e / 32;
                        uint32_t sc = ((b[iq4_xs::SCALES_L + k / 2] >> (4 * (k % 2))) & 15u) |
                                      (((load_u16(b + iq4_xs::SCALES_H) >> (2 * k)) & 3u) << 4);
                        float dl = mul(f16_to_f32(load_u16(b)), (float)((int)sc - 32));
                        return mul(dl, (float)IQ4NL_VALUES[nibble32(b + iq4_xs::QS + 16 * k, e % 32)]);
                    }, bad, n);
                }
            }
        } else if (ggml_id == mxfp4::GGML_ID) {
            // Every E8M0 byte x every code at every position.
            for (uint32_t x = 0; x < 256; x++) {
                blk[mxfp4::E] = (uint8_t)x;
                for (uint32_t v = 0; v < 16; v++) {
                    nibble_pattern(blk + mxfp4::QS, v);
                    table_block<MXFP4, Out>(blk, e2m1.v, [](const uint8_t* b, uint32_t e) {
                        return mul(e8m0_half(b[mxfp4::E]), (float)E2M1_DOUBLED[nibble32(b + mxfp4::QS, e)]);
                    }, bad, n);
                }
            }
        } else if (ggml_id == nvfp4::GGML_ID) {
            // Every UE4M3 byte at every sub-block x every code at every position.
            for (uint32_t x = 0; x < 256; x++) {
                for (uint32_t k = 0; k < 4; k++) blk[nvfp4::D + k] = (uint8_t)(x + 64 * k);
                for (uint32_t v = 0; v < 16; v++) {
                    for (uint32_t k = 0; k < 4; k++) {
                        uint8_t p[16];
                        nibble_pattern(p, v + k);
                        memcpy(blk + nvfp4::QS + 8 * k, p + 8 * (v & 1), 8);
                    }
                    table_block<NVFP4, Out>(blk, e2m1.v, [](const uint8_t* b, uint32_t e) {
                        uint32_t k = e / 16, i = e % 16, byte = b[nvfp4::QS + 8 * k + i % 8];
                        return mul(ue4m3_half(b[nvfp4::D + k]), (float)E2M1_DOUBLED[i < 8 ? byte & 15u : byte >> 4]);
                    }, bad, n);
                }
            }
        } else if (ggml_id == tq1_0::GGML_ID) {
            // Trit (s + e) % 3 at element e: bytes by their digits (a byte for
            // every 5 digits, found by decoding all 256).
            uint8_t enc[243];
            bool seen[243] = {false};
            for (uint32_t b = 0; b < 256; b++) {
                uint32_t idx = 0;
                for (uint32_t k = 5; k-- > 0;) idx = 3 * idx + tq1_digit(b, k);
                if (!seen[idx]) seen[idx] = true, enc[idx] = (uint8_t)b;
            }
            for (bool x : seen) bad += !x;
            auto set = [&](uint8_t* b, uint32_t s) {
                for (uint32_t i = 0; i < 52; i++) {
                    uint32_t idx = 0;
                    for (uint32_t k = 5; k-- > 0;) {
                        uint32_t e = i < 32 ? i + 32 * k : i < 48 ? 160 + 16 * k + (i - 32) : 240 + 4 * k + (i - 48);
                        idx = 3 * idx + (i >= 48 && k == 4 ? 0 : (s + e) % 3);
                    }
                    b[tq1_0::QS + i] = enc[idx];
                }
            };
            lowbit_sweep<TQ1, Out>(tq1_0::D, tq1_0::QS, 52, 3, set, [](const uint8_t* b, uint32_t e) {
                return mul(f16_to_f32(load_u16(b + tq1_0::D)), (float)((int)tq1_trit(b, e) - 1));
            }, bad, n);
        } else if (ggml_id == tq2_0::GGML_ID) {
            // Crumb (s + e + e / 32) % 4 at element e (the four of a byte differ).
            auto byte_of = [](uint32_t e) { return tq2_0::QS + 32 * (e / 128) + e % 32; };
            auto shift_of = [](uint32_t e) { return 2 * ((e % 128) / 32); };
            auto set = [&](uint8_t* b, uint32_t s) {
                memset(b + tq2_0::QS, 0, 64);
                for (uint32_t e = 0; e < 256; e++) b[byte_of(e)] |= (uint8_t)(((s + e + e / 32) % 4) << shift_of(e));
            };
            lowbit_sweep<TQ2, Out>(tq2_0::D, tq2_0::QS, 64, 4, set, [&](const uint8_t* b, uint32_t e) {
                uint32_t q = (b[byte_of(e)] >> shift_of(e)) & 3u;
                return mul(f16_to_f32(load_u16(b + tq2_0::D)), (float)((int)q - 1));
            }, bad, n);
        } else if (ggml_id == q1_0::GGML_ID) {
            // Bit (s + e + e / 8) % 2 at element e.
            auto set = [](uint8_t* b, uint32_t s) {
                memset(b + q1_0::QS, 0, 16);
                for (uint32_t e = 0; e < 128; e++) b[q1_0::QS + e / 8] |= (uint8_t)(((s + e + e / 8) % 2) << (e % 8));
            };
            lowbit_sweep<Q1, Out>(q1_0::D, q1_0::QS, 16, 2, set, [](const uint8_t* b, uint32_t e) {
                float d = f16_to_f32(load_u16(b + q1_0::D));
                return ((b[q1_0::QS + e / 8] >> (e % 8)) & 1u) ? d : -d;
            }, bad, n);
        } else if (ggml_id == q2_0::GGML_ID) {
            // Crumb (s + e + e / 4) % 4 at element e.
            auto set = [](uint8_t* b, uint32_t s) {
                memset(b + q2_0::QS, 0, 16);
                for (uint32_t e = 0; e < 64; e++) b[q2_0::QS + e / 4] |= (uint8_t)(((s + e + e / 4) % 4) << (2 * (e % 4)));
            };
            lowbit_sweep<Q2, Out>(q2_0::D, q2_0::QS, 16, 4, set, [](const uint8_t* b, uint32_t e) {
                uint32_t q = (b[q2_0::QS + e / 4] >> (2 * (e % 4))) & 3u;
                return mul((float)((int)q - 1), f16_to_f32(load_u16(b + q2_0::D)));
            }, bad, n);
        } else {
            bad = ~0ull;
        }
    });
    *compared = n;
    return bad;
}
}

// ---- Issue 56: the grid i-quant kernels (grid.cu), exhaustive checks
// (kernels/tests/iq_grid_exhaustive.rs). Each format's `load` + `put`, all
// 32 groups of a super-block, against the reference formula of
// docs/numerics.md written out element by element (gguf-py's dequantize,
// the grids and KSIGNS as generated from it, never the selector grids).
#include <functional>
#include <vector>

namespace {
// The values of grid entry i at position j (IQ1: -1, 0, 1 as int8).
template <class T>
int grid_value(const T* grid, uint32_t i, uint32_t j) {
    return (int)(int8_t)(uint8_t)(grid[i] >> (8 * j));
}

// The fewest entries of `grid` (n entries of `width` values, each one of
// `levels`) that together put each level at every position: a depth-first
// search, deepening, over the uncovered (position, level) with the fewest
// entries that cover it.
template <class T>
std::vector<uint32_t> grid_cover(const T* grid, uint32_t n, uint32_t width, std::vector<int> levels) {
    size_t nl = levels.size();
    std::vector<uint64_t> mask(n);
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t j = 0; j < width; j++)
            for (size_t v = 0; v < nl; v++)
                if (grid_value(grid, i, j) == levels[v]) mask[i] |= 1ull << (j * nl + v);
    std::vector<uint32_t> chosen;
    std::function<bool(uint64_t, uint32_t)> search = [&](uint64_t rem, uint32_t left) {
        if (!rem) return true;
        if ((uint32_t)__builtin_popcountll(rem) > left * width) return false;
        uint64_t pick = 0;
        uint32_t fewest = ~0u;
        for (uint64_t r = rem; r; r &= r - 1) {
            uint64_t bit = r & -r;
            uint32_t count = 0;
            for (uint64_t m : mask) count += (m & bit) != 0;
            if (count < fewest) fewest = count, pick = bit;
        }
        for (uint32_t i = 0; i < n; i++) {
            if (!(mask[i] & pick)) continue;
            chosen.push_back(i);
            if (search(rem & ~mask[i], left - 1)) return true;
            chosen.pop_back();
        }
        return false;
    };
    for (uint32_t k = 1; k <= 16; k++)
        if (search((1ull << (width * nl)) - 1, k)) return chosen;
    return {};
}

void put_u16(uint8_t* p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
void put_u32(uint8_t* p, uint32_t v) {
    put_u16(p, v);
    put_u16(p + 2, v >> 16);
}
uint32_t get_u32(const uint8_t* p) { return (uint32_t)p[0] | (p[1] << 8) | (p[2] << 16) | ((uint32_t)p[3] << 24); }
float f16_at(const uint8_t* p) { return ws::f16_to_f32(ws::load_u16(p)); }
float sign_bit(uint32_t s, uint32_t j) { return (s >> j) & 1u ? -1.0f : 1.0f; }

// The reference value of element e (0..255) of a super-block, per format.
float iq2_xxs_ref(const uint8_t* b, uint32_t e) {
    const uint8_t* qs = b + ws::iq2_xxs::QS + 8 * (e / 32);
    uint32_t aux = get_u32(qs + 4), l = e % 32 / 8, j = e % 8;
    float db = ws::mul(ws::mul(f16_at(b), ws::add(0.5f, (float)(aux >> 28))), 0.25f);
    return ws::mul(ws::mul(db, (float)grid_value(ws::IQ2XXS_GRID, qs[l], j)), sign_bit(ws::KSIGNS[(aux >> (7 * l)) & 127], j));
}

float iq2_scale(const uint8_t* b, uint32_t scales, uint32_t e) {
    uint32_t s = (b[scales + e / 32] >> (4 * (e / 16 % 2))) & 15;
    return ws::mul(ws::mul(f16_at(b), ws::add(0.5f, (float)s)), 0.25f);
}
float iq2_xs_ref(const uint8_t* b, uint32_t e) {
    uint32_t q = ws::load_u16(b + ws::iq2_xs::QS + 2 * (e / 8)), j = e % 8;
    float g = (float)grid_value(ws::IQ2XS_GRID, q & 511, j);
    return ws::mul(ws::mul(iq2_scale(b, ws::iq2_xs::SCALES, e), g), sign_bit(ws::KSIGNS[q >> 9], j));
}
float iq2_s_ref(const uint8_t* b, uint32_t e) {
    uint32_t i = e / 8, j = e % 8, idx = b[ws::iq2_s::QS + i] | ((b[ws::iq2_s::QH + i / 4] >> (2 * (i % 4))) & 3) << 8;
    float g = (float)grid_value(ws::IQ2S_GRID, idx, j);
    return ws::mul(ws::mul(iq2_scale(b, ws::iq2_s::SCALES, e), g), sign_bit(b[ws::iq2_s::SIGNS + i], j));
}

float iq3_xxs_ref(const uint8_t* b, uint32_t e) {
    uint32_t ib = e / 32, l = e % 32 / 8, j = e % 8, aux = get_u32(b + ws::iq3_xxs::SCALES + 4 * ib);
    float db = ws::mul(ws::mul(f16_at(b), ws::add(0.5f, (float)(aux >> 28))), 0.5f);
    float g = (float)grid_value(ws::IQ3XXS_GRID, b[ws::iq3_xxs::QS + 8 * ib + 2 * l + j / 4], j % 4);
    return ws::mul(ws::mul(db, g), sign_bit(ws::KSIGNS[(aux >> (7 * l)) & 127], j));
}
float iq3_s_ref(const uint8_t* b, uint32_t e) {
    uint32_t i = e / 4, ib = e / 32, idx = b[ws::iq3_s::QS + i] | ((b[ws::iq3_s::QH + i / 8] >> (i % 8)) & 1) << 8;
    uint32_t s = (b[ws::iq3_s::SCALES + ib / 2] >> (4 * (ib % 2))) & 15;
    float db = ws::mul(f16_at(b), (float)(1 + 2 * s)), g = (float)grid_value(ws::IQ3S_GRID, idx, e % 4);
    return ws::mul(ws::mul(db, g), sign_bit(b[ws::iq3_s::SIGNS + e / 8], e % 8));
}

float iq1_value(float d, uint32_t s, uint32_t idx, bool negative, uint32_t j) {
    float dl = ws::mul(d, (float)(2 * s + 1));
    return ws::mul(dl, ws::add((float)grid_value(ws::IQ1S_GRID, idx, j), negative ? -0.125f : 0.125f));
}
float iq1_s_ref(const uint8_t* b, uint32_t e) {
    uint32_t ib = e / 32, l = e % 32 / 8, qh = ws::load_u16(b + ws::iq1_s::QH + 2 * ib);
    uint32_t idx = b[ws::iq1_s::QS + 4 * ib + l] | ((qh >> (3 * l)) & 7) << 8;
    return iq1_value(f16_at(b), (qh >> 12) & 7, idx, qh & 0x8000, e % 8);
}
float iq1_m_ref(const uint8_t* b, uint32_t e) {
    const uint8_t* sc = b + ws::iq1_m::SCALES;
    uint32_t d = 0;
    for (uint32_t m = 0; m < 4; m++) d |= (ws::load_u16(sc + 2 * m) >> 12) << (4 * m);
    uint32_t i = e / 8, s = (ws::load_u16(sc + 2 * (i / 8)) >> (3 * (i / 2 % 4))) & 7;
    uint32_t h = (b[ws::iq1_m::QH + i / 2] >> (4 * (i % 2))) & 15, idx = b[ws::iq1_m::QS + i] | (h & 7) << 8;
    return iq1_value(ws::f16_to_f32((uint16_t)d), s, idx, h & 8, e % 8);
}

// Runs `fill(block, i)` for i < blocks, then `groups` groups of the block,
// k = (i + r) % 32 for r < groups (all 32, or the first few by a rotating
// lane), through F's load and put, and counts their outputs that differ
// from `ref` rounded to Out.
template <class F, class Out, class Fill, class Ref>
void iq_blocks(uint64_t blocks, uint32_t groups, Fill fill, Ref ref, uint64_t* bad, uint64_t* n) {
    uint8_t blk[F::BYTES];
    uint16_t got[8];
    for (uint64_t i = 0; i < blocks; i++) {
        memset(blk, 0, sizeof blk);
        fill(blk, i);
        for (uint32_t r = 0; r < groups; r++) {
            uint32_t k = (uint32_t)(i + r) % 32;
            typename F::Lane lane = F::lane(k);
            F::template put<Out>(got, F::load(blk, lane), lane);
            for (uint32_t j = 0; j < 8; j++) *bad += got[j] != Out::from_f32(ref(blk, 8 * k + j));
            *n += 8;
        }
    }
}

// Part 0's codes: group k of block i takes grid entry cover[r % size]
// (IQ3: and cover[(r + 1) % size] for its second half) and negates all or
// none of its values, by r = (k - i) % 32 < 2 size: the groups iq_blocks
// runs (the lane rotating with i) put every value at every position,
// either sign.
struct Cover {
    std::vector<uint32_t> entries;  // grid_cover's (at most 16)
    bool signs = true;              // IQ1: no signs, one group an entry
    uint32_t groups() const { return (signs ? 2 : 1) * (uint32_t)entries.size(); }
    uint32_t entry(uint32_t k, uint64_t i, uint32_t half = 0) const { return entries[(r(k, i) + half) % entries.size()]; }
    bool negated(uint32_t k, uint64_t i) const { return r(k, i) / entries.size() % 2; }
    static uint32_t r(uint32_t k, uint64_t i) { return (k + 32 - (uint32_t)(i % 32)) % 32; }
};

// The f16 d of the code checks: a negative one with every mantissa bit
// set (-0.4998; every table's entries and their negations are distinct).
const uint16_t CODE_DS[1] = {0xB7FF};

// Both parts of a format's check: part 0 (scales) fills block i with
// d = i >> 4 and sub-block scale (IQ1: and delta sign) i & 15 and
// `cover`'s codes; part 1 (codes) with each d of CODE_DS, the codes a
// function of i (s = ~0: `fill` varies the scales with i).
template <class F, class Out, class Fill, class Ref>
void iq_parts(int part, const Cover& cover, uint64_t code_blocks, Fill fill, Ref ref, uint64_t* bad, uint64_t* n) {
    if (cover.entries.empty() || cover.entries.size() > 16)
        *bad = ~0ull - 1;  // no cover that fits in a super-block: a failure
    else if (part == 0)
        iq_blocks<F, Out>(65536 * 16, cover.groups(), [&](uint8_t* b, uint64_t i) { fill(b, i, (uint16_t)(i >> 4), (uint32_t)(i & 15)); }, ref, bad, n);
    else
        for (uint16_t h : CODE_DS) iq_blocks<F, Out>(code_blocks, 32, [&](uint8_t* b, uint64_t i) { fill(b, i, h, ~0u); }, ref, bad, n);
}

// A scale nibble: s, or (s = ~0) varied with block i and field m.
uint32_t nibble(uint32_t s, uint64_t i, uint32_t m) { return s != ~0u ? s : (uint32_t)(i * 7 + m * 3) & 15; }
// `bytes` bytes of such nibbles at p.
void nibbles(uint8_t* p, uint32_t bytes, uint32_t s, uint64_t i) {
    for (uint32_t m = 0; m < bytes; m++) p[m] = (uint8_t)(nibble(s, i, 2 * m) | nibble(s, i, 2 * m + 1) << 4);
}
}  // namespace

extern "C" {
// part 0, scales: every f16 d (finite, infinite, NaN) times every
// sub-block scale (IQ1: and the delta's sign) times every grid value at
// every position, with either sign (Cover). part 1, codes: for each d of
// CODE_DS, every group (lane) times every code the group reads (grid
// index with its high bits, sign index or byte), the scales varied.
// Returns the outputs that differ (writing `out`, with_out), ~0 for an
// unknown format or part; `compared` gets the number compared.
uint64_t ws_host_iq_grid_exhaustive(uint32_t ggml_id, int out, int part, uint64_t* compared) {
    uint64_t bad = 0, n = 0;
    bool known = part == 0 || part == 1;
    with_out(out, [&](auto o) {
        using Out = decltype(o);
        const std::vector<int> iq2 = {8, 25, 43};
        if (!known) return;
        if (ggml_id == ws::iq2_xxs::GGML_ID) {
            // Codes: group k's index (i + 11k) & 255, sign index ((i >> 8)
            // + 5k) & 127: for each k, every pair once in 2^15 blocks.
            Cover c{grid_cover(ws::IQ2XXS_GRID, 256, 8, iq2)};
            iq_parts<ws::Iq2Xxs, Out>(part, c, 1 << 15, [&](uint8_t* b, uint64_t i, uint16_t h, uint32_t s) {
                put_u16(b, h);
                for (uint32_t k = 0; k < 32; k++) {
                    uint8_t* qs = b + ws::iq2_xxs::QS + 8 * (k / 4);
                    bool p0 = s != ~0u;
                    qs[k % 4] = (uint8_t)(p0 ? c.entry(k, i) : i + 11 * k);
                    uint32_t sign = p0 ? (c.negated(k, i) ? 127u : 0u) : ((uint32_t)(i >> 8) + 5 * k) & 127u;
                    put_u32(qs + 4, (get_u32(qs + 4) & 0x0FFFFFFFu) | sign << (7 * (k % 4)) | nibble(s, i, k / 4) << 28);
                }
            }, iq2_xxs_ref, &bad, &n);
        } else if (ggml_id == ws::iq2_xs::GGML_ID) {
            // Codes: group k's u16 (i + 2477k) & 0xFFFF: every index and
            // sign index once for each k in 2^16 blocks.
            Cover c{grid_cover(ws::IQ2XS_GRID, 512, 8, iq2)};
            iq_parts<ws::Iq2Xs, Out>(part, c, 1 << 16, [&](uint8_t* b, uint64_t i, uint16_t h, uint32_t s) {
                put_u16(b, h);
                nibbles(b + ws::iq2_xs::SCALES, 8, s, i);
                for (uint32_t k = 0; k < 32; k++)
                    put_u16(b + ws::iq2_xs::QS + 2 * k, s != ~0u ? c.entry(k, i) | (c.negated(k, i) ? 127u << 9 : 0) : (uint32_t)(i + 2477 * k));
            }, iq2_xs_ref, &bad, &n);
        } else if (ggml_id == ws::iq2_s::GGML_ID) {
            // Codes: group k's (i + 40503k) & 0x3FFFF, the index in bits
            // 0..9, the sign byte above: every pair once for each k in
            // 2^18 blocks.
            Cover c{grid_cover(ws::IQ2S_GRID, 1024, 8, iq2)};
            iq_parts<ws::Iq2S, Out>(part, c, 1 << 18, [&](uint8_t* b, uint64_t i, uint16_t h, uint32_t s) {
                put_u16(b, h);
                nibbles(b + ws::iq2_s::SCALES, 8, s, i);
                for (uint32_t k = 0; k < 32; k++) {
                    uint32_t code = s != ~0u ? c.entry(k, i) | (c.negated(k, i) ? 0xFFu << 10 : 0) : (uint32_t)(i + 40503 * k) & 0x3FFFFu;
                    b[ws::iq2_s::QS + k] = (uint8_t)code;
                    b[ws::iq2_s::QH + k / 4] |= (uint8_t)(((code >> 8) & 3) << (2 * (k % 4)));
                    b[ws::iq2_s::SIGNS + k] = (uint8_t)(code >> 10);
                }
            }, iq2_s_ref, &bad, &n);
        } else if (ggml_id == ws::iq3_xxs::GGML_ID) {
            // Codes: group k's first index (i + 11k) & 255 and sign index
            // ((i >> 8) + 5k) & 127 (every pair once for each k in 2^15
            // blocks), its second index 73 i0 + 29 t + k (for each sign
            // index, a bijection of the first: every pair too).
            Cover c{grid_cover(ws::IQ3XXS_GRID, 256, 4, {4, 12, 20, 28, 36, 44, 52, 62})};
            iq_parts<ws::Iq3Xxs, Out>(part, c, 1 << 15, [&](uint8_t* b, uint64_t i, uint16_t h, uint32_t s) {
                put_u16(b, h);
                for (uint32_t k = 0; k < 32; k++) {
                    bool p0 = s != ~0u;
                    uint32_t i0 = p0 ? c.entry(k, i) : (uint32_t)(i + 11 * k) & 255;
                    uint32_t t = p0 ? (c.negated(k, i) ? 127u : 0u) : ((uint32_t)(i >> 8) + 5 * k) & 127u;
                    b[ws::iq3_xxs::QS + 2 * k] = (uint8_t)i0;
                    b[ws::iq3_xxs::QS + 2 * k + 1] = (uint8_t)(p0 ? c.entry(k, i, 1) : 73 * i0 + 29 * t + k);
                    uint8_t* aux = b + ws::iq3_xxs::SCALES + 4 * (k / 4);
                    put_u32(aux, (get_u32(aux) & 0x0FFFFFFFu) | t << (7 * (k % 4)) | nibble(s, i, k / 4) << 28);
                }
            }, iq3_xxs_ref, &bad, &n);
        } else if (ggml_id == ws::iq3_s::GGML_ID) {
            // Codes: group k's (i + 40503k) & 0x1FFFF, the first index in
            // bits 0..8, the sign byte above (every pair once for each k in
            // 2^17 blocks), the second index 73 i0 + 29 signs + k (for each
            // sign byte a bijection of the first).
            Cover c{grid_cover(ws::IQ3S_GRID, 512, 4, {1, 3, 5, 7, 9, 11, 13, 15})};
            iq_parts<ws::Iq3S, Out>(part, c, 1 << 17, [&](uint8_t* b, uint64_t i, uint16_t h, uint32_t s) {
                put_u16(b, h);
                nibbles(b + ws::iq3_s::SCALES, 4, s, i);
                for (uint32_t k = 0; k < 32; k++) {
                    bool p0 = s != ~0u;
                    uint32_t code = p0 ? c.entry(k, i) | (c.negated(k, i) ? 0xFFu << 9 : 0) : (uint32_t)(i + 40503 * k) & 0x1FFFFu;
                    uint32_t i0 = code & 511, i1 = p0 ? c.entry(k, i, 1) : (73 * i0 + 29 * (code >> 9) + k) & 511;
                    b[ws::iq3_s::QS + 2 * k] = (uint8_t)i0;
                    b[ws::iq3_s::QS + 2 * k + 1] = (uint8_t)i1;
                    b[ws::iq3_s::QH + k / 4] |= (uint8_t)(((i0 >> 8) | (i1 >> 8) << 1) << (2 * (k % 4)));
                    b[ws::iq3_s::SIGNS + k] = (uint8_t)(code >> 9);
                }
            }, iq3_s_ref, &bad, &n);
        } else if (ggml_id == ws::iq1_s::GGML_ID) {
            // Part 0: s & 7 the scale, s >> 3 the delta's sign, of every
            // sub-block. Codes: group k's index (i + 11k) & 2047, its
            // sub-block's scale and delta sign ((i >> 11) + ib) & 15: every
            // triple once for each k in 2^15 blocks.
            Cover c{grid_cover(ws::IQ1S_GRID, 2048, 8, {-1, 0, 1}), false};
            iq_parts<ws::Iq1S, Out>(part, c, 1 << 15, [&](uint8_t* b, uint64_t i, uint16_t h, uint32_t s) {
                put_u16(b, h);
                for (uint32_t k = 0; k < 32; k++) {
                    uint32_t idx = s != ~0u ? c.entry(k, i) : (uint32_t)(i + 11 * k) & 2047;
                    uint32_t sd = s != ~0u ? s : ((uint32_t)(i >> 11) + k / 4) & 15;
                    uint8_t* qh = b + ws::iq1_s::QH + 2 * (k / 4);
                    b[ws::iq1_s::QS + k] = (uint8_t)idx;
                    put_u16(qh, (ws::load_u16(qh) & 0x0FFFu) | (idx >> 8) << (3 * (k % 4)) | sd << 12);
                }
            }, iq1_s_ref, &bad, &n);
        } else if (ggml_id == ws::iq1_m::GGML_ID) {
            // d's nibbles in the scale words' top nibbles. Part 0: s & 7
            // every 3-bit scale, s >> 3 every delta sign. Codes: group k's
            // index (i + 11k) & 2047, delta sign bit 11 of i + k, its
            // scale ((i >> 12) + k / 2) & 7: every triple once for each k in
            // 2^15 blocks.
            Cover c{grid_cover(ws::IQ1S_GRID, 2048, 8, {-1, 0, 1}), false};
            iq_parts<ws::Iq1M, Out>(part, c, 1 << 15, [&](uint8_t* b, uint64_t i, uint16_t h, uint32_t s) {
                uint8_t* sc = b + ws::iq1_m::SCALES;
                for (uint32_t m = 0; m < 4; m++) put_u16(sc + 2 * m, (uint32_t)(h >> (4 * m)) << 12);
                for (uint32_t k = 0; k < 32; k++) {
                    bool p0 = s != ~0u;
                    uint32_t idx = p0 ? c.entry(k, i) : (uint32_t)(i + 11 * k) & 2047;
                    uint32_t neg = p0 ? s >> 3 : (uint32_t)((i >> 11) + k) & 1;
                    uint32_t scale = p0 ? s & 7 : ((uint32_t)(i >> 12) + k / 2) & 7;
                    b[ws::iq1_m::QS + k] = (uint8_t)idx;
                    b[ws::iq1_m::QH + k / 2] |= (uint8_t)(((idx >> 8) | neg << 3) << (4 * (k % 2)));
                    uint8_t* w = sc + 2 * (k / 8);
                    uint32_t at = 3 * (k / 2 % 4);
                    put_u16(w, (ws::load_u16(w) & ~(7u << at)) | scale << at);
                }
            }, iq1_m_ref, &bad, &n);
        } else {
            known = false;
        }
    });
    *compared = n;
    return known ? bad : ~0ull;
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

// ---- Issue 56: the scaled safetensors kernels and F16 (fp8.cu, packed.cu,
// float.cu; kernels/tests/scaled_exhaustive.rs). Each returns the outputs
// (or checks) that differ from the reference; `compared` gets how many.
namespace {
// Scale i of the sweep: every BF16 bit pattern (every sign and exponent,
// zeros, subnormals, infinities and NaNs) with mixed low mantissa bits.
float sweep_scale(uint32_t i) { return ws::bits_float((i << 16) | ((i * 0x9E37u) & 0xFFFFu)); }
// f(Out{}, i, scale i) for every sweep scale, writing `out` (with_out).
template <class F>
void each_sweep_scale(int out, F f) {
    with_out(out, [&](auto o) {
        for (uint32_t i = 0; i < 65536; i++) f(o, i, sweep_scale(i));
    });
}
ws::uint4 words(const uint8_t b[16]) {
    uint32_t w[4];
    memcpy(w, b, 16);
    return ws::uint4{w[0], w[1], w[2], w[3]};
}
}  // namespace

extern "C" {
// FP8 (e4m3 1: E4M3, 0: E5M2): (1) the decode of every code at every byte
// position against e4m3_to_f32 / e5m2_to_f32 (the NaN codes, and E5M2's
// infinities, excepted: the gate sends them to the reference); (2) the
// gate on every code at every position beside every other byte value;
// (3) whole units (fp8_unit) against the reference formula: every sweep
// scale times every code at every position.
uint64_t ws_host_fp8_exhaustive(int e4m3, int out, uint64_t* compared) {
    uint64_t bad = 0, n = 0;
    auto special = [&](uint32_t b) { return e4m3 ? (b & 0x7Fu) == 0x7Fu : (b & 0x7Cu) == 0x7Cu; };
    for (uint32_t b = 0; b < 256; b++)
        for (int j = 0; j < 4; j++) {
            uint32_t w = b << (8 * j);
            float got = e4m3 ? ws::mul(ws::fp8_down<true>(w, j), ws::fp8_up<true>()) : ws::mul(ws::fp8_down<false>(w, j), ws::fp8_up<false>());
            float want = e4m3 ? ws::e4m3_to_f32((uint8_t)b) : ws::e5m2_to_f32((uint8_t)b);
            if (!special(b)) bad += ws::float_bits(got) != ws::float_bits(want), n++;
            for (uint32_t o = 0; o < 256; o++) {
                uint32_t other = (o * 0x01010101u) & ~(0xFFu << (8 * j));
                uint32_t g = e4m3 ? ws::fp8_special<true>(w | other) : ws::fp8_special<false>(w | other);
                bad += (g != 0) != (special(b) || special(o)), n++;
            }
        }
    each_sweep_scale(out, [&](auto o, uint32_t, float s) {
        using Out = decltype(o);
        uint16_t got[16];
        uint8_t codes[16];
        for (uint32_t v = 0; v < 256; v++) {
            for (int j = 0; j < 16; j++) codes[j] = (uint8_t)(v + 37 * j);
            if (e4m3)
                ws::fp8_unit<Out, true>(got, words(codes), s);
            else
                ws::fp8_unit<Out, false>(got, words(codes), s);
            for (int j = 0; j < 16; j++) {
                uint16_t want = e4m3 ? ws::fp8_value<Out, true>(codes[j], s) : ws::fp8_value<Out, false>(codes[j], s);
                bad += got[j] != want, n++;
            }
        }
    });
    *compared = n;
    return bad;
}

// The specialised walk (scale_grid.cuh `Walk`) of every thread of a
// `g` x `b` grid over a chunk of n elements from `first` of a matrix with
// `cols` columns and br x bc blocks (grid_cols gc): each unit's scale
// index against (r / br) * gc + c / bc computed in 64 bits. Returns the
// units whose index differs, or ~0 when the launch does not take the walk;
// `compared` gets the units compared.
uint64_t ws_host_walk_mismatches(uint64_t first, uint64_t n, uint64_t cols, uint64_t br, uint64_t bc, uint64_t gc, uint32_t g,
                                 uint32_t b, uint64_t* compared) {
    uint64_t bad = 0, k = 0;
    ws::ScaleParams p{nullptr, first, gc, {}, {}, {}};
    uint64_t ds[3] = {cols, br, bc};
    ws::Divisor* dv[3] = {&p.cols, &p.block_rows, &p.block_cols};
    for (int i = 0; i < 3; i++) {  // launch.rs `divisor`
        uint64_t d = ds[i], l = 0;
        while (l < 64 && (1ull << l) < d) l++;
        uint64_t magic = (uint64_t)((((unsigned __int128)1 << 64) * (((unsigned __int128)1 << l) - d)) / d + 1);
        *dv[i] = ws::Divisor{d, magic, (uint32_t)(l < 1 ? l : 1), (uint32_t)(l > 0 ? l - 1 : 0)};
    }
    bool taken = true;
    grid(g, b, [&](ws::Coords c) {
        ws::Walk w;
        if (!ws::walk_start(p, n, c, w)) {
            taken = false;
            return;
        }
        for (uint64_t u = c.first(); u <= n / ws::UNIT; u += c.stride()) {
            if (u == n / ws::UNIT && n % ws::UNIT == 0) break;
            uint64_t e = first + u * ws::UNIT, r = e / cols, col = e % cols;
            bad += w.index() != (r / br) * gc + col / bc, k++;
            w.step();
        }
    });
    *compared = k;
    return taken ? bad : ~0ull;
}

// F16 -> out: every f16 at every position of a group (f16_group) against
// from_f16_bits.
uint64_t ws_host_f16_exhaustive(int out, uint64_t* compared) {
    uint64_t bad = 0, n = 0;
    with_out(out, [&](auto o) {
        using Out = decltype(o);
        uint16_t got[8], h[8];
        for (uint32_t v = 0; v < 65536; v++) {
            for (uint32_t j = 0; j < 8; j++) h[j] = (uint16_t)(v + 4099u * j);
            uint32_t w[4];
            memcpy(w, h, 16);
            ws::f16_group<Out>(got, ws::uint4{w[0], w[1], w[2], w[3]});
            for (uint32_t j = 0; j < 8; j++) bad += got[j] != Out::from_f16_bits(h[j]), n++;
        }
    });
    *compared = n;
    return bad;
}

// E2M1: every code at every position of a unit (e2m1_unit) times every
// sweep scale, against e2m1_to_f32 times the scale, rounded.
uint64_t ws_host_e2m1_exhaustive(int out, uint64_t* compared) {
    uint64_t bad = 0, n = 0;
    each_sweep_scale(out, [&](auto o, uint32_t, float s) {
        using Out = decltype(o);
        uint16_t got[16];
        for (uint32_t v = 0; v < 16; v++) {
            uint32_t w[2] = {0, 0};
            for (uint32_t j = 0; j < 16; j++) w[j / 8] |= ((v + 3 * j) & 15u) << (4 * (j % 8));
            ws::e2m1_unit<Out>(got, ws::uint2{w[0], w[1]}, s);
            for (uint32_t j = 0; j < 16; j++) bad += got[j] != Out::from_f32(ws::mul(ws::e2m1_to_f32((v + 3 * j) & 15u), s)), n++;
        }
    });
    *compared = n;
    return bad;
}

// INT4 (bits 4) / INT8 (8): (1) round_f16_normal against round_f16 on
// every f32 its gate admits (|x| in [2^-14, 65520), and both zeros); (2)
// whole units (int_unit, with and without F16 rounding) against int_value
// on every sweep scale times a set of zero points (integers, fractions,
// 2^23, infinities, NaN), every code at every position across the scales.
uint64_t ws_host_int_exhaustive(int bits, int out, uint64_t* compared) {
    uint64_t bad = 0, n = 0;
    if (bits == 8) {  // (1) once (it does not depend on the bits)
        for (uint32_t sign = 0; sign < 2; sign++) {
            for (uint32_t b = 0x38800000u; b < 0x477FF000u; b++) {
                float x = ws::bits_float(b | (sign << 31));
                bad += ws::float_bits(ws::round_f16_normal(x)) != ws::float_bits(ws::round_f16(x)), n++;
            }
            float z = ws::bits_float(sign << 31);
            bad += ws::float_bits(ws::round_f16_normal(z)) != ws::float_bits(ws::round_f16(z)), n++;
        }
    }
    const float zs[] = {0.0f, -0.0f, 1.0f, -3.0f, 7.0f, -8.0f, 127.0f, -128.0f, 0.5f, -1e-3f, 8388608.0f, 8388610.0f,
                        ws::bits_float(0x7F800000u), ws::bits_float(0x7FC00000u)};
    each_sweep_scale(out, [&](auto o, uint32_t i, float s) {
        using Out = decltype(o);
        uint16_t got[16];
        uint8_t b[16];
        for (uint32_t zi = 0; zi < sizeof(zs) / sizeof(zs[0]); zi++) {
            float z = zs[zi];
            uint32_t v = i * 7 + zi * 16;  // every code at every position across the sweep
            uint32_t codes[16];
            memset(b, 0, 16);
            for (uint32_t j = 0; j < 16; j++) {
                codes[j] = (v + 17 * j) & ((1u << bits) - 1);
                if (bits == 8)
                    b[j] = (uint8_t)codes[j];
                else
                    b[j / 2] |= (uint8_t)(codes[j] << (4 * (j % 2)));
            }
            for (int to_f16 = 0; to_f16 < 2; to_f16++) {
                if (bits == 8 && to_f16)
                    ws::int_unit<Out, 8, true>(got, words(b), z, s);
                else if (bits == 8)
                    ws::int_unit<Out, 8, false>(got, words(b), z, s);
                else if (to_f16)
                    ws::int_unit<Out, 4, true>(got, words(b), z, s);
                else
                    ws::int_unit<Out, 4, false>(got, words(b), z, s);
                for (uint32_t j = 0; j < 16; j++) bad += got[j] != ws::int_value<Out>((int)codes[j] - (1 << (bits - 1)), z, s, to_f16), n++;
            }
        }
    });
    *compared = n;
    return bad;
}

}
