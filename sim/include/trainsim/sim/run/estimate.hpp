// From one simulated step to the whole run: throughput, MFU, days, GPU-hours and money
// (design.md "Definitions"; docs/model.md "Run").
#pragma once

#include "trainsim/model/accounting/memory_model.hpp"
#include "trainsim/model/core/scenario.hpp"
#include "trainsim/model/core/stack_discrepancy.hpp"
#include "trainsim/sim/network/network.hpp"
#include "trainsim/sim/run/billing.hpp"
#include "trainsim/sim/run/energy.hpp"
#include "trainsim/sim/run/offload.hpp"
#include "trainsim/sim/run/run_model.hpp"
#include "trainsim/sim/step/executor.hpp"
#include "trainsim/sim/trust/trust.hpp"

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
    // CPU offload (parallel.offload): host memory per node needed and available, and what the host
    // adds to the step (step_time_s includes it; step->step_time is the GPU's simulated step).
    Bytes host_needed;
    Bytes host_capacity;
    std::optional<OffloadTime> offload;
    // Present only for plans that fit (a plan that does not fit is never simulated).
    std::optional<StepResult> step;
    // A fitted stack's discrepancy at this plan (stack_discrepancy.hpp): the throughput factor
    // exp(mean) that step_time_s includes (1 without one), and its predictive sd in log.
    double stack_discrepancy = 1.0;
    double stack_discrepancy_sd_log = 0;
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
    double gpu_hours = 0; // used: steady hours x GPUs
    // Whether the plan has a price for the way it pays (billing.hpp has_price). Without one the
    // money figures below stay 0 and mean "unknown": reports print "no price" / null, never 0.
    bool priced = false;
    double price_per_gpu_hour = 0; // the hourly rate of one GPU after the commitment discount
    // Money as billed (billing.hpp): the steady wall clock and the expected one, paid as the plan
    // pays (pricing.commitment).
    Bill bill;
    Bill expected_bill;
    double cost = 0;                    // bill.cost: the steady run as billed
    double expected_cost = 0;           // expected_bill.cost: the expected wall clock as billed
    double cost_per_million_tokens = 0; // cost / (tokens / 1e6)
    // Every way of paying the pricing section offers (billing_options), each on its own expected
    // wall clock (spot capacity is preempted, the rest is not), and the cheapest of them.
    struct BillingOption {
        Bill bill;
        double expected_days = 0;
    };
    std::vector<BillingOption> billing_options;
    std::size_t cheapest_option = 0; // index into billing_options (when not empty)
    std::string currency;
    // What billing needs to price another wall clock (the error band's ends).
    model::Pricing pricing;
    int nodes = 1;
    int gpus_per_node = 1;
    // The bill of `wall_days` paid as the plan pays. Precondition: priced.
    [[nodiscard]] Bill bill_for_days(double wall_days) const {
        return sim::bill(pricing, pricing.commitment, wall_days * 24.0, nodes, gpus_per_node);
    }
    // How far to trust the figures (trust.hpp), when an error model was given.
    std::optional<Band> band;
    // The run's electricity over the expected wall clock (energy.hpp); null when the plan was not
    // simulated or its hardware profile has no power section (then energy_note says which).
    std::optional<GpuTimeShares> gpu_time;
    std::optional<EnergyEstimate> energy;
    std::string energy_note;
};

// The rate of one GPU-hour as the plan pays (pricing.commitment) after its discount, before any
// rounding to billing units (0 without a price). A machine's price is shared by its
// `gpus_per_machine` GPUs (the plan's cluster.gpus_per_node: a 4-GPU machine's month is shared by
// 4 GPUs, not 8); a machine-month is 730 h.
[[nodiscard]] double price_per_gpu_hour(const model::Pricing& pricing, int gpus_per_machine);

// Evaluates one plan: memory first; simulates the step only if it fits (or, for validating
// against runs that were measured, when asked to simulate regardless).
// Recomputes e.run, e.expected_days, the bills and the billing options with these run parameters
// (e must have been simulated).
void apply_run_model(RunEstimate& e, const model::Plan& plan, const RunModelParams& params);

// Re-prices `e`, an estimate of a plan, for plan.pricing (set by the caller): the price fields as
// estimate_plan sets them, then apply_run_model with the plan's run settings (spot capacity's
// preemptions change the expected wall clock). Equal to a fresh estimate of the plan with this
// pricing, as the step does not depend on it (trainsim sweep shares a search across prices).
void reprice(RunEstimate& e, const model::Plan& plan);

// A fitted stack's discrepancy at the plan (model/core/stack_discrepancy.hpp); none without a
// fitted stack that carries one. estimate_plan divides the step time by exp(mean_log).
[[nodiscard]] std::optional<model::DiscrepancyAt> stack_discrepancy_at(const model::Plan& plan);

[[nodiscard]] RunEstimate estimate_plan(const model::Plan& plan, const ExecOptions& opt = {},
                                        bool simulate_even_if_too_big = false);
// The same with the step's op graph and a network already built (plan search: one topology and
// one collective cache shared by every plan of a cluster; the costs are those of a fresh network).
// Preconditions: graph = build_workload(plan); network built for plan.cluster (plan_network).
[[nodiscard]] RunEstimate estimate_plan(const model::Plan& plan, const model::OpGraph& graph,
                                        const AnalyticNetwork& network, const ExecOptions& opt = {},
                                        bool simulate_even_if_too_big = false);
// The same with a network already built: a long gradient accumulation is simulated from three
// short steps where they repeat (step/periodic.hpp), as estimate_plan(plan) does.
// `graph`: the step's own graph where the caller built it anyway, simulated if the short steps
// do not repeat (else it is built then).
[[nodiscard]] RunEstimate estimate_plan(const model::Plan& plan, const AnalyticNetwork& network,
                                        const model::OpGraph* graph, const ExecOptions& opt = {});
// The network estimate_plan builds for a plan's cluster.
[[nodiscard]] AnalyticNetwork plan_network(const model::Plan& plan);

} // namespace trainsim::sim
