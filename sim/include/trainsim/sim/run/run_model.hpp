// Whole-run wall-clock time: the steady-state days plus what slows them, checkpoint writes,
// failures, planned stops, preemptions, lost work and restarts (docs/model.md, "Whole run"). A
// first-order Young/Daly model with every interruption of the job together:
//
//   stretch = 1 + slowdown + stragglers + evaluation pauses + data-loader stalls   steady time added
//   delta = checkpoint bytes / (write bandwidth per node x nodes)        [s]  one checkpoint write
//   l_f   = GPUs / MTBF of one GPU + nodes / MTBF of one node            [1/s] failures of the job
//   l_p   = nodes x preemption rate per node (spot capacity only)        [1/s] preemptions
//   l_pl  = planned interruptions per second of the job                  [1/s] planned stops
//   M     = 1 / (l_f + l_p)                                              [s]  mean time between unplanned stops
//   tau   = sqrt(2 delta M)  (Young 1974; Daly 2006, first order)        [s]  checkpoint interval
//   expected days = steady days x stretch x (1 + delta/tau + tau/(2M) + R (l_f + l_p + l_pl) + W l_p)
//
// delta/tau: time spent writing checkpoints; tau/(2M): work lost per unplanned stop (on average
// half an interval) per unit time; R: the restart after every stop (a planned stop follows a
// checkpoint and loses no work); W: the wait for replacement capacity after each preemption. Valid
// while tau and R + W are small next to M (the factor is then a first-order expansion); the result
// flags when they are not.
#pragma once

#include "trainsim/model/core/scenario.hpp"
#include "trainsim/model/core/units.hpp"

#include <optional>

namespace trainsim::sim {

using model::kLlama3GpuMtbfHours;

// The run's parameters (a plan's `run` section: checkpoint write bandwidth per node, MTBF per GPU,
// restart time, optional fixed checkpoint interval). Defaults and sources: scenario_keys.cpp.
using RunModelParams = model::RunSettings;

struct RunTime {
    double checkpoint_bytes = 0;     // parameters x (2 B BF16 weights + 12 B FP32 master, Adam m, v)
    double checkpoint_write_s = 0;   // delta
    double stragglers = 0;           // the steady time added by stragglers (0 with one GPU)
    double stretch = 1;              // 1 + slowdown + stragglers + evaluation pauses + data-loader stalls
    double cluster_mtbf_s = 0;       // 1 / l_f: failures of GPUs and nodes
    double planned_interval_s = 0;   // 1 / l_pl; 0 without planned stops
    double preemption_interval_s = 0;   // 1 / l_p; 0 when the capacity is not preempted (not spot)
    double interruption_interval_s = 0; // M = 1 / (l_f + l_p)
    double checkpoint_interval_s = 0;  // tau
    double restart_s = 0;            // R
    double preemption_wait_s = 0;    // W (spot only)
    double overhead_factor = 1;      // stretch x (1 + delta/tau + tau/(2M) + R (l_f + l_p + l_pl) + W l_p)
    double expected_days = 0;        // steady days x overhead_factor
    double expected_failures = 0;    // expected wall-clock seconds x l_f
    double expected_preemptions = 0; // expected wall-clock seconds x l_p
    double expected_planned = 0;     // expected wall-clock seconds x l_pl
    bool first_order_valid = true;   // tau < M and R + W < M
};

// Bytes per parameter in a checkpoint: BF16 weights (2) + FP32 master weights and Adam m, v (12).
inline constexpr double kCheckpointBytesPerParam = 2.0 + 12.0;

// `spot`: the preemptions of spot capacity, or null for capacity that is not taken back.
// Precondition: steady_days >= 0, params > 0, gpus >= 1, nodes >= 1.
[[nodiscard]] RunTime run_time(double steady_days, double params, int gpus, int nodes, const RunModelParams& p,
                               const model::SpotOffer* spot = nullptr);
// The same for a plan (parameters from its model, GPUs and nodes from its cluster) paid as `how`:
// spot capacity is preempted at the plan's pricing.spot rate, other capacity is not.
[[nodiscard]] RunTime run_time(const model::Plan& plan, double steady_days, const RunModelParams& p,
                               model::Commitment how);
// As the plan pays (pricing.commitment).
[[nodiscard]] RunTime run_time(const model::Plan& plan, double steady_days, const RunModelParams& p);

} // namespace trainsim::sim
