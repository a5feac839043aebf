// The hand-written device kernels of the calibration: data initialisation, the softmax of the
// unfused attention fallback, and the memory-bound kernels (copy, triad, RMSNorm, Adam,
// cast-transpose to FP8). They are written to be bandwidth-bound and plain, not clever: the
// calibration wants the time a competent framework kernel takes, which is HBM traffic.
#include "device_kernels.hpp"

#include "check.hpp"

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdint>

namespace trainsim::kernels::detail {

namespace {

constexpr int kThreads = 256;
// Grid-stride kernels launch at most this many blocks: enough to fill any current GPU
// (132 SMs x 16 resident blocks of 256 threads) without launching millions of tiny blocks.
constexpr std::int64_t kMaxBlocks = 8192;

unsigned blocks_for(std::int64_t work_items) {
    const std::int64_t b = (work_items + kThreads - 1) / kThreads;
    return static_cast<unsigned>(std::clamp<std::int64_t>(b, 1, kMaxBlocks));
}

void check_launch(const char* kernel, const std::string& context) {
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        throw KernelError(std::string(kernel) + "<<<>>>", context,
                          std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")");
}

// SplitMix64 finaliser: a counter-based hash, so every element gets an independent value
// without per-thread RNG state.
__device__ float uniform(std::uint64_t seed, std::uint64_t i, bool positive) {
    std::uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    const float u = static_cast<float>(x >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    return positive ? u : 2.0f * u - 1.0f;
}

template <class T> __global__ void fill_kernel(T* p, std::int64_t n, std::uint64_t seed, bool positive) {
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
        p[i] = T(uniform(seed, static_cast<std::uint64_t>(i), positive));
}

// Sum (or max) over a block of kThreads threads; every thread gets the result.
template <bool kMax> __device__ float block_reduce(float v) {
    __shared__ float partial[kThreads / 32];
    for (int off = 16; off > 0; off /= 2) {
        const float o = __shfl_xor_sync(0xffffffffu, v, off);
        v = kMax ? fmaxf(v, o) : v + o;
    }
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    __syncthreads();  // partial[] may still be read by a previous call
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    v = partial[0];
    for (int w = 1; w < kThreads / 32; ++w) v = kMax ? fmaxf(v, partial[w]) : v + partial[w];
    return v;
}

__global__ void softmax_kernel(__nv_bfloat16* s, std::int64_t seq, bool causal) {
    const std::int64_t row = blockIdx.x;
    __nv_bfloat16* r = s + row * seq;
    const std::int64_t valid = causal ? row % seq + 1 : seq;  // causal: query i sees keys 0..i
    float mx = -INFINITY;
    for (std::int64_t j = threadIdx.x; j < valid; j += blockDim.x) mx = fmaxf(mx, __bfloat162float(r[j]));
    mx = block_reduce<true>(mx);
    float sum = 0.0f;
    for (std::int64_t j = threadIdx.x; j < valid; j += blockDim.x) sum += __expf(__bfloat162float(r[j]) - mx);
    sum = block_reduce<false>(sum);
    const float inv = 1.0f / sum;
    for (std::int64_t j = threadIdx.x; j < seq; j += blockDim.x)
        r[j] = __float2bfloat16(j < valid ? __expf(__bfloat162float(r[j]) - mx) * inv : 0.0f);
}

__global__ void softmax_bwd_kernel(const __nv_bfloat16* p, __nv_bfloat16* dp, std::int64_t seq) {
    const std::int64_t row = blockIdx.x;
    const __nv_bfloat16* pr = p + row * seq;
    __nv_bfloat16* dr = dp + row * seq;
    float dot = 0.0f;
    for (std::int64_t j = threadIdx.x; j < seq; j += blockDim.x) dot += __bfloat162float(pr[j]) * __bfloat162float(dr[j]);
    dot = block_reduce<false>(dot);
    for (std::int64_t j = threadIdx.x; j < seq; j += blockDim.x) {
        const float pv = __bfloat162float(pr[j]);
        dr[j] = __float2bfloat16(pv * (__bfloat162float(dr[j]) - dot));
    }
}

// 16-byte vectors: 8 bf16 per load, the widest global access.
__global__ void copy_kernel(const uint4* x, uint4* y, std::int64_t n_vec) {
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n_vec;
         i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
        y[i] = x[i];
}

__global__ void triad_kernel(uint4* a, const uint4* b, const uint4* c, float scalar, std::int64_t n_vec) {
    const __nv_bfloat162 s2 = __floats2bfloat162_rn(scalar, scalar);
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n_vec;
         i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        uint4 bv = b[i], cv = c[i], av;
        const auto* b2 = reinterpret_cast<const __nv_bfloat162*>(&bv);
        const auto* c2 = reinterpret_cast<const __nv_bfloat162*>(&cv);
        auto* a2 = reinterpret_cast<__nv_bfloat162*>(&av);
        for (int j = 0; j < 4; ++j) a2[j] = __hfma2(s2, c2[j], b2[j]);
        a[i] = av;
    }
}

__global__ void rmsnorm_kernel(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y, std::int64_t row) {
    const std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * row;
    float ss = 0.0f;
    for (std::int64_t j = threadIdx.x; j < row; j += blockDim.x) {
        const float v = __bfloat162float(x[base + j]);
        ss += v * v;
    }
    ss = block_reduce<false>(ss);
    const float r = rsqrtf(ss / static_cast<float>(row) + 1e-5f);
    for (std::int64_t j = threadIdx.x; j < row; j += blockDim.x)
        y[base + j] = __float2bfloat16(__bfloat162float(x[base + j]) * r * __bfloat162float(w[j]));
}

__global__ void adam_kernel(float* p, float* m, float* v, const __nv_bfloat16* g, std::int64_t n) {
    // Megatron / NeMo defaults for LLM pre-training: beta1 0.9, beta2 0.95, eps 1e-8, weight
    // decay 0.1; bias corrections of step 10 (constants: they do not change the traffic).
    constexpr float lr = 1e-4f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f;
    constexpr float c1 = 1.0f / (1.0f - 0.34867844f), c2 = 1.0f / (1.0f - 0.59873694f);  // 1-b^10
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        const float gi = __bfloat162float(g[i]);
        const float mi = b1 * m[i] + (1.0f - b1) * gi;
        const float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] -= lr * (mi * c1 / (sqrtf(vi * c2) + eps) + wd * p[i]);
    }
}

