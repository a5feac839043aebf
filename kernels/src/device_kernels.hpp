// Launchers for the hand-written device kernels (device_kernels.cu). Internal to kernels/.
// Every launcher checks the launch and throws KernelError naming the kernel and `context`.
#pragma once

#include "trainsim/kernels/gpu_device.hpp"

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace trainsim::kernels::detail {

// Fills n elements with pseudo-random values in [-1, 1] ([0, 1] when positive): tensor-core
// power draw, and so clocks, depend on the data (zeros run faster than real operands).
void fill_random(void* p, std::size_t n, DType t, bool positive, std::uint64_t seed, cudaStream_t s,
                 const std::string& context);

// In place over `rows` rows of length seq (bf16): softmax, with the causal mask when asked (row i
// of each seq x seq block keeps columns <= i mod seq). One block per row.
void softmax_fwd(void* s_bf16, std::int64_t rows, std::int64_t seq, bool causal, cudaStream_t st,
                 const std::string& context);
// dS = P * (dP - rowsum(P * dP)), in place into dP (bf16).
void softmax_bwd(const void* p_bf16, void* dp_bf16, std::int64_t rows, std::int64_t seq, cudaStream_t st,
                 const std::string& context);

// The streaming kernels take the device's SM count: their grids are the blocks the device keeps
// resident at once (grid-stride loops, one wave). Buffers come from cudaMalloc (256-byte aligned):
// whole 16-byte vectors first, then a scalar tail, so any element count works.
void copy_bf16(const void* x, void* y, std::int64_t n, int sms, cudaStream_t st, const std::string& context);
void triad_bf16(void* a, const void* b, const void* c, float scalar, std::int64_t n, int sms, cudaStream_t st,
                const std::string& context);
// `rows` rows of `row` elements; any row length (16-byte vectors when row % 8 == 0).
void rmsnorm_bf16(const void* x, const void* w, void* y, std::int64_t rows, std::int64_t row, int sms, cudaStream_t st,
                  const std::string& context);
// One Adam step (Kingma & Ba 2015, with AdamW-style decoupled weight decay as Megatron's fused
// optimizer): fp32 param / m / v in place, bf16 gradient.
void adam_fp32(float* p, float* m, float* v, const void* g_bf16, std::int64_t n, int sms, cudaStream_t st,
               const std::string& context);
// Reads `bytes` (a multiple of 16) of `buffer` so that the L2 then holds only clean lines of it.
void read_flush(const void* buffer, std::size_t bytes, unsigned* sink, int sms, cudaStream_t st,
                const std::string& context);
// bf16 [rows, cols] -> fp8 e4m3 [rows, cols] and its transpose [cols, rows], scaled; amax of the
// input into *amax (TE's cast_transpose for the FP8 forward / backward operands). Precondition:
// rows and cols multiples of 64 (the tile; MemoryOp checks).
void cast_transpose_fp8(const void* x, void* y, void* yt, float* amax, std::int64_t rows, std::int64_t cols,
                        cudaStream_t st, const std::string& context);

} // namespace trainsim::kernels::detail
