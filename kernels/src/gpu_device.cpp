#include "trainsim/kernels/gpu_device.hpp"

#include "device_impl.hpp"
#include "device_kernels.hpp"
#include "nccl_api.hpp"
#include "wait_loop.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <string>

namespace trainsim::kernels {

const char* to_string(DType t) {
    switch (t) {
    case DType::bf16: return "bf16";
    case DType::fp8_e4m3: return "fp8_e4m3";
    case DType::fp8_e5m2: return "fp8_e5m2";
    case DType::fp32: return "fp32";
    }
    return "?";
}

std::size_t size_of(DType t) {
    switch (t) {
    case DType::bf16: return 2;
    case DType::fp8_e4m3:
    case DType::fp8_e5m2: return 1;
    case DType::fp32: return 4;
    }
    return 1;
}

namespace detail {

// The part of NVML the calibration uses, resolved from libnvidia-ml.so.1 at run time: the
// library comes with the driver (not the toolkit), so linking it would make the binary
// unloadable on machines without a driver, and the toolkit here ships no nvml.h. The
// declarations follow nvml.h (NVML API version 11/12; these entry points are stable).
class Nvml {
public:
    Nvml() {
        lib_ = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
        if (lib_ == nullptr) return;
        init_ = sym<Ret (*)()>("nvmlInit_v2");
        shutdown_ = sym<Ret (*)()>("nvmlShutdown");
        by_pci_ = sym<Ret (*)(const char*, Device*)>("nvmlDeviceGetHandleByPciBusId_v2");
        clock_ = sym<Ret (*)(Device, int, unsigned*)>("nvmlDeviceGetClockInfo");
        temperature_ = sym<Ret (*)(Device, int, unsigned*)>("nvmlDeviceGetTemperature");
        power_ = sym<Ret (*)(Device, unsigned*)>("nvmlDeviceGetPowerUsage");
        throttle_ = sym<Ret (*)(Device, unsigned long long*)>("nvmlDeviceGetCurrentClocksThrottleReasons");
        driver_ = sym<Ret (*)(char*, unsigned)>("nvmlSystemGetDriverVersion");
        ok_ = init_ != nullptr && shutdown_ != nullptr && init_() == kSuccess;
    }
    ~Nvml() {
        if (ok_) shutdown_();
        if (lib_ != nullptr) dlclose(lib_);
    }
    Nvml(const Nvml&) = delete;
    Nvml& operator=(const Nvml&) = delete;

    [[nodiscard]] std::string driver() const {
        std::array<char, 96> buf{};
        if (ok_ && driver_ != nullptr && driver_(buf.data(), static_cast<unsigned>(buf.size())) == kSuccess)
            return buf.data();
        return {};
    }

    [[nodiscard]] Telemetry read(const std::string& pci_bus_id) const {
        Telemetry t;
        Device dev = nullptr;
        if (!ok_ || by_pci_ == nullptr || by_pci_(pci_bus_id.c_str(), &dev) != kSuccess) return t;
        unsigned v = 0;
        if (clock_ != nullptr && clock_(dev, kClockSm, &v) == kSuccess) t.sm_clock_mhz = static_cast<int>(v);
        if (clock_ != nullptr && clock_(dev, kClockMem, &v) == kSuccess) t.mem_clock_mhz = static_cast<int>(v);
        if (temperature_ != nullptr && temperature_(dev, kTemperatureGpu, &v) == kSuccess)
            t.temperature_c = static_cast<int>(v);
        if (power_ != nullptr && power_(dev, &v) == kSuccess) t.power_w = static_cast<double>(v) / 1000.0;  // mW
        unsigned long long reasons = 0;
        if (throttle_ != nullptr && throttle_(dev, &reasons) == kSuccess) t.throttle_reasons = reasons;
        return t;
    }

private:
    using Ret = int;              // nvmlReturn_t
    using Device = struct NvmlDeviceSt*;  // nvmlDevice_t
    static constexpr Ret kSuccess = 0;        // NVML_SUCCESS
    static constexpr int kClockSm = 1;        // NVML_CLOCK_SM
    static constexpr int kClockMem = 2;       // NVML_CLOCK_MEM
    static constexpr int kTemperatureGpu = 0; // NVML_TEMPERATURE_GPU

    template <class F> F sym(const char* name) {
        void* p = dlsym(lib_, name);
        F f = nullptr;
        static_assert(sizeof(f) == sizeof(p));
        std::memcpy(&f, &p, sizeof(f));  // object pointer -> function pointer (POSIX guarantees it works)
        return f;
    }

