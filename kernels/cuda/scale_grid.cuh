// Scale grids of the scaled kernels (fp8.cu, packed.cu): the chunk
// holds elements [first, first + n) of a [rows, cols] matrix; element (r, c)
// uses scales[(r / block_rows) * grid_cols + c / block_cols] (per-tensor and
// per-channel scales are blocks spanning the matrix or a row; the 4-bit
// schemes' groups are 1 x group blocks); scales == null means scale 1.
//
// The three divisions are by launch constants, so none is a division on the
// GPU: each divisor comes with its magic number and shifts (launch.rs
// `divisor`, computed on the host once per launch) and a quotient is one
// 64-bit multiply-high, a subtract, an add and two shifts, exact for every 64-bit
// numerator (Granlund and Montgomery, "Division by invariant integers using
// multiplication", 1994, figure 4.1).
#pragma once
#include "common.cuh"

namespace ws {

// n / d for a fixed d >= 1 with magic = floor(2^64 (2^l - d) / d) + 1,
// sh1 = min(l, 1), sh2 = max(l - 1, 0), l = ceil(log2 d): all computed on
// the host and passed as kernel parameters.
struct Divisor {
    uint64_t d, magic;
    uint32_t sh1, sh2;
};

WS_HD uint64_t mul_hi(uint64_t a, uint64_t b) {
#ifdef __CUDA_ARCH__
    return __umul64hi(a, b);
#else
    return (uint64_t)(((unsigned __int128)a * b) >> 64);
#endif
}

// `shifts`: sh1 in the low 32 bits, sh2 in the high 32 (launch.rs `divisor`).
WS_HD Divisor divisor(uint64_t d, uint64_t magic, uint64_t shifts) {
    return Divisor{d, magic, (uint32_t)shifts, (uint32_t)(shifts >> 32)};
}

WS_HD uint64_t quotient(const Divisor& v, uint64_t n) {
    uint64_t t = mul_hi(v.magic, n);
    return (t + ((n - t) >> v.sh1)) >> v.sh2;
}

struct ScaleParams {
    const float* scales;
    uint64_t first, grid_cols;
    Divisor cols, block_rows, block_cols;
};

// The kernels' and the host grid's arguments: each divisor's magic number
// and shifts, in this order (launch.rs `ScaledArgs::divisors`).
#define WS_DIVISOR_PARAMS                                                                                      \
    uint64_t cols_magic, uint64_t cols_shifts, uint64_t block_rows_magic, uint64_t block_rows_shifts,            \
        uint64_t block_cols_magic, uint64_t block_cols_shifts
#define WS_SCALE_PARAMS(scales, first, cols, block_rows, block_cols, grid_cols)                                   \
    ws::ScaleParams {                                                                                            \
        scales, first, grid_cols, ws::divisor(cols, cols_magic, cols_shifts),                                    \
            ws::divisor(block_rows, block_rows_magic, block_rows_shifts),                                        \
            ws::divisor(block_cols, block_cols_magic, block_cols_shifts)                                         \
    }

// Where matrix element e falls in the scale grid: its column, its offsets
// inside its block, its block's row and column. Made with three quotients
// once per thread group; the group's next elements are steps from it.
struct GridCursor {
    uint64_t col, in_block, block_col, in_rows, block_row;
};

WS_HD GridCursor grid_cursor(const ScaleParams& p, uint64_t e) {
    uint64_t r = quotient(p.cols, e), c = e - r * p.cols.d;
    uint64_t bc = quotient(p.block_cols, c), br = quotient(p.block_rows, r);
    return GridCursor{c, c - bc * p.block_cols.d, bc, r - br * p.block_rows.d, br};
}

// Index into the scale grid (and the zero points, laid out alike).
WS_HD uint64_t grid_index(const ScaleParams& p, const GridCursor& k) { return k.block_row * p.grid_cols + k.block_col; }

// The cursor of the next matrix element.
WS_HD void grid_step(const ScaleParams& p, GridCursor& k) {
    if (++k.col == p.cols.d) {
        k.col = k.in_block = k.block_col = 0;
        if (++k.in_rows == p.block_rows.d) {
            k.in_rows = 0;
            k.block_row++;
        }
    } else if (++k.in_block == p.block_cols.d) {
        k.in_block = 0;
        k.block_col++;
    }
}

// Whether `count` elements from the cursor's share one scale: no row or
// block edge falls inside them (always, without scales).
WS_HD bool one_scale(const ScaleParams& p, const GridCursor& k, uint32_t count) {
    return !p.scales || (k.col + count <= p.cols.d && k.in_block + count <= p.block_cols.d);
}

// The scale at the cursor (1 without scales).
WS_HD float scale_at(const ScaleParams& p, const GridCursor& k) { return p.scales ? p.scales[grid_index(p, k)] : 1.0f; }

}  // namespace ws
