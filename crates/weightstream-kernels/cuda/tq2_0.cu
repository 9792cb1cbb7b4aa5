// TQ2_0 -> BF16. 64 bytes of 2-bit values laid out as Q2_K's, f16 d;
// x = d * (q - 1).
#include "iquant.cuh"

namespace ws {
WS_HD void tq2_0_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    KGroup k = k_group(src, g, tq2_0::BYTES);
    float d = f16_to_f32(load_u16(k.blk + tq2_0::D));
    uint8_t q[8];
    crumbs8(k.blk + tq2_0::QS, k.e0, q);
    uint16_t out[8];
    WS_UNROLL
    for (int j = 0; j < 8; j++) out[j] = f32_to_bf16(mul(d, (float)((int)q[j] - 1)));
    store_bf16(dst + g * 8, out, 8);
}
}  // namespace ws
WS_BLOCK_KERNEL(tq2_0)
