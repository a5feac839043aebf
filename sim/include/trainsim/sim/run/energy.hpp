// The electricity of a run (docs/model.md "Energy"): what the GPUs draw at their simulated busy
// and idle shares, what each node's host side draws, the facility overhead (PUE), over the
// expected wall clock of the run.
//
// Per GPU and step, from the critical rank's breakdown (executor.hpp StepBreakdown; it sums to
// the GPU's step time):
//   compute-busy  t_c = forward + backward + recompute          (every kernel of the passes, the
//                                                                  memory-bound ones too; communication
//                                                                  hidden behind them included)
//   comm-busy     t_m = optimizer + exposed TP, CP, DP and PP    (the optimizer's kernels and collectives
//                                                                  with no compute beside them)
//   idle          t_i = step time - t_c - t_m                    (pipeline bubble, host-bound, and the
//                                                                  CPU offload's added time: the GPU waits)
//   P_gpu = (t_c P_compute + t_m P_comm + t_i P_idle) / step time                        [W]
//   P_facility = (GPUs x P_gpu + nodes x P_node) x PUE                                   [W]
//   E = P_facility x expected wall-clock hours / 1000                                   [kWh]
//   cost = E x price per kWh;   CO2 = E x grid intensity / 1000                         [kg]
// The expected wall clock (run_model.hpp) rather than the steady one: through checkpoints,
// failures and restarts the machines stay allocated and powered, and the steps they redo draw
// power like the first time (restarts and checkpoint writes charged at the step's average power:
// an upper bound of that part). The critical rank's breakdown stands for every GPU: an
// approximation of the stages' mean with no guaranteed direction.
#pragma once

#include "trainsim/model/core/hardware_profile.hpp"
#include "trainsim/model/core/scenario.hpp"
#include "trainsim/sim/step/executor.hpp"

#include <optional>
#include <string>

namespace trainsim::sim {

// Seconds per step one GPU spends in each power state. Their sum is the step time.
struct GpuTimeShares {
    double compute_s = 0;
    double comm_s = 0;
    double idle_s = 0;
    [[nodiscard]] double total() const { return compute_s + comm_s + idle_s; }
};

// The shares of a simulated step whose time (with CPU offload) is `step_time_s`; the GPU
// optimizer time offload removed (`optimizer_removed_s`, 0 without offload) is not comm-busy.
// Precondition: step_time_s >= breakdown.total() - optimizer_removed_s.
[[nodiscard]] GpuTimeShares time_shares(const StepBreakdown& breakdown, double step_time_s,
                                        double optimizer_removed_s = 0);

struct EnergyEstimate {
    double gpu_power_w = 0;       // average board power of one GPU
    double it_power_kw = 0;       // GPUs and nodes, before PUE
    double facility_power_kw = 0; // x PUE
    double pue = 1;
    double hours = 0; // the expected wall clock
    double kwh = 0;
    double kwh_per_million_tokens = 0;
    std::optional<double> cost; // null without energy.price
    std::string currency;
    std::optional<double> co2_kg; // null without energy.grid_intensity
};

// Precondition: power.has_power(), shares.total() > 0, gpus >= 1, nodes >= 1, wall_days >= 0,
// tokens > 0.
[[nodiscard]] EnergyEstimate energy_of(const model::HardwareProfile& power, const GpuTimeShares& shares,
                                       const model::EnergySettings& settings, const std::string& currency, int gpus,
                                       int nodes, double wall_days, double tokens);

} // namespace trainsim::sim
