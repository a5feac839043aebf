#include "trainsim/sim/run/estimate.hpp"

#include "trainsim/model/accounting/finetune.hpp"
#include "trainsim/model/accounting/flops.hpp"
#include "trainsim/model/workload/workload.hpp"
#include "trainsim/sim/cost/compute_cost.hpp"
#include "trainsim/sim/network/network.hpp"
#include "trainsim/sim/network/topology.hpp"
#include "trainsim/sim/step/periodic.hpp"

#include <fmt/format.h>

#include <optional>

namespace trainsim::sim {

double price_per_gpu_hour(const model::Pricing& pricing, int gpus_per_machine) {
    const bool spot = pricing.commitment == model::Commitment::spot;
    double rate = (spot ? pricing.spot.rate : pricing.rate).value_or(0.0);
    if (pricing.basis == model::PriceBasis::machine_month) rate /= (gpus_per_machine * kHoursPerMonth);
    if (pricing.basis == model::PriceBasis::machine_hour) rate /= gpus_per_machine;
    if (!spot)
        if (auto it = pricing.discounts.find(pricing.commitment); it != pricing.discounts.end())
            rate *= 1.0 - it->second;
    return rate;
}

void apply_run_model(RunEstimate& e, const model::Plan& plan, const RunModelParams& params) {
    e.run = run_time(plan, e.days_to_train, params);
    e.expected_days = e.run.expected_days;
    e.energy.reset();
    if (e.gpu_time && plan.hardware.has_power())
        e.energy = energy_of(plan.hardware, *e.gpu_time, plan.energy, plan.pricing.currency, plan.num_gpus(),
                             plan.cluster.nodes, e.expected_days, plan.training.tokens);
    e.billing_options.clear();
    e.cheapest_option = 0;
    if (!e.priced) return;
    e.bill = e.bill_for_days(e.days_to_train);
    e.expected_bill = e.bill_for_days(e.expected_days);
    e.cost = e.bill.cost;
    e.expected_cost = e.expected_bill.cost;
    e.cost_per_million_tokens = e.cost / (plan.training.tokens / 1e6);
    for (const auto how : billing_options(plan.pricing)) {
        // Each way of paying on its own wall clock: spot capacity is preempted, the rest is not.
        const double days = how == plan.pricing.commitment ? e.expected_days
                                                           : run_time(plan, e.days_to_train, params, how).expected_days;
        e.billing_options.push_back({bill(plan.pricing, how, days * 24.0, e.nodes, e.gpus_per_node), days});
        if (e.billing_options.back().bill.cost < e.billing_options[e.cheapest_option].bill.cost)
            e.cheapest_option = e.billing_options.size() - 1;
    }
}

void reprice(RunEstimate& e, const model::Plan& plan) {
    e.currency = plan.pricing.currency;
    e.priced = has_price(plan.pricing);
    e.pricing = plan.pricing;
    e.price_per_gpu_hour = price_per_gpu_hour(plan.pricing, plan.cluster.gpus_per_node);
    e.bill = {};
    e.expected_bill = {};
    e.cost = e.expected_cost = e.cost_per_million_tokens = 0;
    if (e.step) apply_run_model(e, plan, plan.run);
}

AnalyticNetwork plan_network(const model::Plan& plan) {
    TopologyOptions fabric;
    fabric.oversubscription = plan.cluster.oversubscription;
    fabric.nodes_per_leaf = plan.cluster.nodes_per_leaf;
    return AnalyticNetwork(plan.hardware, plan.cluster, fabric);
}

std::optional<model::DiscrepancyAt> stack_discrepancy_at(const model::Plan& plan) {
    if (!plan.stack || !plan.stack->fitted || !plan.stack->discrepancy.present) return std::nullopt;
    return model::discrepancy_at(*plan.stack, model::layout_point(plan));
}

namespace {

// `graph`, `network`: built for the plan, or null to build them (only for a plan simulated).
// `periodic`: try three short steps first (step/periodic.hpp); `graph` is then only the fallback.
RunEstimate estimate(const model::Plan& plan, const model::OpGraph* graph, const AnalyticNetwork* network,
                     const ExecOptions& opt, bool simulate_even_if_too_big, bool periodic) {
    RunEstimate e;
    e.name = plan.name;
    e.currency = plan.pricing.currency;
    e.priced = has_price(plan.pricing);
    e.pricing = plan.pricing;
    e.nodes = plan.cluster.nodes;
    e.gpus_per_node = plan.cluster.gpus_per_node;
    e.memory = model::peak_memory(plan);
    e.capacity = plan.hardware.hbm_capacity;
    e.host_needed = model::host_offload_bytes_per_node(plan);
    e.host_capacity = model::host_memory_per_node(plan);
    e.fits = model::fits_in_memory(plan, e.memory);
    e.memory_tight = e.fits && e.memory.total() > e.capacity * (1.0 - kMemoryHeadroomFraction);
    // The method's own model FLOPs (pretrain and full: 6N + attention; LoRA / QLoRA: no weight
    // gradients of the frozen weights; docs/model.md "Fine-tuning").
    e.model_flops_per_token_causal = model::training_flops_per_token(plan.model, plan.training, true);
    e.model_flops_per_token_noncausal = model::training_flops_per_token(plan.model, plan.training, false);
    e.peak_tflops = plan.hardware.dense_peak.at(plan.precision).value() / 1e12;
    e.price_per_gpu_hour = price_per_gpu_hour(plan.pricing, plan.cluster.gpus_per_node);
    e.tokens_per_step = static_cast<double>(plan.training.global_batch) * plan.training.seq_len;
    if (!e.fits && !simulate_even_if_too_big) return e;

    std::optional<AnalyticNetwork> own_network;
    if (network == nullptr) network = &own_network.emplace(plan_network(plan));
    const ComputeCost compute(plan.hardware);
    // A long gradient accumulation from three short steps where they repeat (step/periodic.hpp).
    if (periodic) e.step = execute_step_periodic(plan, compute, *network, opt);
    if (!e.step) {
        std::optional<model::OpGraph> own_graph;
        if (graph == nullptr) graph = &own_graph.emplace(model::build_workload(plan));
        e.step = execute_step(plan, *graph, compute, *network, opt);
    }

    const double gpus = plan.num_gpus();
    e.step_time_s = e.step->step_time.seconds();
    if (plan.parallel.offload != model::Offload::none) {
        e.offload = offload_time(plan, *e.step);
        e.step_time_s += e.offload->added_s;
    }
    // A fitted stack carries what its runs measured and the factors did not explain near them:
    // the whole step they timed, offload included.
    if (const auto d = stack_discrepancy_at(plan)) {
        e.stack_discrepancy = std::exp(d->mean_log);
        e.stack_discrepancy_sd_log = std::sqrt(d->var_log);
        e.step_time_s /= e.stack_discrepancy;
    }
    e.tokens_per_s = e.tokens_per_step / e.step_time_s;
    e.tokens_per_s_per_gpu = e.tokens_per_s / gpus;
    const double bf16_peak = plan.hardware.dense_peak.at(model::Precision::bf16).value();
    e.model_tflops_per_gpu = e.tokens_per_s_per_gpu * e.model_flops_per_token_causal / 1e12;
    e.mfu = e.model_tflops_per_gpu / e.peak_tflops;
    e.mfu_noncausal = e.tokens_per_s_per_gpu * e.model_flops_per_token_noncausal / (e.peak_tflops * 1e12);
    e.mfu_vs_bf16_peak = e.model_tflops_per_gpu * 1e12 / bf16_peak;
    e.steps = plan.training.tokens / e.tokens_per_step;
    const double seconds = plan.training.tokens / e.tokens_per_s;
    e.days_to_train = seconds / 86400.0;
    e.gpu_hours = seconds / 3600.0 * gpus;
    e.gpu_time = time_shares(e.step->breakdown, e.step_time_s, e.offload ? e.offload->gpu_optimizer_s : 0.0);
    if (!plan.hardware.has_power())
        e.energy_note = fmt::format("profile {} has no power section (docs/formats.md section 3)", plan.hardware.id);
    apply_run_model(e, plan, plan.run);
    return e;
}

} // namespace

RunEstimate estimate_plan(const model::Plan& plan, const ExecOptions& opt, bool simulate_even_if_too_big) {
    return estimate(plan, nullptr, nullptr, opt, simulate_even_if_too_big, true);
}

RunEstimate estimate_plan(const model::Plan& plan, const AnalyticNetwork& network, const model::OpGraph* graph,
                          const ExecOptions& opt) {
    return estimate(plan, graph, &network, opt, false, true);
}

RunEstimate estimate_plan(const model::Plan& plan, const model::OpGraph& graph, const AnalyticNetwork& network,
                          const ExecOptions& opt, bool simulate_even_if_too_big) {
    return estimate(plan, &graph, &network, opt, simulate_even_if_too_big, false);
}

} // namespace trainsim::sim
