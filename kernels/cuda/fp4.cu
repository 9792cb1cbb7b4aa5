// GGUF MXFP4 / NVFP4 blocks -> compressed-tensors' FP4 layout (the
// keep-quantized mode's FP4 route): bit movement only. The table, the
// scale bytes' images and the CPU kernel are weightstream-repack's
// (crates/weightstream-repack/src/fp4.rs); this is the same move on the
// device, checked against it bit for bit on the host grid
// (kernels/tests/fp4_parity.rs). Scale bytes without an exact image
// (0xFF) are refused on the host before any launch.
//
// packed is uint8 `[rows, cols / 2]`: input features 2i, 2i+1 in the low
// and high nibble of byte i of the row; scales uint8 `[rows, cols /
// group]` (MXFP4: the E8M0 byte as is; NVFP4: the unsigned E4M3 byte with
// its ignored sign bit cleared, 0x7F as 0).
//
// Work item i is 8 input features of one row (4 bytes of packed, one
// aligned word: cols is a multiple of the group): consecutive items write
// consecutive words of a row (coalesced). Each reads its 8 codes from its
// row's block (rows are `width` elements of whole blocks, back to back:
// what the core read for the rows' column range).
#include "iquant.cuh"

namespace ws {

// The E2M1 codes of elements e0..e0+7 (e0 a multiple of 8) of a block:
// MXFP4's 32 are the low then the high nibbles of 16 bytes; NVFP4's
// sub-block e0 / 16 the low then the high nibbles of its 8 bytes. Code 8
// is ggml's +0 and E2M1's -0: it moves as 0.
WS_HD void fp4_codes8(bool mx, const uint8_t* blk, uint32_t e0, uint8_t out[8]) {
    const uint8_t* qs = mx ? blk + mxfp4::QS + e0 % 16 : blk + nvfp4::QS + 8 * (e0 / 16);
    uint32_t shift = mx ? 4 * (e0 / 16) : 4 * ((e0 / 8) % 2);
    WS_UNROLL
    for (int j = 0; j < 8; j++) {
        uint8_t c = (uint8_t)((qs[j] >> shift) & 0x0Fu);
        out[j] = c == 8 ? 0 : c;
    }
}

// The layout's scale byte for element e of a block (fp4.rs scale_byte).
WS_HD uint8_t fp4_scale(bool mx, const uint8_t* blk, uint32_t e) {
    if (mx) return blk[mxfp4::E];
    uint8_t x = blk[nvfp4::D + e / 16];
    return x == 0x7Fu ? 0 : (uint8_t)(x & 0x7Fu);
}

struct Fp4Params {
    uint64_t rows, width, col_start;
    uint32_t format, block_elems, block_bytes, group;
};

// `n` = rows * cols outputs (cols a multiple of the group, itself of 8).
WS_HD void fp4_thread(const uint8_t* src, uint32_t* packed, uint64_t n, uint8_t* scales, Fp4Params p, Coords c) {
    bool mx = p.format == mxfp4::GGML_ID;
    if (p.rows == 0 || (!mx && p.format != nvfp4::GGML_ID)) return;
    uint64_t cols = n / p.rows, words = cols / 8, row_bytes = p.width / p.block_elems * p.block_bytes;
    for (uint64_t i = c.first(); i < n / 8; i += c.stride()) {
        uint64_t r = i / words, k = i % words, col = p.col_start + 8 * k;
        const uint8_t* blk = src + r * row_bytes + col / p.block_elems * p.block_bytes;
        uint32_t e0 = (uint32_t)(col % p.block_elems);
        uint8_t code[8];
        fp4_codes8(mx, blk, e0, code);
        uint32_t w = 0;
        WS_UNROLL
        for (int j = 0; j < 8; j++) w |= (uint32_t)code[j] << (4 * j);
        packed[i] = w;
        // The first item of each group also moves the group's scale.
        if ((8 * k) % p.group == 0) scales[r * (cols / p.group) + 8 * k / p.group] = fp4_scale(mx, blk, e0);
    }
}

}  // namespace ws

#ifdef __CUDACC__
extern "C" __global__ void ws_fp4(const uint8_t* WS_RESTRICT src, uint32_t* WS_RESTRICT packed, uint64_t n,
                                  uint8_t* WS_RESTRICT scales, uint64_t rows, uint64_t width, uint64_t col_start,
                                  uint64_t format, uint64_t block_elems, uint64_t block_bytes, uint64_t group) {
    ws::Fp4Params p{rows, width, col_start, (uint32_t)format, (uint32_t)block_elems, (uint32_t)block_bytes,
                    (uint32_t)group};
    ws::fp4_thread(src, packed, n, scales, p, ws::coords());
}
#endif
