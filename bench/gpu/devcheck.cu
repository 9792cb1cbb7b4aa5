// The GPU round's device check (issue 56 item 4; /work/shared/gpu/DESK-CHECK.md
// section 5): what the kernel rework and the staging rework need measured on
// a real GPU, in one program, one JSON object on stdout.
//
//   nvcc -O2 -std=c++17 -arch=native -I kernels/cuda bench/gpu/devcheck.cu -o devcheck
//   ./devcheck [convert] [ceiling] [pinning] [--file PATH] [--reps N] > devcheck.json
//
// - convert: the hardware conversions cvt.rn.bf16x2.f32 and cvt.rn.f16x2.f32
//   against the kernels' own integer roundings (common.cuh f32_to_bf16,
//   f32_to_f16) on all 2^32 f32 inputs, counted per input class (normal,
//   subnormal, zero, infinity, NaN). Issue 56 allows the hardware
//   conversion in a kernel only for a class this finds equal everywhere.
// - ceiling: a copy-like kernel with the block kernels' grid (256-thread
//   blocks, grid-stride) that reads r bytes and writes 2 per output with
//   16-byte stores, for the read:write mixes of the formats, against a
//   device-to-device copy of the same bytes in the same run: the fraction
//   of D2D each byte mix can physically reach.
// - pinning: what staging costs. cudaHostAlloc of 32 MiB, 256 MiB and
//   1 GiB; malloc + first touch by 8 threads + cudaHostRegister, each phase;
//   cudaHostRegister(ReadOnly) of a warm mmap'd file (if the device says it
//   supports it) and the H2D rate from it against pinned memory; pread into
//   pinned memory with 1..16 threads (no GPU work).
//
// Built by scripts/gpu_round.sh on the GPU machine (its nvcc); built, not
// run, by `scripts/gpu_round.sh check` here, so it is known to compile.
#include <cuda_runtime.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common.cuh"

