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

// ---- The specialised walk (issue 56): units of 16 elements, each inside
// one scale block, with 32-bit indices stepped per grid-stride trip
// instead of a 64-bit cursor per group. It takes every launch whose chunk
// starts on a multiple of 16 matrix elements with cols a multiple of 16
// and blocks either at least a row wide (per-tensor, per-channel, block
// rows) or a power of two >= 16 wide (128 x 128, groups of 16, 32, 128):
// then no unit straddles a row or a block edge, and a unit's block column
// is its column shifted. Thread t's units are u = t, t + stride, ...
// (stride = the grid's threads); each trip adds 16 stride elements, a
// constant number of rows and columns (dr, dc), so row, block row and
// column advance by additions with one carry each.

constexpr uint32_t UNIT = 16;

#ifndef __CUDACC__
// CUDA's vector types, for the host build.
struct uint4 {
    uint32_t x, y, z, w;
};
struct uint2 {
    uint32_t x, y;
};
#endif

struct Walk {
    uint32_t cols, br, gc, bsh;     // launch constants (bsh: log2 block_cols, or 31 when blocks span the row)
    uint32_t dc, q0, r0, q1, r1;    // per trip: dc columns, then dr (or dr + 1 on a column carry) rows as q block rows + r
    uint32_t c, rin, rb;            // the unit's column, row inside its block row, block row
    // The unit's index in the scale grid (and the zero points').
    WS_HD uint32_t index() const { return rb * gc + (c >> bsh); }
    WS_HD void step() {
        c += dc;
        bool wrap = c >= cols;
        c -= wrap ? cols : 0u;
        rin += wrap ? r1 : r0;
        rb += wrap ? q1 : q0;
        bool carry = rin >= br;
        rin -= carry ? br : 0u;
        rb += carry;
    }
};

// Whether the launch takes the walk (the same answer for every thread), and
// then thread `t`'s walk at its first unit. `n` outputs from p.first.
WS_HD bool walk_start(const ScaleParams& p, uint64_t n, Coords co, Walk& w) {
    uint64_t cols = p.cols.d, bc = p.block_cols.d, br = p.block_rows.d, st = co.stride() * UNIT;
    if (cols == 0 || p.first % UNIT || cols % UNIT || cols >= (1ull << 31) || br >= (1ull << 31) || st >= (1ull << 31)) return false;
    if (n >= (1ull << 31) || co.first() + co.stride() >= (1ull << 31)) return false;
    uint32_t bsh = 31;
    if (bc < cols) {
        if (bc % UNIT || (bc & (bc - 1))) return false;
        for (bsh = 4; (1ull << bsh) < bc; bsh++) {}
    }
    // Every index a unit of the chunk (or the tail) takes fits 32 bits.
    uint64_t last_rb = quotient(p.block_rows, quotient(p.cols, p.first + n));
    if ((last_rb + 1) * p.grid_cols >= (1ull << 32)) return false;
    uint64_t e = p.first + co.first() * UNIT, r = quotient(p.cols, e), rb = quotient(p.block_rows, r);
    uint64_t dr = quotient(p.cols, st), q0 = quotient(p.block_rows, dr), q1 = quotient(p.block_rows, dr + 1);
    w = Walk{(uint32_t)cols, (uint32_t)br, (uint32_t)p.grid_cols, bsh, (uint32_t)(st - dr * cols),
             (uint32_t)q0, (uint32_t)(dr - q0 * br), (uint32_t)q1, (uint32_t)(dr + 1 - q1 * br),
             (uint32_t)(e - r * cols), (uint32_t)(r - rb * br), (uint32_t)rb};
    return true;
}

// 16 bytes from p, whose alignment (p & 15, the same for every unit of a
// launch) picks the widest loads that fit.
WS_HD uint4 load16(const uint8_t* p, uint32_t align) {
    uint4 v;
#ifdef __CUDA_ARCH__
    if (align == 0) return *reinterpret_cast<const uint4*>(p);
    if ((align & 7) == 0) {
        uint2 a = reinterpret_cast<const uint2*>(p)[0], b = reinterpret_cast<const uint2*>(p)[1];
        return make_uint4(a.x, a.y, b.x, b.y);
    }
    if ((align & 3) == 0) {
        const uint32_t* q = reinterpret_cast<const uint32_t*>(p);
        return make_uint4(q[0], q[1], q[2], q[3]);
    }
    uint32_t w[4];
    for (int i = 0; i < 4; i++) w[i] = p[4 * i] | (p[4 * i + 1] << 8) | (p[4 * i + 2] << 16) | ((uint32_t)p[4 * i + 3] << 24);
    v = make_uint4(w[0], w[1], w[2], w[3]);
#else
    (void)align;
    uint32_t w[4];
    memcpy(w, p, 16);
    v = uint4{w[0], w[1], w[2], w[3]};
#endif
    return v;
}

// 8 bytes from p (alignment p & 7, as load16).
WS_HD uint2 load8(const uint8_t* p, uint32_t align) {
#ifdef __CUDA_ARCH__
    if (align == 0) return *reinterpret_cast<const uint2*>(p);
    if ((align & 3) == 0) return make_uint2(reinterpret_cast<const uint32_t*>(p)[0], reinterpret_cast<const uint32_t*>(p)[1]);
    return make_uint2(p[0] | (p[1] << 8) | (p[2] << 16) | ((uint32_t)p[3] << 24),
                      p[4] | (p[5] << 8) | (p[6] << 16) | ((uint32_t)p[7] << 24));
#else
    (void)align;
    uint32_t w[2];
    memcpy(w, p, 8);
    return uint2{w[0], w[1]};
#endif
}

// The first `bytes` (< 16) bytes at p, byte loads, zero-padded: a unit's
// tail (no wider load, which could pass the end or be misaligned).
WS_HD uint4 load_tail(const uint8_t* p, uint32_t bytes) {
    uint32_t w[4] = {0, 0, 0, 0};
    for (uint32_t j = 0; j < bytes; j++) w[j / 4] |= (uint32_t)p[j] << (8 * (j % 4));
    return uint4{w[0], w[1], w[2], w[3]};
}

// 16 outputs, two to a word, to a 16-byte aligned dst: two 16-byte stores.
WS_HD void store16_words(uint16_t* dst, const uint32_t o[8]) {
#ifdef __CUDA_ARCH__
    reinterpret_cast<uint4*>(dst)[0] = make_uint4(o[0], o[1], o[2], o[3]);
    reinterpret_cast<uint4*>(dst)[1] = make_uint4(o[4], o[5], o[6], o[7]);
#else
    for (int j = 0; j < 16; j++) dst[j] = (uint16_t)(o[j / 2] >> (16 * (j % 2)));
#endif
}

// Whether an f32 is finite.
WS_HD bool f32_finite(float x) { return (float_bits(x) & 0x7F800000u) != 0x7F800000u; }

}  // namespace ws
