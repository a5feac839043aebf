#include "trainsim/kernels/overlap.hpp"

#include "nccl_impl.hpp"

#include <memory>
#include <string>

namespace trainsim::kernels {

struct OverlapGemm::Impl {
    GpuDevice::Impl* dev = nullptr;
    std::unique_ptr<Gemm> gemm;
    std::unique_ptr<Collective> allreduce;
    cudaStream_t comm_stream = nullptr;
    cudaEvent_t comm_ready = nullptr;
    std::string context;
    ~Impl() {
        if (comm_ready != nullptr) cudaEventDestroy(comm_ready);
        if (comm_stream != nullptr) cudaStreamDestroy(comm_stream);
    }
};

OverlapGemm::OverlapGemm(GpuDevice& device, NcclComm& comm, const GemmSpec& gemm, std::size_t allreduce_bytes)
    : impl_(std::make_unique<Impl>()) {
    auto& I = *impl_;
    I.dev = &device.impl();
    I.context = describe(gemm) + " under all_reduce " + std::to_string(allreduce_bytes) + " B";
    // The communication stream gets the highest priority, as Megatron / TE give NCCL's streams,
    // so that its kernels are scheduled as soon as SMs free up.
    int least = 0, greatest = 0;
    TS_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest), I.context);
    TS_CUDA(cudaStreamCreateWithPriority(&I.comm_stream, cudaStreamNonBlocking, greatest), I.context);
    TS_CUDA(cudaEventCreateWithFlags(&I.comm_ready, cudaEventDisableTiming), I.context);
    I.gemm = std::make_unique<Gemm>(device, gemm);
    I.allreduce = std::make_unique<Collective>(device, comm, CollectiveKind::all_reduce, allreduce_bytes);
}

OverlapGemm::~OverlapGemm() = default;

void OverlapGemm::run() {
    auto& I = *impl_;
    // The communication stream waits for the device stream (so the all-reduce starts after the
    // timer's start event), the all-reduce is launched first so its kernel is resident before
    // the GEMM's CTAs fill the SMs, then the GEMM goes on the device stream, which the timer
    // measures.
    TS_CUDA(cudaEventRecord(I.comm_ready, I.dev->stream), I.context);
    TS_CUDA(cudaStreamWaitEvent(I.comm_stream, I.comm_ready, 0), I.context);
    detail::run_collective(*I.allreduce->impl_, I.comm_stream);
    I.gemm->run();
}

void OverlapGemm::drain() {
    impl_->dev->wait(impl_->comm_stream, nullptr, impl_->context);
}

} // namespace trainsim::kernels
