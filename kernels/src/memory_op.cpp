#include "trainsim/kernels/memory_op.hpp"

#include "device_impl.hpp"
#include "device_kernels.hpp"

#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

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
    if (spec.elements <= 0) throw KernelUnsupported("memory kernel", I.context, "elements must be positive");
    if (spec.kernel == MemoryKernel::rmsnorm && (spec.row <= 0 || spec.elements % spec.row != 0))
        throw KernelUnsupported("memory kernel", I.context, "elements must be whole rows (elements % row == 0)");
    if (spec.kernel == MemoryKernel::cast_transpose &&
        (spec.row <= 0 || spec.elements % spec.row != 0 || spec.row % 64 != 0 || (spec.elements / spec.row) % 64 != 0))
        throw KernelUnsupported("memory kernel", I.context, "rows must tile by 64 x 64 (row % 64 == 0, rows % 64 == 0)");
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
    const int sms = I.dev->info.sm_count;
    switch (I.spec.kernel) {
        case MemoryKernel::copy:
            detail::copy_bf16(I.x, I.y, n, sms, st, I.context);
            break;
        case MemoryKernel::triad:
            detail::triad_bf16(I.x, I.y, I.z, 0.5f, n, sms, st, I.context);
            break;
        case MemoryKernel::rmsnorm:
            detail::rmsnorm_bf16(I.x, I.w, I.y, n / I.spec.row, I.spec.row, sms, st, I.context);
            break;
        case MemoryKernel::adam:
            detail::adam_fp32(static_cast<float*>(I.x), static_cast<float*>(I.y), static_cast<float*>(I.z), I.w, n, sms,
                              st, I.context);
            break;
        case MemoryKernel::cast_transpose:
            detail::cast_transpose_fp8(I.x, I.y, I.z, I.amax, n / I.spec.row, I.spec.row, st, I.context);
            break;
    }
}

namespace {

float bf16_to_float(std::uint16_t b) {
    const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
    float f = 0;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

float round_bf16(float f) { // round to nearest even at bf16's 8 significant bits (finite values)
    std::uint32_t u = 0;
    std::memcpy(&u, &f, sizeof u);
    u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

template <class T>
std::vector<T> to_host(const void* p, std::size_t n, const std::string& context) {
    std::vector<T> v(n);
    TS_CUDA(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), context + " (verify)");
    return v;
}

} // namespace

double MemoryOp::verify() {
    auto& I = *impl_;
    const auto n = static_cast<std::size_t>(I.spec.elements);
    const std::string& ctx = I.context;
    double worst = 0;
    auto note = [&worst](double err) { worst = std::max(worst, std::isfinite(err) ? err : 1e30); };
    TS_CUDA(cudaStreamSynchronize(I.dev->stream), ctx);
    if (I.spec.kernel == MemoryKernel::adam) {
        const auto p0 = to_host<float>(I.x, n, ctx), m0 = to_host<float>(I.y, n, ctx), v0 = to_host<float>(I.z, n, ctx);
        const auto g = to_host<std::uint16_t>(I.w, n, ctx);
        run();
        TS_CUDA(cudaStreamSynchronize(I.dev->stream), ctx);
        const auto p = to_host<float>(I.x, n, ctx), m = to_host<float>(I.y, n, ctx), v = to_host<float>(I.z, n, ctx);
        // The kernel's constants (device_kernels.cu AdamStep).
        constexpr float lr = 1e-4f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f;
        constexpr float c1 = 1.0f / (1.0f - 0.34867844f), c2 = 1.0f / (1.0f - 0.59873694f);
        for (std::size_t i = 0; i < n; ++i) {
            const float gi = bf16_to_float(g[i]);
            const float mi = b1 * m0[i] + (1.0f - b1) * gi, vi = b2 * v0[i] + (1.0f - b2) * gi * gi;
            const float pi = p0[i] - lr * (mi * c1 / (std::sqrt(vi * c2) + eps) + wd * p0[i]);
            note(std::abs(m[i] - mi) / (std::abs(mi) + 1e-6f));
            note(std::abs(v[i] - vi) / (std::abs(vi) + 1e-6f));
            note(std::abs(p[i] - pi) / (std::abs(p0[i]) + 1e-6f));
        }
        return worst;
    }
    // amax is an atomicMax over calls: from 0, this call's alone.
    if (I.amax != nullptr) TS_CUDA(cudaMemset(I.amax, 0, sizeof(float)), ctx);
    run();
    TS_CUDA(cudaStreamSynchronize(I.dev->stream), ctx);
    switch (I.spec.kernel) {
        case MemoryKernel::copy: {
            const auto x = to_host<std::uint16_t>(I.x, n, ctx), y = to_host<std::uint16_t>(I.y, n, ctx);
            for (std::size_t i = 0; i < n; ++i) note(x[i] == y[i] ? 0.0 : 1.0);
            break;
        }
        case MemoryKernel::triad: { // a = b + 0.5 c
            const auto a = to_host<std::uint16_t>(I.x, n, ctx), b = to_host<std::uint16_t>(I.y, n, ctx),
                       c = to_host<std::uint16_t>(I.z, n, ctx);
            for (std::size_t i = 0; i < n; ++i) {
                const float bi = bf16_to_float(b[i]), ci = bf16_to_float(c[i]);
                note(std::abs(bf16_to_float(a[i]) - round_bf16(bi + 0.5f * ci)) /
                     (std::abs(bi) + 0.5f * std::abs(ci) + 1e-6f));
            }
            break;
        }
        case MemoryKernel::rmsnorm: {
            const auto row = static_cast<std::size_t>(I.spec.row);
            const auto x = to_host<std::uint16_t>(I.x, n, ctx), y = to_host<std::uint16_t>(I.y, n, ctx),
                       w = to_host<std::uint16_t>(I.w, row, ctx);
            for (std::size_t r = 0; r + row <= n; r += row) {
                double ss = 0;
                for (std::size_t j = 0; j < row; ++j)
                    ss += static_cast<double>(bf16_to_float(x[r + j])) * bf16_to_float(x[r + j]);
                const double inv = 1.0 / std::sqrt(ss / static_cast<double>(row) + 1e-5);
                for (std::size_t j = 0; j < row; ++j) {
                    const double xs = bf16_to_float(x[r + j]) * inv;
                    note(std::abs(bf16_to_float(y[r + j]) - xs * bf16_to_float(w[j])) / (std::abs(xs) + 1e-6));
                }
            }
            break;
        }
        case MemoryKernel::cast_transpose: {
            const auto rows = n / static_cast<std::size_t>(I.spec.row), cols = static_cast<std::size_t>(I.spec.row);
            const auto x = to_host<std::uint16_t>(I.x, n, ctx);
            const auto y = to_host<std::uint8_t>(I.y, n, ctx), yt = to_host<std::uint8_t>(I.z, n, ctx);
            const auto amax = to_host<float>(I.amax, 1, ctx);
            float want_amax = 0;
            for (std::size_t r = 0; r < rows; ++r)
                for (std::size_t c = 0; c < cols; ++c) {
                    const float v = bf16_to_float(x[r * cols + c]);
                    want_amax = std::max(want_amax, std::abs(v));
                    const __nv_fp8_e4m3 want(v);
                    note(y[r * cols + c] == want.__x ? 0.0 : 1.0);
                    note(yt[c * rows + r] == want.__x ? 0.0 : 1.0);
                }
            note(amax[0] == want_amax ? 0.0 : 1.0);
            break;
        }
        case MemoryKernel::adam:
            break;
    }
    return worst;
}

} // namespace trainsim::kernels