#define CHECK(x)                                                                                  \
    do {                                                                                          \
        cudaError_t e_ = (x);                                                                     \
        if (e_ != cudaSuccess) {                                                                  \
            fprintf(stderr, "devcheck: %s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__); \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

namespace {

// ---- convert ----------------------------------------------------------

// Input classes of an f32: 0 zero, 1 subnormal, 2 normal, 3 infinity, 4 NaN.
constexpr int CLASSES = 5;
const char* const CLASS_NAMES[CLASSES] = {"zero", "subnormal", "normal", "infinity", "nan"};

__device__ int class_of(uint32_t b) {
    uint32_t a = b & 0x7FFFFFFFu;
    return a == 0 ? 0 : a < 0x00800000u ? 1 : a < 0x7F800000u ? 2 : a == 0x7F800000u ? 3 : 4;
}

struct ConvertCounts {
    unsigned long long compared[2][CLASSES], differ[2][CLASSES];
    unsigned int first[2][CLASSES];  // the first differing input (0 if none; 0 itself is never one)
};

// Inputs base + 2i and base + 2i + 1 as one pair, as a kernel would convert
// them. NaN: equal when both are NaN (the kernels write one canonical NaN;
// the hardware keeps or quiets the payload), counted apart so a kernel knows
// whether a NaN path may use it.
__global__ void convert_kernel(uint64_t base, uint64_t pairs, ConvertCounts* out) {
    unsigned long long cmp[2][CLASSES] = {}, dif[2][CLASSES] = {};
    unsigned int first[2][CLASSES] = {};
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < pairs; i += (uint64_t)gridDim.x * blockDim.x) {
        uint32_t b0 = (uint32_t)(base + 2 * i), b1 = b0 + 1;
        float x0 = ws::bits_float(b0), x1 = ws::bits_float(b1);
        uint32_t hb, hh;
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(hb) : "f"(x1), "f"(x0));
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(hh) : "f"(x1), "f"(x0));
        uint32_t in[2] = {b0, b1};
        uint16_t got[2][2] = {{(uint16_t)hb, (uint16_t)(hb >> 16)}, {(uint16_t)hh, (uint16_t)(hh >> 16)}};
        for (int k = 0; k < 2; k++) {
            int c = class_of(in[k]);
            uint16_t want[2] = {ws::f32_to_bf16(ws::bits_float(in[k])), ws::f32_to_f16(ws::bits_float(in[k]))};
            for (int o = 0; o < 2; o++) {
                bool nan_out = o == 0 ? (got[o][k] & 0x7FFFu) > 0x7F80u : (got[o][k] & 0x7FFFu) > 0x7C00u;
                bool same = c == 4 ? nan_out : got[o][k] == want[o];
                cmp[o][c]++;
                if (!same) {
                    if (!dif[o][c]) first[o][c] = in[k];
                    dif[o][c]++;
                }
            }
        }
    }
    for (int o = 0; o < 2; o++)
        for (int c = 0; c < CLASSES; c++) {
            if (cmp[o][c]) atomicAdd(&out->compared[o][c], cmp[o][c]);
            if (dif[o][c]) {
                atomicAdd(&out->differ[o][c], dif[o][c]);
                atomicCAS(&out->first[o][c], 0u, first[o][c]);
            }
        }
}

void convert(std::string& json) {
    ConvertCounts* d;
    CHECK(cudaMalloc(&d, sizeof *d));
    CHECK(cudaMemset(d, 0, sizeof *d));
    auto t0 = std::chrono::steady_clock::now();
    const uint64_t chunk = 1ull << 30;  // pairs per launch: 2^31 inputs
    for (uint64_t base = 0; base < (1ull << 32); base += 2 * chunk) convert_kernel<<<4096, 256>>>(base, chunk, d);
    CHECK(cudaDeviceSynchronize());
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ConvertCounts h;
    CHECK(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost));
    CHECK(cudaFree(d));
    const char* outs[2] = {"bf16", "f16"};
    char buf[256];
    json += "\"convert\": {";
    for (int o = 0; o < 2; o++) {
        json += std::string(o ? ", " : "") + "\"" + outs[o] + "\": {";
        for (int c = 0; c < CLASSES; c++) {
            snprintf(buf, sizeof buf, "%s\"%s\": {\"compared\": %llu, \"differ\": %llu, \"first\": \"0x%08x\"}", c ? ", " : "",
                     CLASS_NAMES[c], h.compared[o][c], h.differ[o][c], h.first[o][c]);
            json += buf;
        }
        json += "}";
    }
    snprintf(buf, sizeof buf, ", \"seconds\": %.3f}", s);
    json += buf;
}

// ---- ceiling ----------------------------------------------------------

// Outputs in groups of 32 (four 16-byte stores, 64 contiguous bytes per
// thread); each group reads `rb` bytes (even) from src as 16-bit words and
// folds them into the stored words, so no read can be dropped.
__global__ void __launch_bounds__(256) ceiling_kernel(const uint16_t* __restrict__ src, uint4* __restrict__ dst, uint64_t groups, uint32_t rb) {
    for (uint64_t g = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; g < groups; g += (uint64_t)gridDim.x * blockDim.x) {
        const uint16_t* s = src + g * (rb / 2);
        uint32_t acc = 0;
        for (uint32_t i = 0; i < rb / 2; i++) acc = acc * 31u + s[i];
        for (uint32_t k = 0; k < 4; k++) dst[4 * g + k] = make_uint4(acc, acc ^ k, acc ^ 2u, acc ^ 3u);
    }
}

float time_ms(cudaEvent_t a, cudaEvent_t b) {
    float ms;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    return ms;
}

float median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

