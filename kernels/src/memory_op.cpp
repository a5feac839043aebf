#include "trainsim/kernels/memory_op.hpp"

#include "device_impl.hpp"
#include "device_kernels.hpp"

#include <string>

namespace trainsim::kernels {

const char* to_string(MemoryKernel k) {
    switch (k) {
    case MemoryKernel::copy: return "copy";
    case MemoryKernel::triad: return "triad";
    case MemoryKernel::rmsnorm: return "rmsnorm";
    case MemoryKernel::adam: return "adam";
    case MemoryKernel::cast_transpose: return "cast_transpose";
    }
    return "?";
}

std::size_t MemoryOp::bytes_needed(const MemorySpec& s) {
    const auto n = static_cast<std::size_t>(s.elements);
    switch (s.kernel) {
    case MemoryKernel::copy: return 2 * n * 2;
    case MemoryKernel::triad: return 3 * n * 2;
    case MemoryKernel::rmsnorm: return 2 * n * 2 + static_cast<std::size_t>(s.row) * 2;
    case MemoryKernel::adam: return n * (3 * 4 + 2);
    case MemoryKernel::cast_transpose: return n * (2 + 1 + 1) + 4;
    }
    return 0;
}

struct MemoryOp::Impl {
    MemorySpec spec;
    std::string context;
    GpuDevice::Impl* dev = nullptr;
    void *x = nullptr, *y = nullptr, *z = nullptr, *w = nullptr;
    float* amax = nullptr;
};

MemoryOp::MemoryOp(GpuDevice& device, const MemorySpec& spec) : impl_(std::make_unique<Impl>()) {
    auto& I = *impl_;
    I.spec = spec;
    I.context = std::string("memory ") + to_string(spec.kernel) + " elements=" + std::to_string(spec.elements);
    I.dev = &device.impl();
    auto& dev = device.impl();
    if (spec.elements <= 0 || spec.elements % 8 != 0)
        throw KernelUnsupported("memory kernel", I.context, "elements must be a positive multiple of 8 (16-byte vectors)");
    if ((spec.kernel == MemoryKernel::rmsnorm || spec.kernel == MemoryKernel::cast_transpose) &&
        (spec.row <= 0 || spec.elements % spec.row != 0 || spec.row % 32 != 0 || (spec.elements / spec.row) % 32 != 0))
        throw KernelUnsupported("memory kernel", I.context, "rows must tile by 32 x 32 (row % 32 == 0, rows % 32 == 0)");
    if (spec.kernel == MemoryKernel::cast_transpose && !device.supports_fp8())
        throw KernelUnsupported("cast_transpose_kernel", I.context,
                                "FP8 conversion needs compute capability >= 8.9 (FP8 training is not used below it)");
    dev.check_memory(bytes_needed(spec), I.context);
    const auto n = static_cast<std::size_t>(spec.elements);
    switch (spec.kernel) {
    case MemoryKernel::copy:
        I.x = dev.scratch("mem.x", n * 2, DType::bf16, I.context);
        I.y = dev.scratch("mem.y", n * 2, DType::bf16, I.context);
        break;
    case MemoryKernel::triad:
        I.x = dev.scratch("mem.x", n * 2, DType::bf16, I.context);
        I.y = dev.scratch("mem.y", n * 2, DType::bf16, I.context);
        I.z = dev.scratch("mem.z", n * 2, DType::bf16, I.context);
        break;
    case MemoryKernel::rmsnorm:
        I.x = dev.scratch("mem.x", n * 2, DType::bf16, I.context);
        I.y = dev.scratch("mem.y", n * 2, DType::bf16, I.context);
        I.w = dev.scratch("mem.w", static_cast<std::size_t>(spec.row) * 2, DType::bf16, I.context);
        break;
    case MemoryKernel::adam:
        // The fp32 param / m / v take 4 bytes an element: the slots are sized in fp32.
        I.x = dev.scratch("mem.p", n * 4, DType::fp32, I.context);
        I.y = dev.scratch("mem.m", n * 4, DType::fp32, I.context);
        I.z = dev.scratch("mem.v", n * 4, DType::fp32, I.context, /*positive=*/true);
        I.w = dev.scratch("mem.g", n * 2, DType::bf16, I.context);
        break;
    case MemoryKernel::cast_transpose:
        I.x = dev.scratch("mem.x", n * 2, DType::bf16, I.context);
        I.y = dev.scratch("mem.y8", n, DType::fp8_e4m3, I.context);
        I.z = dev.scratch("mem.yt8", n, DType::fp8_e4m3, I.context);
        I.amax = static_cast<float*>(dev.scratch("mem.amax", 4, DType::fp32, I.context, /*positive=*/true));
        break;
    }
}

MemoryOp::~MemoryOp() = default;

void MemoryOp::run() {
    auto& I = *impl_;
    cudaStream_t st = I.dev->stream;
    const std::int64_t n = I.spec.elements;
    switch (I.spec.kernel) {
    case MemoryKernel::copy: detail::copy_bf16(I.x, I.y, n, st, I.context); break;
    case MemoryKernel::triad: detail::triad_bf16(I.x, I.y, I.z, 0.5f, n, st, I.context); break;
    case MemoryKernel::rmsnorm: detail::rmsnorm_bf16(I.x, I.w, I.y, n / I.spec.row, I.spec.row, st, I.context); break;
    case MemoryKernel::adam:
        detail::adam_fp32(static_cast<float*>(I.x), static_cast<float*>(I.y), static_cast<float*>(I.z), I.w, n, st,
                          I.context);
        break;
    case MemoryKernel::cast_transpose:
        detail::cast_transpose_fp8(I.x, I.y, I.z, I.amax, n / I.spec.row, I.spec.row, st, I.context);
        break;
    }
}

} // namespace trainsim::kernels
