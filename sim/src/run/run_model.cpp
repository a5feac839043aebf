#include "trainsim/sim/run/run_model.hpp"

#include "trainsim/model/accounting/flops.hpp"

#include <cmath>

namespace trainsim::sim {

RunTime run_time(double steady_days, double params, int gpus, int nodes, const RunModelParams& p,
                 const model::SpotOffer* spot) {
    RunTime r;
    r.checkpoint_bytes = params * kCheckpointBytesPerParam;
    r.checkpoint_write_s = r.checkpoint_bytes / (p.checkpoint_bandwidth_per_node.value() * nodes);
    const double failures_per_s = gpus / (p.gpu_mtbf_hours * 3600.0) + nodes / (p.node_mtbf_hours * 3600.0);
    const double planned_per_s = p.planned_per_day / 86400.0;
    const double preemptions_per_s = spot != nullptr ? nodes * spot->preemptions_per_node_hour / 3600.0 : 0.0;
    r.cluster_mtbf_s = 1.0 / failures_per_s;
    r.preemption_interval_s = preemptions_per_s > 0 ? 1.0 / preemptions_per_s : 0.0;
    r.planned_interval_s = planned_per_s > 0 ? 1.0 / planned_per_s : 0.0;
    // A job of one GPU waits for no other rank: no stragglers.
    r.stragglers = gpus > 1 ? p.straggler_fraction : 0.0;
    r.stretch = 1.0 + p.slowdown + r.stragglers + p.eval_fraction + p.data_stall_fraction;
    const double m = 1.0 / (failures_per_s + preemptions_per_s);
    r.interruption_interval_s = m;
    r.checkpoint_interval_s =
        p.checkpoint_interval_s ? *p.checkpoint_interval_s : std::sqrt(2.0 * r.checkpoint_write_s * m);
    r.restart_s = p.restart_s;
    r.preemption_wait_s = spot != nullptr ? spot->restart_wait_s : 0.0;
    const double delta = r.checkpoint_write_s, tau = r.checkpoint_interval_s;
    r.overhead_factor = r.stretch * (1.0 + delta / tau + tau / (2.0 * m) + r.restart_s * (1.0 / m + planned_per_s) +
                                     r.preemption_wait_s * preemptions_per_s);
    r.expected_days = steady_days * r.overhead_factor;
    r.expected_failures = r.expected_days * 86400.0 * failures_per_s;
    r.expected_preemptions = r.expected_days * 86400.0 * preemptions_per_s;
    r.expected_planned = r.expected_days * 86400.0 * planned_per_s;
    r.first_order_valid = tau < m && r.restart_s + r.preemption_wait_s < m;
    return r;
}

RunTime run_time(const model::Plan& plan, double steady_days, const RunModelParams& p, model::Commitment how) {
    return run_time(steady_days, model::count_params(plan.model).total, plan.num_gpus(), plan.cluster.nodes, p,
                    how == model::Commitment::spot ? &plan.pricing.spot : nullptr);
}

RunTime run_time(const model::Plan& plan, double steady_days, const RunModelParams& p) {
    return run_time(plan, steady_days, p, plan.pricing.commitment);
}

} // namespace trainsim::sim
