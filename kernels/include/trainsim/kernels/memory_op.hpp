// Memory-bound kernels the training step is full of, written plainly (vectorised, grid-stride)
// so that their time is HBM traffic:
//   copy            y = x                                  (bf16)
//   triad           a = b + s*c                            (bf16, STREAM triad)
//   rmsnorm         y = x * rsqrt(mean(x^2) + eps) * w     (bf16 rows of `row` elements)
//   adam            Adam step: fp32 param, m, v updated in place from a bf16 gradient
//   cast_transpose  bf16 [rows, row] -> fp8 e4m3 copy + its transpose + amax (TE's FP8 cast;
//                   needs FP8 conversion hardware, sm >= 8.9)
// Bytes moved per call are defined once, in trainsim/calibrate/core/descriptor.hpp.
#pragma once

#include "trainsim/kernels/gpu_device.hpp"

#include <cstdint>
#include <memory>

namespace trainsim::kernels {

enum class MemoryKernel { copy, triad, rmsnorm, adam, cast_transpose };
[[nodiscard]] const char* to_string(MemoryKernel k);

struct MemorySpec {
    MemoryKernel kernel = MemoryKernel::copy;
    std::int64_t elements = 0;  // elements of the primary (input) tensor
    std::int64_t row = 8192;    // row length for rmsnorm and cast_transpose (elements % row == 0)
};

class MemoryOp {
public:
    // Throws KernelUnsupported (cast_transpose before sm_89, not enough memory), KernelError.
    MemoryOp(GpuDevice& device, const MemorySpec& spec);
    ~MemoryOp();
    MemoryOp(const MemoryOp&) = delete;
    MemoryOp& operator=(const MemoryOp&) = delete;

    void run();
    // Runs the kernel once more and checks what it wrote against the same formula computed here
    // on the host from the inputs it read (for Adam, the state before the call): the largest
    // error, relative to the magnitude of the terms (0: bit-exact; copy and cast_transpose must
    // be exact, bf16 results are within a few units in the last place, 2^-8 each; Adam's fp32
    // within 1e-5). For the GPU tests: a wrong index or a lost tail shows as an error of order 1.
    [[nodiscard]] double verify();
    // Device bytes the kernel's buffers take.
    [[nodiscard]] static std::size_t bytes_needed(const MemorySpec& s);

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

} // namespace trainsim::kernels
