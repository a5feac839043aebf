// CPU offload (parallel.offload; docs/model.md "CPU offload"): what the host adds to a step when the
// optimizer (ZeRO-Offload, Megatron-Core's optimizer CPU offload) or also the parameters (ZeRO-Infinity,
// FSDP cpu_offload) live in host memory.
//
// Per GPU, with S its optimizer shard (parameters after sharding, model::MemoryBreakdown::local_params
// over the sharding degree) and B the GPU's PCIe bandwidth x efficiency (profile interconnect.pcie_*):
//   gradients to the host   2 S / B     overlapped with backward (ZeRO-Offload swaps gradients out as
//                                       they are reduced): exposed = max(0, 2 S / B - backward)
//   CPU Adam                30 S x GPUs per node / (host memory bandwidth x CPU Adam efficiency)
//                                       after the last gradient (the global gradient norm and the
//                                       overflow check need every gradient first): not overlapped.
//                                       30 B per parameter: read the FP32 parameter, gradient, m and
//                                       v (16 B), write parameter, m, v (12 B) and the 16-bit copy (2 B)
//   updated 16-bit parameters to the GPU   2 S / B, after the update (ZeRO-Offload, Ren et al. 2021,
//                                       Fig. 5: the swap-in follows the CPU step)
//   params (ZeRO-Infinity / FSDP cpu_offload) also fetch each layer's 16-bit shard from the host for
//   every gather (forward, backward, and the recompute under full recompute): 2 S x passes / B,
//   prefetched during compute: exposed = max(0, that - forward, backward and recompute time).
// The GPU's own optimizer kernels no longer run: the simulated step's optimizer time is removed.
#pragma once

#include "trainsim/model/core/scenario.hpp"
#include "trainsim/sim/step/executor.hpp"

namespace trainsim::sim {

// Bytes of host traffic per parameter of a CPU Adam step (see above).
inline constexpr double kCpuAdamBytesPerParam = 16.0 + 12.0 + 2.0;

struct OffloadTime {
    double shard_params = 0;    // S: parameters of this GPU's optimizer shard
    double pcie_bytes = 0;      // per GPU per step, both directions
    double grad_to_host_s = 0;  // 2 S / B
    double grad_exposed_s = 0;  // beyond the backward pass
    double cpu_adam_s = 0;      // the node's CPU Adam over all its GPUs' shards
    double params_to_gpu_s = 0; // updated 16-bit parameters back
    double param_fetch_s = 0;   // params offload: per-layer fetches from the host
    double param_fetch_exposed_s = 0;
    double gpu_optimizer_s = 0;     // the simulated GPU optimizer time, removed
    double added_s = 0;             // net change of the step time
    double host_bytes_per_node = 0; // optimizer state, FP32 gradients (and 16-bit parameters) of the node's GPUs
    double host_capacity = 0;       // bytes of host memory per node (cluster.host_memory or the profile's)
    bool host_fits = true;
};

// Precondition: plan.parallel.offload != none and `step` was simulated for the plan.
[[nodiscard]] OffloadTime offload_time(const model::Plan& plan, const StepResult& step);
// What offload adds whatever the simulated step: CPU Adam and the parameters back (the exposed
// transfers are >= 0, the GPU optimizer is removed by the caller): a lower bound of
// added_s + gpu_optimizer_s, for the plan search. Precondition: plan.parallel.offload != none.
[[nodiscard]] double offload_serial_s(const model::Plan& plan);

} // namespace trainsim::sim
