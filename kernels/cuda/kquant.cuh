// Shared by the K-quant kernels (256-element super-blocks): group g writes
// elements e0 .. e0 + 7, e0 = 8 (g % 32), of super-block g / 32. Eight
// consecutive elements always share one sub-block scale (sub-blocks are 16
// or 32 elements) and one bit position in every packed field, so a group
// decodes its scale once and reads each field as 8 consecutive bytes.
#pragma once

#include "common.cuh"

namespace ws {

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
