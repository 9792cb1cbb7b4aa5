// Block formats: geometry and byte layout, mirrored from their one
// definition, crates/weightstream-format/src/block.rs (`block_formats!`).
// crates/weightstream-kernels/tests/formats.rs checks this mirror, as
// compiled, against that table field by field: edit both together.
//
// Per format: ELEMS elements in BYTES bytes; each field's byte offset
// (a field ends where the next begins). Names as in ggml-common.h.
#pragma once

#include <stdint.h>

namespace ws {

constexpr uint32_t QK_K = 256;

namespace q4_0 { constexpr uint32_t GGML_ID = 2, ELEMS = 32, BYTES = 18, D = 0, QS = 2; }
namespace q4_1 { constexpr uint32_t GGML_ID = 3, ELEMS = 32, BYTES = 20, D = 0, M = 2, QS = 4; }
namespace q5_0 { constexpr uint32_t GGML_ID = 6, ELEMS = 32, BYTES = 22, D = 0, QH = 2, QS = 6; }
namespace q5_1 { constexpr uint32_t GGML_ID = 7, ELEMS = 32, BYTES = 24, D = 0, M = 2, QH = 4, QS = 8; }
namespace q8_0 { constexpr uint32_t GGML_ID = 8, ELEMS = 32, BYTES = 34, D = 0, QS = 2; }
namespace q2_k { constexpr uint32_t GGML_ID = 10, ELEMS = QK_K, BYTES = 84, SCALES = 0, QS = 16, D = 80, DMIN = 82; }
namespace q3_k { constexpr uint32_t GGML_ID = 11, ELEMS = QK_K, BYTES = 110, HMASK = 0, QS = 32, SCALES = 96, D = 108; }
namespace q4_k { constexpr uint32_t GGML_ID = 12, ELEMS = QK_K, BYTES = 144, D = 0, DMIN = 2, SCALES = 4, QS = 16; }
namespace q5_k { constexpr uint32_t GGML_ID = 13, ELEMS = QK_K, BYTES = 176, D = 0, DMIN = 2, SCALES = 4, QH = 16, QS = 48; }
namespace q6_k { constexpr uint32_t GGML_ID = 14, ELEMS = QK_K, BYTES = 210, QL = 0, QH = 128, SCALES = 192, D = 208; }
namespace iq4_nl { constexpr uint32_t GGML_ID = 20, ELEMS = 32, BYTES = 18, D = 0, QS = 2; }
namespace iq4_xs { constexpr uint32_t GGML_ID = 23, ELEMS = QK_K, BYTES = 136, D = 0, SCALES_H = 2, SCALES_L = 4, QS = 8; }
namespace mxfp4 { constexpr uint32_t GGML_ID = 39, ELEMS = 32, BYTES = 17, E = 0, QS = 1; }
namespace nvfp4 { constexpr uint32_t GGML_ID = 40, ELEMS = 64, BYTES = 36, D = 0, QS = 4; }
namespace iq2_xxs { constexpr uint32_t GGML_ID = 16, ELEMS = QK_K, BYTES = 66, D = 0, QS = 2; }
namespace iq2_xs { constexpr uint32_t GGML_ID = 17, ELEMS = QK_K, BYTES = 74, D = 0, QS = 2, SCALES = 66; }
namespace iq2_s { constexpr uint32_t GGML_ID = 22, ELEMS = QK_K, BYTES = 82, D = 0, QS = 2, SIGNS = 34, QH = 66, SCALES = 74; }
namespace iq3_xxs { constexpr uint32_t GGML_ID = 18, ELEMS = QK_K, BYTES = 98, D = 0, QS = 2, SCALES = 66; }
namespace iq3_s { constexpr uint32_t GGML_ID = 21, ELEMS = QK_K, BYTES = 110, D = 0, QS = 2, QH = 66, SIGNS = 74, SCALES = 106; }
namespace iq1_s { constexpr uint32_t GGML_ID = 19, ELEMS = QK_K, BYTES = 50, D = 0, QS = 2, QH = 34; }
namespace iq1_m { constexpr uint32_t GGML_ID = 29, ELEMS = QK_K, BYTES = 56, QS = 0, QH = 32, SCALES = 48; }
namespace tq1_0 { constexpr uint32_t GGML_ID = 34, ELEMS = QK_K, BYTES = 54, QS = 0, QH = 48, D = 52; }
namespace tq2_0 { constexpr uint32_t GGML_ID = 35, ELEMS = QK_K, BYTES = 66, QS = 0, D = 64; }

}  // namespace ws

