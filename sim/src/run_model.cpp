#include "trainsim/sim/run_model.hpp"

#include "trainsim/model/flops.hpp"

#include <cmath>

namespace trainsim::sim {

RunTime run_time(double steady_days, double params, int gpus, int nodes, const RunModelParams& p) {
    RunTime r;
    r.checkpoint_bytes = params * kCheckpointBytesPerParam;
    r.checkpoint_write_s = r.checkpoint_bytes / (p.checkpoint_bandwidth_per_node.value() * nodes);
    r.cluster_mtbf_s = p.gpu_mtbf_hours * 3600.0 / gpus;
    r.checkpoint_interval_s = p.checkpoint_interval_s ? *p.checkpoint_interval_s
                                                      : std::sqrt(2.0 * r.checkpoint_write_s * r.cluster_mtbf_s);
    r.restart_s = p.restart_s;
    const double delta = r.checkpoint_write_s, tau = r.checkpoint_interval_s, m = r.cluster_mtbf_s;
    r.overhead_factor = 1.0 + delta / tau + tau / (2.0 * m) + r.restart_s / m;
    r.expected_days = steady_days * r.overhead_factor;
    r.expected_failures = r.expected_days * 86400.0 / m;
    r.first_order_valid = tau < m && r.restart_s < m;
    return r;
}

RunTime run_time(const model::Plan& plan, double steady_days, const RunModelParams& p) {
    return run_time(steady_days, model::count_params(plan.model).total, plan.num_gpus(), plan.cluster.nodes, p);
}

} // namespace trainsim::sim
