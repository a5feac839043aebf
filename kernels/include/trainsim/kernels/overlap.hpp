// Compute slowed by concurrent communication: a GEMM timed while an NCCL all-reduce runs on a
// second (high-priority) stream, as Megatron overlaps the data-parallel gradient reduction with
// backward GEMMs. Compare with the same Gemm timed alone: slowdown = t_overlap / t_alone - 1.
#pragma once

#include "trainsim/kernels/gemm.hpp"
#include "trainsim/kernels/nccl_comm.hpp"

#include <cstddef>
#include <memory>

namespace trainsim::kernels {

class OverlapGemm {
public:
    // allreduce_bytes should make the all-reduce last longer than the GEMM (the caller's plan
    // picks it), so the GEMM runs under communication from start to end.
    OverlapGemm(GpuDevice& device, NcclComm& comm, const GemmSpec& gemm, std::size_t allreduce_bytes);
    ~OverlapGemm();
    OverlapGemm(const OverlapGemm&) = delete;
    OverlapGemm& operator=(const OverlapGemm&) = delete;

    // Enqueues the all-reduce on the communication stream, then the GEMM on the device stream
    // (the one the timer measures): the time is the GEMM's under contention.
    void run();
    // Waits for the communication stream (call after each timed sample, untimed).
    void drain();

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

} // namespace trainsim::kernels
