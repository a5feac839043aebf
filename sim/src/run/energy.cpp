// The electricity of a run; the formulas are in energy.hpp and docs/model.md "Energy".
#include "trainsim/sim/run/energy.hpp"

#include <algorithm>

namespace trainsim::sim {

GpuTimeShares time_shares(const StepBreakdown& b, double step_time_s, double optimizer_removed_s) {
    GpuTimeShares s;
    s.compute_s = b.compute().seconds();
    s.comm_s = std::max(0.0, b.optimizer.seconds() - optimizer_removed_s) +
               (b.tp_exposed + b.cp_exposed + b.dp_exposed + b.pp_exposed).seconds();
    s.idle_s = std::max(0.0, step_time_s - s.compute_s - s.comm_s);
    return s;
}

EnergyEstimate energy_of(const model::HardwareProfile& hw, const GpuTimeShares& t,
                         const model::EnergySettings& settings, const std::string& currency, int gpus, int nodes,
                         double wall_days, double tokens) {
    EnergyEstimate e;
    e.gpu_power_w = (t.compute_s * hw.power_compute_busy.value() + t.comm_s * hw.power_comm_busy.value() +
                     t.idle_s * hw.power_idle.value()) /
                    t.total();
    e.it_power_kw = (gpus * e.gpu_power_w + nodes * hw.power_node_overhead.value()) / 1e3;
    e.pue = settings.pue;
    e.facility_power_kw = e.it_power_kw * e.pue;
    e.hours = wall_days * 24.0;
    e.kwh = e.facility_power_kw * e.hours;
    e.kwh_per_million_tokens = e.kwh / (tokens / 1e6);
    e.currency = settings.currency.value_or(currency);
    if (settings.price_per_kwh) e.cost = e.kwh * *settings.price_per_kwh;
    if (settings.grid_g_co2_per_kwh) e.co2_kg = e.kwh * *settings.grid_g_co2_per_kwh / 1e3;
    return e;
}

} // namespace trainsim::sim