    void* lib_ = nullptr;
    bool ok_ = false;
    Ret (*init_)() = nullptr;
    Ret (*shutdown_)() = nullptr;
    Ret (*by_pci_)(const char*, Device*) = nullptr;
    Ret (*clock_)(Device, int, unsigned*) = nullptr;
    Ret (*temperature_)(Device, int, unsigned*) = nullptr;
    Ret (*power_)(Device, unsigned*) = nullptr;
    Ret (*throttle_)(Device, unsigned long long*) = nullptr;
    Ret (*driver_)(char*, unsigned) = nullptr;
};

} // namespace detail

int gpu_count() noexcept {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

std::string no_gpu_reason() {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    (void)cudaGetLastError();
    if (e != cudaSuccess) return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
    if (n == 0) return "the CUDA runtime reports 0 devices (check CUDA_VISIBLE_DEVICES)";
    return {};
}

namespace {

DeviceInfo query(int ordinal, const detail::Nvml* nvml) {
    if (gpu_count() == 0) throw NoCudaDevice(no_gpu_reason());
    const std::string ctx = "device " + std::to_string(ordinal);
    if (ordinal < 0 || ordinal >= gpu_count())
        throw KernelError("cudaSetDevice", ctx,
                          "no such device (" + std::to_string(gpu_count()) + " visible)");
    DeviceInfo d;
    d.ordinal = ordinal;
    cudaDeviceProp prop{};
    TS_CUDA(cudaGetDeviceProperties(&prop, ordinal), ctx);
    d.name = prop.name;
    d.cc_major = prop.major;
    d.cc_minor = prop.minor;
    d.memory_bytes = prop.totalGlobalMem;
    std::array<char, 32> pci{};
    TS_CUDA(cudaDeviceGetPCIBusId(pci.data(), static_cast<int>(pci.size()), ordinal), ctx);
    d.pci_bus_id = pci.data();
    auto attr = [&](cudaDeviceAttr a) {
        int v = 0;
        if (cudaDeviceGetAttribute(&v, a, ordinal) != cudaSuccess) {
            (void)cudaGetLastError();
            return 0;
        }
        return v;
    };
    d.sm_count = attr(cudaDevAttrMultiProcessorCount);
    d.l2_bytes = static_cast<std::size_t>(attr(cudaDevAttrL2CacheSize));
    d.max_sm_clock_mhz = attr(cudaDevAttrClockRate) / 1000;  // kHz
    d.max_mem_clock_mhz = attr(cudaDevAttrMemoryClockRate) / 1000;
    TS_CUDA(cudaDriverGetVersion(&d.driver_version), ctx);
    TS_CUDA(cudaRuntimeGetVersion(&d.runtime_version), ctx);
    d.cublaslt_version = cublasLtGetVersion();
    // NCCL is opened at run time and only runs that communicate need it (nccl_api.hpp).
    if (const detail::NcclApi* api = detail::try_nccl(&d.nccl_missing)) {
        d.nccl_version = api->version;
        d.nccl_library = api->library;
    }
    if (nvml != nullptr) d.nvidia_driver = nvml->driver();
    return d;
}

} // namespace

DeviceInfo device_info(int ordinal) {
    const detail::Nvml nvml;
    return query(ordinal, &nvml);
}

RuntimeReport runtime_report() noexcept {
    RuntimeReport r;
    try {
        r.device_count = gpu_count();
        if (r.device_count == 0) r.no_device_reason = no_gpu_reason();
        for (int i = 0; i < r.device_count; ++i) {
            cudaDeviceProp prop{};
            if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) {
                (void)cudaGetLastError();
                continue;
            }
            r.devices.push_back(std::to_string(i) + ": " + prop.name + " (" + std::to_string(prop.major) + "." +
                                std::to_string(prop.minor) + ", " + std::to_string(prop.multiProcessorCount) +
                                " SMs, " + std::to_string(prop.totalGlobalMem >> 30) + " GiB)");
        }
        if (cudaRuntimeGetVersion(&r.runtime_version) != cudaSuccess) (void)cudaGetLastError();
        if (cudaDriverGetVersion(&r.driver_version) != cudaSuccess) (void)cudaGetLastError();
        r.cublaslt_version = cublasLtGetVersion();
        Dl_info info{};
        if (dladdr(reinterpret_cast<void*>(&cublasLtGetVersion), &info) != 0 && info.dli_fname != nullptr)
            r.cublaslt_library = info.dli_fname;
        if (const detail::NcclApi* api = detail::try_nccl(&r.nccl_missing)) {
            r.nccl_version = api->version;
            r.nccl_library = api->library;
        }
    } catch (...) {
        // A report, not a check: what could not be read stays empty.
    }
    return r;
}

Telemetry telemetry(int ordinal) {
    const detail::Nvml nvml;
    return nvml.read(device_info(ordinal).pci_bus_id);
}

// ---------------------------------------------------------------------------------------------

GpuDevice::Impl::~Impl() {
    // After an abort the GPU may still hold work that never finishes: no wait, no free (each
    // would block); the process is ending with the error anyway.
    if (aborted) return;
    // Destructors must not throw: errors while tearing down are ignored (the run is over).
    release_scratch();
    if (lt != nullptr) cublasLtDestroy(lt);
    if (workspace != nullptr) cudaFree(workspace);
    if (scales != nullptr) cudaFree(scales);
    if (l2_flush != nullptr) cudaFree(l2_flush);
    if (l2_flush_sink != nullptr) cudaFree(l2_flush_sink);
    if (start != nullptr) cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
    if (stream != nullptr) cudaStreamDestroy(stream);
}

void GpuDevice::Impl::abort_watched() noexcept {
    aborted = true;
    for (auto* w : watched) w->abort();
}

void GpuDevice::Impl::wait(cudaStream_t s, cudaEvent_t event, const std::string& what) {
    auto ready = [&] {
        const cudaError_t q = event != nullptr ? cudaEventQuery(event) : cudaStreamQuery(s);
        if (q == cudaErrorNotReady) return false;
        detail::check_cuda(q, event != nullptr ? "cudaEventQuery" : "cudaStreamQuery", what);
        return true;
    };
    auto async_error = [&]() -> std::optional<std::string> {
        for (auto* w : watched) {
            const ncclResult_t e = w->async_error();
            if (e == ncclSuccess || e == ncclInProgress) continue;
            const detail::NcclApi* api = detail::try_nccl();
            return w->describe() + ": " + (api != nullptr ? api->GetErrorString(e) : "error " + std::to_string(e));
        }
        return std::nullopt;
    };
    std::string why;
    switch (detail::wait_until(ready, async_error, wait_timeout_s, &why)) {
        case detail::WaitEnd::done:
            return;
        case detail::WaitEnd::async_error:
            abort_watched();
            throw KernelTimeout("ncclCommGetAsyncError", what,
                                "NCCL reported an asynchronous error (" + why + "); its communicators were aborted");
        case detail::WaitEnd::timeout:
            abort_watched();
            throw KernelTimeout("timeout", what,
                                "the GPU work did not finish within " +
                                    std::to_string(static_cast<long>(wait_timeout_s)) +
                                    " s (--gpu-timeout): a rank died or hangs, or a kernel never ends" +
                                    (watched.empty() ? std::string() : "; the NCCL communicators were aborted"));
    }
}

void GpuDevice::Impl::check_memory(std::size_t bytes, const std::string& context) const {
    std::size_t free_b = 0, total = 0;
    TS_CUDA(cudaMemGetInfo(&free_b, &total), context);
    // Keep 5% free for cuBLASLt / NCCL internal allocations.
    if (static_cast<double>(bytes) > 0.95 * static_cast<double>(free_b))
        throw KernelUnsupported("cudaMalloc", context,
                                "needs " + std::to_string(bytes >> 20) + " MiB, " + std::to_string(free_b >> 20) +
                                    " MiB free");
}

void* GpuDevice::Impl::scratch(const std::string& name, std::size_t bytes, DType fill, const std::string& context,
                               bool positive) {
    Slot& s = slots[name];
    if (s.bytes < bytes) {
        if (s.ptr != nullptr) TS_CUDA(cudaFree(s.ptr), context);
        s.ptr = nullptr;
        s.bytes = 0;
        TS_CUDA(cudaMalloc(&s.ptr, bytes), context + " (buffer " + name + ")");
        s.bytes = bytes;
        s.filled_as = fill;
        s.positive = positive;
        detail::fill_random(s.ptr, s.bytes / size_of(fill), fill, positive, seed++, stream, context);
    } else if (s.filled_as != fill || s.positive != positive) {
        s.filled_as = fill;
        s.positive = positive;
        detail::fill_random(s.ptr, s.bytes / size_of(fill), fill, positive, seed++, stream, context);
    }
    return s.ptr;
}

void GpuDevice::Impl::release_scratch() {
    if (aborted) return; // the stream may never drain: keep the buffers (the run is ending)
    if (stream != nullptr) cudaStreamSynchronize(stream);
    for (auto& [name, s] : slots)
        if (s.ptr != nullptr) cudaFree(s.ptr);
    slots.clear();
}

GpuDevice::GpuDevice(int ordinal) : impl_(std::make_unique<Impl>()) {
    impl_->nvml = std::make_unique<detail::Nvml>();
    impl_->info = query(ordinal, impl_->nvml.get());
    const std::string ctx = "device " + std::to_string(ordinal) + " (" + impl_->info.name + ")";
    TS_CUDA(cudaSetDevice(ordinal), ctx);
    TS_CUDA(cudaStreamCreateWithFlags(&impl_->stream, cudaStreamNonBlocking), ctx);
    TS_CUDA(cudaEventCreate(&impl_->start), ctx);
    TS_CUDA(cudaEventCreate(&impl_->stop), ctx);
    // Twice the L2 so that no line of the previous operation's operands survives the flush.
    impl_->l2_flush_bytes = std::max<std::size_t>(2 * impl_->info.l2_bytes, 8u << 20);
    TS_CUDA(cudaMalloc(&impl_->l2_flush, impl_->l2_flush_bytes), ctx + " (L2 flush buffer)");
    TS_CUDA(cudaMalloc(reinterpret_cast<void**>(&impl_->l2_flush_sink), sizeof(unsigned)), ctx + " (L2 flush)");
    TS_CUBLAS(cublasLtCreate(&impl_->lt), ctx);
    TS_CUDA(cudaMalloc(&impl_->workspace, Impl::kWorkspaceBytes), ctx + " (cuBLASLt workspace)");
    // Two per-tensor scales of 1 (A and B of an FP8 GEMM), each at a 16-byte boundary.
    std::array<float, 2 * Impl::kScaleStride> ones{};
    ones.fill(1.0f);
    TS_CUDA(cudaMalloc(reinterpret_cast<void**>(&impl_->scales), sizeof(ones)), ctx);
    TS_CUDA(cudaMemcpy(impl_->scales, ones.data(), sizeof(ones), cudaMemcpyHostToDevice), ctx);
}

GpuDevice::~GpuDevice() = default;

const DeviceInfo& GpuDevice::info() const { return impl_->info; }

bool GpuDevice::supports_fp8() const {
    // FP8 tensor cores: Ada (8.9) and Hopper (9.0) onwards.
    return impl_->info.cc_major * 10 + impl_->info.cc_minor >= 89;
}

void GpuDevice::start_timer() { TS_CUDA(cudaEventRecord(impl_->start, impl_->stream), "timer start"); }

double GpuDevice::stop_timer() {
    TS_CUDA(cudaEventRecord(impl_->stop, impl_->stream), "timer stop");
    impl_->wait(impl_->stream, impl_->stop, "timed GPU work");
    float ms = 0.0f;
    TS_CUDA(cudaEventElapsedTime(&ms, impl_->start, impl_->stop), "timer stop");
    return static_cast<double>(ms) * 1e-3;
}

void GpuDevice::flush_l2() {
    // Read, not written: a memset would leave the L2 full of dirty lines, written back to HBM by
    // the timed kernel's own misses. Reading the buffer evicts the previous operation's lines
    // (dirty ones are written back now, before the timer's start event, which follows on the
    // stream) and leaves only clean lines, whose eviction costs the timed kernel nothing.
    detail::read_flush(impl_->l2_flush, impl_->l2_flush_bytes / 16 * 16, impl_->l2_flush_sink, impl_->info.sm_count,
                       impl_->stream, "L2 flush");
}

void GpuDevice::synchronize() {
    impl_->wait(impl_->stream, nullptr, "synchronize");
}

bool GpuDevice::aborted() const {
    return impl_->aborted;
}

void GpuDevice::set_wait_timeout(double seconds) {
    if (!(seconds > 0)) throw KernelError("set_wait_timeout", "GPU wait timeout", "must be positive seconds");
    impl_->wait_timeout_s = seconds;
}

std::size_t GpuDevice::free_memory() const {
    std::size_t free_b = 0, total = 0;
    TS_CUDA(cudaMemGetInfo(&free_b, &total), "free memory");
    return free_b;
}

Telemetry GpuDevice::telemetry() const { return impl_->nvml->read(impl_->info.pci_bus_id); }

void GpuDevice::release_scratch() { impl_->release_scratch(); }

} // namespace trainsim::kernels
