// From one simulated step to the whole run: throughput, MFU, days, GPU-hours and money
// (design.md "Definitions"; docs/model.md "Run").
#pragma once

#include "trainsim/model/memory_model.hpp"
#include "trainsim/model/scenario.hpp"
#include "trainsim/sim/executor.hpp"
#include "trainsim/sim/network.hpp"
#include "trainsim/sim/run_model.hpp"
#include "trainsim/sim/trust.hpp"

#include <optional>
#include <string>

namespace trainsim::sim {

// The HBM a plan should leave free: the caching allocator cannot place every byte it was given.
// PyTorch's allocator rounds blocks up (512 B, 2 MiB segments for large tensors) and splits
// segments that later fragment; ZeRO (Rajbhandari et al., SC'20, arXiv 1910.02054, Sec. 3.2 and
// 6.3) reports runs that went out of memory "with over 30% of memory still available" from
// fragmentation at the extreme. 5% of HBM is our assumption between the rounding (~1-2%) and that
// extreme; `plan --memory-headroom` changes it.
inline constexpr double kMemoryHeadroomFraction = 0.05;

struct RunEstimate {
    std::string name;
    bool fits = false;
    // Fits, but leaves less than kMemoryHeadroomFraction of the HBM free: at risk of running out
    // of memory from fragmentation (the text and JSON say so; plan does not propose such plans).
    bool memory_tight = false;
    model::MemoryBreakdown memory;       // the peak stage
    Bytes capacity;                      // HBM capacity of one GPU
    // Present only for plans that fit (a plan that does not fit is never simulated).
    std::optional<StepResult> step;
    double step_time_s = 0;
    double tokens_per_step = 0;
    double tokens_per_s = 0;             // whole cluster
    double tokens_per_s_per_gpu = 0;
    double model_flops_per_token_causal = 0;
    double model_flops_per_token_noncausal = 0;
    double model_tflops_per_gpu = 0;     // causal count
    double mfu = 0;                      // causal model FLOP/s / dense peak of the precision used
    double mfu_noncausal = 0;            // non-causal attention count (as Megatron/NeMo report)
    double mfu_vs_bf16_peak = 0;         // causal count against the BF16 dense peak
    double peak_tflops = 0;              // the peak MFU is measured against
    double steps = 0;
    double days_to_train = 0;            // steady state: tokens / throughput
    // Wall clock with checkpoints, failures and restarts (run_model.hpp; the plan's run settings
    // unless the caller re-applies others with apply_run_model).
    RunTime run;
    double expected_days = 0;
    double expected_cost = 0;            // cost x run.overhead_factor: GPUs paid for the whole wall clock
    double gpu_hours = 0;
    double price_per_gpu_hour = 0;       // after the commitment discount
    double cost = 0;
    double cost_per_million_tokens = 0;
    std::string currency;
    // How far to trust the figures (trust.hpp), when an error model was given.
    std::optional<Band> band;
};

// Hours in the month used for machine-month prices: 8760 / 12.
inline constexpr double kHoursPerMonth = 730.0;
// The list rate per GPU-hour after the commitment discount. A machine-month price is for one
// machine of `gpus_per_machine` GPUs (the plan's cluster.gpus_per_node: a 4-GPU machine's month
// is shared by 4 GPUs, not 8).
[[nodiscard]] double price_per_gpu_hour(const model::Pricing& pricing, int gpus_per_machine);

// Evaluates one plan: memory first; simulates the step only if it fits (or, for validating
// against runs that were measured, when asked to simulate regardless).
// Recomputes e.run, e.expected_days and e.expected_cost with these run parameters (e must have
// been simulated).
void apply_run_model(RunEstimate& e, const model::Plan& plan, const RunModelParams& params);

[[nodiscard]] RunEstimate estimate_plan(const model::Plan& plan, const ExecOptions& opt = {},
                                        bool simulate_even_if_too_big = false);
// The same with the step's op graph and a network already built (plan search: one topology and
// one collective cache shared by every plan of a cluster; the costs are those of a fresh network).
// Preconditions: graph = build_workload(plan); network built for plan.cluster (plan_network).
[[nodiscard]] RunEstimate estimate_plan(const model::Plan& plan, const model::OpGraph& graph,
                                        const AnalyticNetwork& network, const ExecOptions& opt = {},
                                        bool simulate_even_if_too_big = false);
// The network estimate_plan builds for a plan's cluster.
[[nodiscard]] AnalyticNetwork plan_network(const model::Plan& plan);

} // namespace trainsim::sim
