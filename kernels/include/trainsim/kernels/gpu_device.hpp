// One GPU as the calibration sees it: what it is (name, compute capability, library versions),
// how it is doing right now (clocks, temperature, through NVML when the driver ships it), and a
// context to run timed work on (a stream, timing events, an L2-flush buffer, a cuBLASLt handle
// with its workspace and scratch buffers reused across operations).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace trainsim::kernels {

// Static facts about a device and the libraries the binary runs with.
struct DeviceInfo {
    int ordinal = 0;
    std::string name;              // "NVIDIA H200"
    std::string pci_bus_id;        // "0000:18:00.0"
    int cc_major = 0, cc_minor = 0;  // compute capability (9.0 = Hopper)
    int sm_count = 0;
    std::size_t memory_bytes = 0;  // total device memory
    std::size_t l2_bytes = 0;      // L2 cache size
    int max_sm_clock_mhz = 0;      // from the CUDA attribute (0 when the runtime no longer reports it)
    int max_mem_clock_mhz = 0;
    int driver_version = 0;        // cudaDriverGetVersion: 12040 = 12.4
    int runtime_version = 0;       // cudaRuntimeGetVersion
    std::size_t cublaslt_version = 0;  // cublasLtGetVersion: 130100 = 13.1.0
    int nccl_version = 0;              // ncclGetVersion: 22809 = 2.28.9 (0: NCCL not loaded)
    std::string nccl_library;          // the libnccl.so.2 opened at run time (empty: not found)
    std::string nccl_missing;          // why NCCL was not loaded (every place tried)
    std::string nvidia_driver;     // NVML system driver string "550.54.15" (empty without NVML)
};

// Conditions at one moment, read through NVML (libnvidia-ml, opened at run time so the binary
// needs neither its header nor its library). Absent fields could not be read.
struct Telemetry {
    std::optional<int> sm_clock_mhz;
    std::optional<int> mem_clock_mhz;
    std::optional<int> temperature_c;
    std::optional<double> power_w;
    // NVML clocks-event (throttle) reasons bit mask: 0 = running free; see nvml.h
    // nvmlClocksEventReason* (power cap 0x4, HW slowdown 0x8, thermal 0x20/0x40 ...).
    std::optional<std::uint64_t> throttle_reasons;
};

// Number of usable CUDA devices; 0 when there is none or no driver (never throws).
[[nodiscard]] int gpu_count() noexcept;
// Why gpu_count() is 0, in the runtime's words ("no CUDA-capable device is detected", ...).
[[nodiscard]] std::string no_gpu_reason();
// Throws NoCudaDevice / KernelError.
[[nodiscard]] DeviceInfo device_info(int ordinal);

// What this process finds at run time, without needing a GPU (trainsim-calibrate env): never throws.
struct RuntimeReport {
    int device_count = 0;
    std::string no_device_reason;     // when device_count is 0
    std::vector<std::string> devices; // "0: NVIDIA H200 (9.0, 132 SMs, 140 GiB)"
    int runtime_version = 0;          // cudaRuntimeGetVersion (the runtime linked in)
    int driver_version = 0;           // cudaDriverGetVersion (0: no driver)
    std::size_t cublaslt_version = 0;
    std::string cublaslt_library; // the libcublasLt the loader resolved
    int nccl_version = 0;
    std::string nccl_library; // empty: not found, see nccl_missing
    std::string nccl_missing;
};
[[nodiscard]] RuntimeReport runtime_report() noexcept;
[[nodiscard]] Telemetry telemetry(int ordinal);

// Element types the kernels work on.
enum class DType { bf16, fp8_e4m3, fp8_e5m2, fp32 };
[[nodiscard]] const char* to_string(DType t);
[[nodiscard]] std::size_t size_of(DType t);

// A context on one device. Every operation built on it runs on its stream. Not thread-safe.
class GpuDevice {
public:
    // Selects the device (cudaSetDevice) for the calling thread and creates the context.
    explicit GpuDevice(int ordinal);
    ~GpuDevice();
    GpuDevice(const GpuDevice&) = delete;
    GpuDevice& operator=(const GpuDevice&) = delete;

    [[nodiscard]] const DeviceInfo& info() const;
    [[nodiscard]] bool supports_fp8() const;  // compute capability >= 8.9 (Ada, Hopper, ...)

    // Event-based timing on the stream: the seconds between start() and stop(). stop() waits for
    // the stream to reach the stop event. Resolution ~0.5 us (cudaEventElapsedTime).
    void start_timer();
    [[nodiscard]] double stop_timer();
    // Reads a buffer twice the L2 size so the next kernel starts with a cold L2 (as a training
    // step does for most operands) holding no dirty lines. Asynchronous, on the stream.
    void flush_l2();
    void synchronize();
    // Every wait on this device (stop_timer, synchronize, NCCL work) gives up after this long and
    // aborts the device's NCCL communicators (KernelTimeout). Default: PyTorch's ProcessGroupNCCL
    // default timeout, 10 minutes (pytorch/pytorch PR #110947: collectives "should time out within
    // seconds", 10 minutes leaves ample headroom).
    static constexpr double kDefaultWaitTimeoutSeconds = 600.0;
    void set_wait_timeout(double seconds);
    // Whether a wait gave up (timeout or NCCL error) and aborted the communicators: the device's
    // stream may hold work that never ends, so nothing should wait on it again.
    [[nodiscard]] bool aborted() const;
    // Free device memory in bytes.
    [[nodiscard]] std::size_t free_memory() const;
    // Clocks, temperature, power now (NVML; empty fields without it).
    [[nodiscard]] Telemetry telemetry() const;
    // Frees the scratch buffers operations reuse (call between families of operations so that
    // GEMM operands do not sit in memory while the memory-bound sweep wants its 4 GiB arrays).
    // Precondition: no operation built on this device is alive.
    void release_scratch();

    struct Impl;
    [[nodiscard]] Impl& impl() { return *impl_; }

private:
    std::unique_ptr<Impl> impl_;
};

} // namespace trainsim::kernels
