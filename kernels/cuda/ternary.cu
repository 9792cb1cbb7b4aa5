// Ternary formats (TQ1_0, TQ2_0) -> BF16 or float16 (Out, common.cuh).
// One family per file, the same family names as the CPU kernels'
// (crates/weightstream-dequant/src/{scalar,x86,arm}/ternary.rs).

// TQ1_0: 48 bytes of 5 base-3 digits each, 4 bytes of 4, f16 d.
// Digit k of byte b: ((b * 3^k mod 256) * 3) >> 8. Elements 0..160: digit
// e / 32 of qs[e % 32]; 160..240: digit (e-160) / 16 of qs[32 + (e-160) % 16];
// 240..256: digit (e-240) / 4 of qh[(e-240) % 4]. x = d * (t - 1).
#include "iquant.cuh"

namespace ws {
WS_HD float trit(uint32_t byte, uint32_t k) {
    const uint32_t pow3[5] = {1, 3, 9, 27, 81};
    uint32_t q = (byte * pow3[k]) & 0xFFu;
    return (float)((int)((q * 3u) >> 8) - 1);
}

template <class Out>
WS_HD void tq1_0_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    KGroup k = k_group(src, g, tq1_0::BYTES);
    float d = f16_to_f32(load_u16(k.blk + tq1_0::D));
    uint16_t out[8];
    WS_UNROLL
    for (int j = 0; j < 8; j++) {
        uint32_t e = k.e0 + j, byte, digit;
        if (e < 160) {
            byte = k.blk[tq1_0::QS + e % 32], digit = e / 32;
        } else if (e < 240) {
            byte = k.blk[tq1_0::QS + 32 + (e - 160) % 16], digit = (e - 160) / 16;
        } else {
            byte = k.blk[tq1_0::QH + (e - 240) % 4], digit = (e - 240) / 4;
        }
        out[j] = Out::from_f32(mul(d, trit(byte, digit)));
    }
    store8(dst + g * 8, out, 8);
}
}  // namespace ws
WS_BLOCK_KERNEL(tq1_0)

// TQ2_0: 64 bytes of 2-bit values laid out as Q2_K's, f16 d;
// x = d * (q - 1).

namespace ws {
template <class Out>
WS_HD void tq2_0_group(const uint8_t* src, uint16_t* dst, uint64_t g) {
    KGroup k = k_group(src, g, tq2_0::BYTES);
    float d = f16_to_f32(load_u16(k.blk + tq2_0::D));
    uint8_t q[8];
    crumbs8(k.blk + tq2_0::QS, k.e0, q);
    uint16_t out[8];
    WS_UNROLL
    for (int j = 0; j < 8; j++) out[j] = Out::from_f32(mul(d, (float)((int)q[j] - 1)));
    store8(dst + g * 8, out, 8);
}
}  // namespace ws
WS_BLOCK_KERNEL(tq2_0)
