// GGUF blocks -> GPTQ's layout (the keep-quantized mode): bit movement
// only, no arithmetic. The table of exact targets and the CPU kernel are
// weightstream-repack's (crates/weightstream-repack/src/{gptq,codes}.rs);
// this is the same move on the device, checked against it bit for bit on
// the host grid (kernels/tests/gptq_parity.rs).
//
// qweight is int32 `[cols / pack, rows]`: the codes of input features
// 8k..8k+7 of output row r are one word (4 bits each) or two (8 bits
// each) at `[k * (8 / pack) + w][r]`, low bits first; scales are fp16
// `[cols / group, rows]`, each block's d (a ternary block's twice).
//
// Work item i is 8 input features of one row: r = i % rows, so a warp's
// 32 items write 32 consecutive words of qweight (coalesced); each reads
// its 8 codes from its row's block (rows are `width` elements of whole
// blocks, back to back: what the core read for the rows' column range).
#include "iquant.cuh"
#include "legacy.cuh"

namespace ws {

// TQ1_0's base-3 digit k of `byte` (ggml: (byte * 3^k mod 256) * 3 >> 8).
WS_HD uint32_t gptq_trit(uint32_t byte, uint32_t k) {
    const uint32_t pow3[5] = {1, 3, 9, 27, 81};
    return ((((byte * pow3[k]) & 0xFFu) * 3u) >> 8);
}

// The GPTQ codes (value = d * (code - 2^(bits-1))) of elements e0..e0+7
// (e0 a multiple of 8) of a block of ggml type `format`: codes.rs, per
// format. Returns false for a format without a target.
WS_HD bool gptq_codes8(uint32_t format, const uint8_t* blk, uint32_t e0, uint8_t out[8]) {
    uint8_t q[8];
    switch (format) {
        case q4_0::GGML_ID:  // d * (q - 8): the nibble is the uint4b8 code
            quarter_nibbles(blk + q4_0::QS, e0 / 8, out);
            return true;
        case q8_0::GGML_ID:  // d * q, q int8: + 128 flips the sign bit
            WS_UNROLL
            for (int j = 0; j < 8; j++) out[j] = (uint8_t)(blk[q8_0::QS + e0 + j] ^ 0x80u);
            return true;
        case q5_0::GGML_ID: {  // d * (q - 16), bit 4 of element j: bit j of qh
            uint32_t qh = qh_word(blk + q5_0::QH);
            quarter_nibbles(blk + q5_0::QS, e0 / 8, q);
            WS_UNROLL
            for (int j = 0; j < 8; j++) out[j] = (uint8_t)((q[j] | (((qh >> (e0 + j)) & 1u) << 4)) + 112u);
            return true;
        }
        case iq4_nl::GGML_ID:  // d * IQ4NL_VALUES[q], int8 levels: + 128
            quarter_nibbles(blk + iq4_nl::QS, e0 / 8, q);
            WS_UNROLL
            for (int j = 0; j < 8; j++) out[j] = (uint8_t)(IQ4NL_VALUES[q[j]] + 128);
            return true;
        case q1_0::GGML_ID: {  // +d where bit j % 8 of qs[j / 8] is set, else -d: 9 or 7
            uint32_t bits = blk[q1_0::QS + e0 / 8];
            WS_UNROLL
            for (int j = 0; j < 8; j++) out[j] = ((bits >> j) & 1u) ? 9 : 7;
            return true;
        }
        case q2_0::GGML_ID: {  // d * (q - 1), q bits 2(j % 4) of qs[j / 4]: q + 7
            uint32_t w = load_u16(blk + q2_0::QS + e0 / 4);
            WS_UNROLL
            for (int j = 0; j < 8; j++) out[j] = (uint8_t)(((w >> (2 * j)) & 3u) + 7u);
            return true;
        }
        case tq2_0::GGML_ID:  // d * (q - 1), Q2_K's 2-bit layout: q + 7
            crumbs8(blk + tq2_0::QS, e0, q);
            WS_UNROLL
            for (int j = 0; j < 8; j++) out[j] = (uint8_t)(q[j] + 7u);
            return true;
        case tq1_0::GGML_ID:  // d * (t - 1), base-3 digits: t + 7
            WS_UNROLL
            for (int j = 0; j < 8; j++) {
                uint32_t e = e0 + j, byte, digit;
                if (e < 160) {
                    byte = blk[tq1_0::QS + e % 32], digit = e / 32;
                } else if (e < 240) {
                    byte = blk[tq1_0::QS + 32 + (e - 160) % 16], digit = (e - 160) / 16;
                } else {
                    byte = blk[tq1_0::QH + (e - 240) % 4], digit = (e - 240) / 4;
                }
                out[j] = (uint8_t)(gptq_trit(byte, digit) + 7u);
            }
            return true;
        default:
            return false;
    }
}

// Byte offset of the fp16 d in a block of `format` (every target has one).
WS_HD uint32_t gptq_d_offset(uint32_t format) {
    switch (format) {
        case q4_0::GGML_ID: return q4_0::D;
        case q8_0::GGML_ID: return q8_0::D;
        case q5_0::GGML_ID: return q5_0::D;
        case iq4_nl::GGML_ID: return iq4_nl::D;
        case q1_0::GGML_ID: return q1_0::D;
        case q2_0::GGML_ID: return q2_0::D;
        case tq1_0::GGML_ID: return tq1_0::D;
        default: return tq2_0::D;
    }
}

struct GptqParams {
    uint64_t rows, width, col_start;
    uint32_t format, block_elems, block_bytes, bits, group;
};

// `n` = rows * cols outputs (cols a multiple of the group, itself of 8).
WS_HD void gptq_thread(const uint8_t* src, uint32_t* qweight, uint64_t n, uint16_t* scales, GptqParams p, Coords c) {
    if (p.rows == 0) return;
    uint64_t items = n / 8, row_bytes = p.width / p.block_elems * p.block_bytes;
    uint32_t d_at = gptq_d_offset(p.format);
    for (uint64_t i = c.first(); i < items; i += c.stride()) {
        uint64_t r = i % p.rows, k = i / p.rows, col = p.col_start + 8 * k;
        const uint8_t* blk = src + r * row_bytes + col / p.block_elems * p.block_bytes;
        uint8_t code[8];
        if (!gptq_codes8(p.format, blk, (uint32_t)(col % p.block_elems), code)) return;
        if (p.bits == 4) {
            uint32_t w = 0;
            WS_UNROLL
            for (int j = 0; j < 8; j++) w |= (uint32_t)code[j] << (4 * j);
            qweight[k * p.rows + r] = w;
        } else {
            WS_UNROLL
            for (int h = 0; h < 2; h++) {
                uint32_t w = 0;
                WS_UNROLL
                for (int j = 0; j < 4; j++) w |= (uint32_t)code[4 * h + j] << (8 * j);
                qweight[(2 * k + h) * p.rows + r] = w;
            }
        }
        // The first item of each group also moves the group's scale.
        if ((8 * k) % p.group == 0) scales[(8 * k) / p.group * p.rows + r] = load_u16(blk + d_at);
    }
}

}  // namespace ws

#ifdef __CUDACC__
extern "C" __global__ void ws_gptq(const uint8_t* WS_RESTRICT src, uint32_t* WS_RESTRICT qweight, uint64_t n,
                                   uint16_t* WS_RESTRICT scales, uint64_t rows, uint64_t width, uint64_t col_start,
                                   uint64_t format, uint64_t block_elems, uint64_t block_bytes, uint64_t bits,
                                   uint64_t group) {
    ws::GptqParams p{rows, width, col_start, (uint32_t)format, (uint32_t)block_elems, (uint32_t)block_bytes,
                     (uint32_t)bits, (uint32_t)group};
    ws::gptq_thread(src, qweight, n, scales, p, ws::coords());
}
#endif
