// Scale grids of the scaled kernels (fp8.cu, e2m1.cu): the chunk holds
// elements [first, first + n) of a [rows, cols] matrix; element (r, c) uses
// scales[(r / block_rows) * grid_cols + c / block_cols] (per-tensor and
// per-channel scales are blocks spanning the matrix or a row; the 4-bit
// schemes' groups are 1 x group blocks); scales == null means scale 1.
#pragma once
#include "common.cuh"

namespace ws {

struct ScaleParams {
    const float* scales;
    uint64_t first, cols, block_rows, block_cols, grid_cols;
};

// The scale of matrix element e.
WS_HD float scale_at(const ScaleParams& p, uint64_t e) {
    if (!p.scales) return 1.0f;
    uint64_t r = e / p.cols, c = e % p.cols;
    return p.scales[(r / p.block_rows) * p.grid_cols + c / p.block_cols];
}

// Whether matrix elements [e, e + count) share one scale: no row or block
// edge falls inside them (always, without scales).
WS_HD bool one_scale(const ScaleParams& p, uint64_t e, uint32_t count) {
    return !p.scales || (e % p.cols + count <= p.cols && e % p.cols % p.block_cols + count <= p.block_cols);
}

}  // namespace ws