void ceiling(std::string& json, int reps) {
    const uint64_t out_bytes = 256ull << 20, groups = out_bytes / 64;
    // Bytes read per 32 outputs (even: 16-bit reads): TQ1_0 (6.75 -> 6),
    // Q2_K (10.5 -> 10), Q4_0 / Q4_K / IQ4_XS (18), FP8 (32), Q8_0 (34),
    // F16 (64), F32 (128).
    const uint32_t mixes[] = {6, 10, 18, 32, 34, 64, 128};
    uint16_t* src;
    uint4* dst;
    CHECK(cudaMalloc(&src, groups * 128));
    CHECK(cudaMalloc(&dst, out_bytes));
    CHECK(cudaMemset(src, 1, groups * 128));
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    int sms;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    std::vector<float> d2d;
    for (int r = 0; r < reps + 1; r++) {
        CHECK(cudaEventRecord(a));
        CHECK(cudaMemcpyAsync(dst, src, out_bytes, cudaMemcpyDeviceToDevice));
        CHECK(cudaEventRecord(b));
        CHECK(cudaEventSynchronize(b));
        if (r) d2d.push_back(time_ms(a, b));
    }
    double d2d_gbs = 2.0 * out_bytes / (median(d2d) * 1e-3) / 1e9;
    char buf[256];
    snprintf(buf, sizeof buf, "\"ceiling\": {\"out_mib\": 256, \"d2d_gbs\": %.1f, \"mixes\": [", d2d_gbs);
    json += buf;
    bool first = true;
    for (uint32_t rb : mixes) {
        std::vector<float> t;
        for (int r = 0; r < reps + 1; r++) {
            CHECK(cudaEventRecord(a));
            ceiling_kernel<<<sms * 8, 256>>>(src, dst, groups, rb);
            CHECK(cudaEventRecord(b));
            CHECK(cudaEventSynchronize(b));
            if (r) t.push_back(time_ms(a, b));
        }
        CHECK(cudaGetLastError());
        double gbs = (double)groups * (rb + 64) / (median(t) * 1e-3) / 1e9;
        snprintf(buf, sizeof buf, "%s{\"read_per_output\": %.4f, \"gbs\": %.1f, \"fraction\": %.3f}", first ? "" : ", ", rb / 32.0, gbs,
                 gbs / d2d_gbs);
        json += buf;
        first = false;
    }
    json += "]}";
    CHECK(cudaFree(src));
    CHECK(cudaFree(dst));
}

// ---- pinning ----------------------------------------------------------

double since(std::chrono::steady_clock::time_point t0) { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); }

void touch(char* p, size_t n, int threads) {
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; t++)
        ts.emplace_back([=] {
            for (size_t i = n / threads * t; i < (t + 1 == threads ? n : n / threads * (t + 1)); i += 4096) p[i] = 1;
        });
    for (auto& t : ts) t.join();
}

double h2d_gbs(void* dev, const void* host, size_t n) {
    CHECK(cudaMemcpy(dev, host, n, cudaMemcpyHostToDevice));  // warm-up
    auto t0 = std::chrono::steady_clock::now();
    CHECK(cudaMemcpy(dev, host, n, cudaMemcpyHostToDevice));
    return n / since(t0) / 1e9;
}

