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
    X("Q6_K", q6_k, {{"QL", q6_k::QL}, {"QH", q6_k::QH}, {"SCALES", q6_k::SCALES}, {"D", q6_k::D}})