// 32 x 32 tiles through shared memory so that both the row-major and the transposed FP8
// outputs are written coalesced. Tile rows are walked grid-stride (gridDim.y is capped at 65535,
// CUDA's limit: issue #17), and the amax is reduced in the block first: one atomic per block,
// not one per warp and tile (16.7 M atomics to one address for a 8192 x 65536 tensor before).
constexpr int kTile = 32;
constexpr int kTileRowsPerBlock = 8; // blockDim.y
__global__ void cast_transpose_kernel(const __nv_bfloat16* x, __nv_fp8_e4m3* y, __nv_fp8_e4m3* yt, float* amax,
                                      std::int64_t rows, std::int64_t cols) {
    __shared__ float tile[kTile][kTile + 1];  // +1: no bank conflicts on the transposed read
    __shared__ float warp_max[kTileRowsPerBlock];
    const std::int64_t c0 = static_cast<std::int64_t>(blockIdx.x) * kTile;
    float local_max = 0.0f;
    for (std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * kTile; r0 < rows;
         r0 += static_cast<std::int64_t>(gridDim.y) * kTile) {
        for (int i = threadIdx.y; i < kTile; i += blockDim.y) {
            const float v = __bfloat162float(x[(r0 + i) * cols + c0 + threadIdx.x]);
            tile[i][threadIdx.x] = v;
            local_max = fmaxf(local_max, fabsf(v));
            y[(r0 + i) * cols + c0 + threadIdx.x] = __nv_fp8_e4m3(v);
        }
        __syncthreads();
        for (int i = threadIdx.y; i < kTile; i += blockDim.y)
            yt[(c0 + i) * rows + r0 + threadIdx.x] = __nv_fp8_e4m3(tile[threadIdx.x][i]);
        __syncthreads(); // the next tile overwrites `tile`
    }
    for (int off = 16; off > 0; off /= 2) local_max = fmaxf(local_max, __shfl_xor_sync(0xffffffffu, local_max, off));
    if (threadIdx.x == 0) warp_max[threadIdx.y] = local_max;
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0) {
        float m = warp_max[0];
        for (int w = 1; w < kTileRowsPerBlock; ++w) m = fmaxf(m, warp_max[w]);
        // amax >= 0, so the float's bit pattern orders like an int.
        atomicMax(reinterpret_cast<int*>(amax), __float_as_int(m));
    }
}

} // namespace

