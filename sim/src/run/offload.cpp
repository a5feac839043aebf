#include "trainsim/sim/run/offload.hpp"

#include "trainsim/model/accounting/memory_model.hpp"

#include <algorithm>

namespace trainsim::sim {

namespace {
// The parts of OffloadTime that do not depend on the simulated step.
OffloadTime serial_parts(const model::Plan& plan) {
    const auto& hw = plan.hardware;
    OffloadTime o;
    o.shard_params = model::peak_memory(plan).local_params / model::optimizer_shard_degree(plan);
    const double pcie = hw.pcie_bandwidth.value() * hw.pcie_efficiency; // B/s per GPU, per direction
    o.grad_to_host_s = 2.0 * o.shard_params / pcie;
    // The node's CPUs update every GPU's shard; memory-bound at 30 B per parameter.
    const double adam_rate = hw.host_memory_bandwidth.value() * hw.cpu_adam_efficiency / kCpuAdamBytesPerParam;
    o.cpu_adam_s = o.shard_params * plan.cluster.gpus_per_node / adam_rate;
    o.params_to_gpu_s = 2.0 * o.shard_params / pcie;
    return o;
}
} // namespace

double offload_serial_s(const model::Plan& plan) {
    const auto o = serial_parts(plan);
    return o.cpu_adam_s + o.params_to_gpu_s;
}

OffloadTime offload_time(const model::Plan& plan, const StepResult& step) {
    const auto& p = plan.parallel;
    const auto& hw = plan.hardware;
    OffloadTime o = serial_parts(plan);
    const double pcie = hw.pcie_bandwidth.value() * hw.pcie_efficiency; // B/s per GPU, per direction
    const auto& b = step.breakdown;
    // Gradients out, as they are reduced during backward.
    o.grad_exposed_s = std::max(0.0, o.grad_to_host_s - b.backward.seconds());
    o.pcie_bytes = 4.0 * o.shard_params;
    if (p.offload == model::Offload::params) {
        // Every gather of a layer first brings this GPU's shard of it from the host: forward,
        // backward, and the recompute's forward under full recompute.
        const double passes = 2.0 + (p.recompute == model::Recompute::full ? 1.0 : 0.0);
        o.param_fetch_s = 2.0 * o.shard_params * passes / pcie;
        o.param_fetch_exposed_s = std::max(0.0, o.param_fetch_s - (b.forward + b.backward + b.recompute).seconds());
        o.pcie_bytes += 2.0 * o.shard_params * passes;
    }
    o.gpu_optimizer_s = b.optimizer.seconds();
    o.added_s = o.grad_exposed_s + o.cpu_adam_s + o.params_to_gpu_s + o.param_fetch_exposed_s - o.gpu_optimizer_s;
    o.host_bytes_per_node = model::host_offload_bytes_per_node(plan).value();
    o.host_capacity = model::host_memory_per_node(plan).value();
    o.host_fits = o.host_bytes_per_node <= o.host_capacity;
    return o;
}

} // namespace trainsim::sim