// The whole table as data, for the mirror test (host builds only). Each
// entry: name, ggml id, elements, bytes, then "FIELD=offset" pairs.
#define WS_BLOCK_LAYOUTS(X)                                                                              \
    X("Q4_0", q4_0, {{"D", q4_0::D}, {"QS", q4_0::QS}})                                                 \
    X("Q4_1", q4_1, {{"D", q4_1::D}, {"M", q4_1::M}, {"QS", q4_1::QS}})                                 \
    X("Q5_0", q5_0, {{"D", q5_0::D}, {"QH", q5_0::QH}, {"QS", q5_0::QS}})                               \
    X("Q5_1", q5_1, {{"D", q5_1::D}, {"M", q5_1::M}, {"QH", q5_1::QH}, {"QS", q5_1::QS}})               \
    X("Q8_0", q8_0, {{"D", q8_0::D}, {"QS", q8_0::QS}})                                                 \
    X("Q2_K", q2_k, {{"SCALES", q2_k::SCALES}, {"QS", q2_k::QS}, {"D", q2_k::D}, {"DMIN", q2_k::DMIN}}) \
    X("Q3_K", q3_k, {{"HMASK", q3_k::HMASK}, {"QS", q3_k::QS}, {"SCALES", q3_k::SCALES}, {"D", q3_k::D}}) \
    X("Q4_K", q4_k, {{"D", q4_k::D}, {"DMIN", q4_k::DMIN}, {"SCALES", q4_k::SCALES}, {"QS", q4_k::QS}}) \
    X("Q5_K", q5_k, {{"D", q5_k::D}, {"DMIN", q5_k::DMIN}, {"SCALES", q5_k::SCALES}, {"QH", q5_k::QH}, {"QS", q5_k::QS}}) \
    X("Q6_K", q6_k, {{"QL", q6_k::QL}, {"QH", q6_k::QH}, {"SCALES", q6_k::SCALES}, {"D", q6_k::D}}) \
    X("IQ4_NL", iq4_nl, {{"D", iq4_nl::D}, {"QS", iq4_nl::QS}})                                     \
    X("IQ4_XS", iq4_xs, {{"D", iq4_xs::D}, {"SCALES_H", iq4_xs::SCALES_H}, {"SCALES_L", iq4_xs::SCALES_L}, {"QS", iq4_xs::QS}}) \
    X("MXFP4", mxfp4, {{"E", mxfp4::E}, {"QS", mxfp4::QS}})                                         \
    X("NVFP4", nvfp4, {{"D", nvfp4::D}, {"QS", nvfp4::QS}})                                         \
    X("IQ2_XXS", iq2_xxs, {{"D", iq2_xxs::D}, {"QS", iq2_xxs::QS}})                                 \
    X("IQ2_XS", iq2_xs, {{"D", iq2_xs::D}, {"QS", iq2_xs::QS}, {"SCALES", iq2_xs::SCALES}})         \
    X("IQ2_S", iq2_s, {{"D", iq2_s::D}, {"QS", iq2_s::QS}, {"SIGNS", iq2_s::SIGNS}, {"QH", iq2_s::QH}, {"SCALES", iq2_s::SCALES}}) \
    X("IQ3_XXS", iq3_xxs, {{"D", iq3_xxs::D}, {"QS", iq3_xxs::QS}, {"SCALES", iq3_xxs::SCALES}})    \
    X("IQ3_S", iq3_s, {{"D", iq3_s::D}, {"QS", iq3_s::QS}, {"QH", iq3_s::QH}, {"SIGNS", iq3_s::SIGNS}, {"SCALES", iq3_s::SCALES}}) \
    X("IQ1_S", iq1_s, {{"D", iq1_s::D}, {"QS", iq1_s::QS}, {"QH", iq1_s::QH}})                      \
    X("IQ1_M", iq1_m, {{"QS", iq1_m::QS}, {"QH", iq1_m::QH}, {"SCALES", iq1_m::SCALES}})            \
    X("TQ1_0", tq1_0, {{"QS", tq1_0::QS}, {"QH", tq1_0::QH}, {"D", tq1_0::D}})                      \
    X("TQ2_0", tq2_0, {{"QS", tq2_0::QS}, {"D", tq2_0::D}})