void pinning(std::string& json, const char* file) {
    char buf[512];
    json += "\"pinning\": {\"host_alloc\": [";
    const size_t sizes[] = {32ull << 20, 256ull << 20, 1ull << 30};
    for (int i = 0; i < 3; i++) {
        void* p;
        auto t0 = std::chrono::steady_clock::now();
        CHECK(cudaHostAlloc(&p, sizes[i], cudaHostAllocDefault));
        double alloc = since(t0);
        t0 = std::chrono::steady_clock::now();
        CHECK(cudaFreeHost(p));
        snprintf(buf, sizeof buf, "%s{\"mib\": %zu, \"alloc_s\": %.4f, \"free_s\": %.4f}", i ? ", " : "", sizes[i] >> 20, alloc, since(t0));
        json += buf;
    }
    json += "], \"register\": [";
    for (int i = 0; i < 3; i++) {
        auto t0 = std::chrono::steady_clock::now();
        char* p = (char*)malloc(sizes[i]);
        double m = since(t0);
        t0 = std::chrono::steady_clock::now();
        touch(p, sizes[i], 8);
        double tch = since(t0);
        t0 = std::chrono::steady_clock::now();
        CHECK(cudaHostRegister(p, sizes[i], cudaHostRegisterDefault));
        double reg = since(t0);
        t0 = std::chrono::steady_clock::now();
        CHECK(cudaHostUnregister(p));
        snprintf(buf, sizeof buf, "%s{\"mib\": %zu, \"malloc_s\": %.4f, \"touch_8_threads_s\": %.4f, \"register_s\": %.4f, \"unregister_s\": %.4f}",
                 i ? ", " : "", sizes[i] >> 20, m, tch, reg, since(t0));
        json += buf;
        free(p);
    }
    json += "]";
    // A warm file, mapped and registered read-only, against pinned memory.
    int ro = 0;
    CHECK(cudaDeviceGetAttribute(&ro, cudaDevAttrHostRegisterReadOnlySupported, 0));
    snprintf(buf, sizeof buf, ", \"read_only_register_supported\": %d", ro);
    json += buf;
    int fd = file ? open(file, O_RDONLY) : -1;
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size >= (1 << 20)) {
        size_t n = std::min<size_t>(st.st_size, 1ull << 30) & ~(size_t)0xFFFFF;
        char* map = (char*)mmap(nullptr, n, PROT_READ, MAP_SHARED, fd, 0);
        void *dev, *pinned;
        CHECK(cudaMalloc(&dev, n));
        CHECK(cudaHostAlloc(&pinned, n, cudaHostAllocDefault));
        memcpy(pinned, map, n);  // warms the page cache too
        double pinned_gbs = h2d_gbs(dev, pinned, n);
        snprintf(buf, sizeof buf, ", \"file_mib\": %zu, \"pinned_h2d_gbs\": %.2f", n >> 20, pinned_gbs);
        json += buf;
        if (ro && map != MAP_FAILED) {
            auto t0 = std::chrono::steady_clock::now();
            cudaError_t e = cudaHostRegister(map, n, cudaHostRegisterReadOnly);
            double reg = since(t0);
            if (e == cudaSuccess) {
                double gbs = h2d_gbs(dev, map, n);
                t0 = std::chrono::steady_clock::now();
                CHECK(cudaHostUnregister(map));
                snprintf(buf, sizeof buf, ", \"mmap_register_read_only_s\": %.4f, \"mmap_h2d_gbs\": %.2f, \"mmap_unregister_s\": %.4f", reg, gbs,
                         since(t0));
            } else {
                snprintf(buf, sizeof buf, ", \"mmap_register_read_only_error\": \"%s\"", cudaGetErrorString(e));
                cudaGetLastError();
            }
            json += buf;
        }
        // pread into pinned memory, 4 MiB reads, by 1..16 threads.
        json += ", \"pread_pinned\": [";
        const int threads[] = {1, 2, 4, 8, 12, 16};
        for (int i = 0; i < 6; i++) {
            auto t0 = std::chrono::steady_clock::now();
            std::vector<std::thread> ts;
            for (int t = 0; t < threads[i]; t++)
                ts.emplace_back([=] {
                    for (size_t off = (size_t)t << 22; off < n; off += (size_t)threads[i] << 22)
                        if (pread(fd, (char*)pinned + off, std::min<size_t>(4 << 20, n - off), off) < 0) return;
                });
            for (auto& t : ts) t.join();
            snprintf(buf, sizeof buf, "%s{\"threads\": %d, \"gbs\": %.2f}", i ? ", " : "", threads[i], n / since(t0) / 1e9);
            json += buf;
        }
        json += "]";
        munmap(map, n);
        CHECK(cudaFree(dev));
        CHECK(cudaFreeHost(pinned));
    }
    if (fd >= 0) close(fd);
    json += "}";
}

}  // namespace

int main(int argc, char** argv) {
    bool all = true, want[3] = {};
    const char* file = nullptr;
    int reps = 9;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "convert" || a == "ceiling" || a == "pinning") {
            all = false;
            want[a == "convert" ? 0 : a == "ceiling" ? 1 : 2] = true;
        } else if (a == "--file" && i + 1 < argc) file = argv[++i];
        else if (a == "--reps" && i + 1 < argc) reps = std::max(1, atoi(argv[++i]));
        else {
            fprintf(stderr, "usage: devcheck [convert] [ceiling] [pinning] [--file PATH] [--reps N]\n");
            return 2;
        }
    }
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    int driver;
    CHECK(cudaDriverGetVersion(&driver));
    std::string json = "{\"device\": \"" + std::string(prop.name) + "\", \"driver\": " + std::to_string(driver);
    if (all || want[0]) convert((json += ", ", json));
    if (all || want[1]) ceiling((json += ", ", json), reps);
    if (all || want[2]) pinning((json += ", ", json), file);
    json += "}";
    puts(json.c_str());
    return 0;
}
