// Whole-run wall-clock time: the steady-state days plus checkpoint writes, failures, lost work and
// restarts (docs/run-model.md). A first-order Young/Daly model:
//
//   delta = checkpoint bytes / (write bandwidth per node x nodes)        [s]  one checkpoint write
//   M     = MTBF of one GPU / GPUs                                       [s]  cluster MTBF
//   tau   = sqrt(2 delta M)  (Young 1974; Daly 2006, first order)        [s]  checkpoint interval
//   expected days = steady days x (1 + delta/tau + tau/(2M) + R/M)
//
// delta/tau: time spent writing checkpoints; tau/(2M): work lost per failure (on average half an
// interval) per unit time; R/M: restart cost R per failure. Valid while tau and R are small next
// to M (the factor is then a first-order expansion); the result flags when tau >= M.
#pragma once

#include "trainsim/model/scenario.hpp"
#include "trainsim/model/units.hpp"

#include <optional>

namespace trainsim::sim {

// Llama 3 (Dubey et al. 2024, arXiv 2407.21783, Sec. 3.3.4): 419 unexpected interruptions in a
// 54-day snapshot of pre-training on 16,384 H100 GPUs, i.e. a per-GPU MTBF of
// 16384 x 54 x 24 / 419 = 50,677 GPU-hours (every interruption blamed on one GPU-equivalent).
inline constexpr double kLlama3GpuMtbfHours = 16384.0 * 54.0 * 24.0 / 419.0;

struct RunModelParams {
    // Sustained checkpoint write bandwidth of one node to shared storage (5 GB/s: an assumption,
    // typical of one node's client throughput to a parallel file system; nodes write in parallel).
    model::Bandwidth checkpoint_bandwidth_per_node = model::gb_per_s(5);
    double gpu_mtbf_hours = kLlama3GpuMtbfHours;
    // Time from a failure to training again: detect, reschedule, reload the checkpoint, warm up
    // (10 min: an assumption; Llama 3 reports most interruptions were handled automatically).
    double restart_s = 600;
    // Fixed checkpoint interval instead of the Young/Daly optimum.
    std::optional<double> checkpoint_interval_s;
};

struct RunTime {
    double checkpoint_bytes = 0;     // parameters x (2 B BF16 weights + 12 B FP32 master, Adam m, v)
    double checkpoint_write_s = 0;   // delta
    double cluster_mtbf_s = 0;       // M
    double checkpoint_interval_s = 0;  // tau
    double restart_s = 0;            // R
    double overhead_factor = 1;      // 1 + delta/tau + tau/(2M) + R/M
    double expected_days = 0;        // steady days x overhead_factor
    double expected_failures = 0;    // expected wall-clock seconds / M
    bool first_order_valid = true;   // tau < M and R < M
};

// Bytes per parameter in a checkpoint: BF16 weights (2) + FP32 master weights and Adam m, v (12).
inline constexpr double kCheckpointBytesPerParam = 2.0 + 12.0;

// Precondition: steady_days >= 0, params > 0, gpus >= 1, nodes >= 1.
[[nodiscard]] RunTime run_time(double steady_days, double params, int gpus, int nodes, const RunModelParams& p);
// The same for a plan (parameters from its model, GPUs and nodes from its cluster).
[[nodiscard]] RunTime run_time(const model::Plan& plan, double steady_days, const RunModelParams& p);

} // namespace trainsim::sim