void fill_random(void* p, std::size_t n, DType t, bool positive, std::uint64_t seed, cudaStream_t s,
                 const std::string& context) {
    const auto ni = static_cast<std::int64_t>(n);
    switch (t) {
    case DType::bf16: fill_kernel<<<blocks_for(ni), kThreads, 0, s>>>(static_cast<__nv_bfloat16*>(p), ni, seed, positive); break;
    case DType::fp8_e4m3: fill_kernel<<<blocks_for(ni), kThreads, 0, s>>>(static_cast<__nv_fp8_e4m3*>(p), ni, seed, positive); break;
    case DType::fp8_e5m2: fill_kernel<<<blocks_for(ni), kThreads, 0, s>>>(static_cast<__nv_fp8_e5m2*>(p), ni, seed, positive); break;
    case DType::fp32: fill_kernel<<<blocks_for(ni), kThreads, 0, s>>>(static_cast<float*>(p), ni, seed, positive); break;
    }
    check_launch("fill_kernel", context);
}

void softmax_fwd(void* s_bf16, std::int64_t rows, std::int64_t seq, bool causal, cudaStream_t st,
                 const std::string& context) {
    softmax_kernel<<<static_cast<unsigned>(rows), kThreads, 0, st>>>(static_cast<__nv_bfloat16*>(s_bf16), seq, causal);
    check_launch("softmax_kernel", context);
}

void softmax_bwd(const void* p_bf16, void* dp_bf16, std::int64_t rows, std::int64_t seq, cudaStream_t st,
                 const std::string& context) {
    softmax_bwd_kernel<<<static_cast<unsigned>(rows), kThreads, 0, st>>>(static_cast<const __nv_bfloat16*>(p_bf16),
                                                                           static_cast<__nv_bfloat16*>(dp_bf16), seq);
    check_launch("softmax_bwd_kernel", context);
}

void copy_bf16(const void* x, void* y, std::int64_t n, cudaStream_t st, const std::string& context) {
    const std::int64_t n_vec = n / 8;  // callers pass multiples of 8 elements (plans use powers of 2)
    copy_kernel<<<blocks_for(n_vec), kThreads, 0, st>>>(static_cast<const uint4*>(x), static_cast<uint4*>(y), n_vec);
    check_launch("copy_kernel", context);
}

void triad_bf16(void* a, const void* b, const void* c, float scalar, std::int64_t n, cudaStream_t st,
                const std::string& context) {
    const std::int64_t n_vec = n / 8;
    triad_kernel<<<blocks_for(n_vec), kThreads, 0, st>>>(static_cast<uint4*>(a), static_cast<const uint4*>(b),
                                                          static_cast<const uint4*>(c), scalar, n_vec);
    check_launch("triad_kernel", context);
}

void rmsnorm_bf16(const void* x, const void* w, void* y, std::int64_t rows, std::int64_t row, cudaStream_t st,
                  const std::string& context) {
    rmsnorm_kernel<<<static_cast<unsigned>(rows), kThreads, 0, st>>>(static_cast<const __nv_bfloat16*>(x),
                                                                       static_cast<const __nv_bfloat16*>(w),
                                                                       static_cast<__nv_bfloat16*>(y), row);
    check_launch("rmsnorm_kernel", context);
}

void adam_fp32(float* p, float* m, float* v, const void* g_bf16, std::int64_t n, cudaStream_t st,
               const std::string& context) {
    adam_kernel<<<blocks_for(n), kThreads, 0, st>>>(p, m, v, static_cast<const __nv_bfloat16*>(g_bf16), n);
    check_launch("adam_kernel", context);
}

void cast_transpose_fp8(const void* x, void* y, void* yt, float* amax, std::int64_t rows, std::int64_t cols,
                        cudaStream_t st, const std::string& context) {
    constexpr std::int64_t kMaxGridY = 65535; // CUDA's limit on gridDim.y
    const dim3 grid(static_cast<unsigned>(cols / kTile), static_cast<unsigned>(std::min(rows / kTile, kMaxGridY)));
    const dim3 block(kTile, kTileRowsPerBlock);
    cast_transpose_kernel<<<grid, block, 0, st>>>(static_cast<const __nv_bfloat16*>(x), static_cast<__nv_fp8_e4m3*>(y),
                                                  static_cast<__nv_fp8_e4m3*>(yt), amax, rows, cols);
    check_launch("cast_transpose_kernel", context);
}

} // namespace trainsim::kernels::detail
