#include "trainsim/sim/stack/stack_report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace trainsim::sim {

void apply_stack_to_rows(std::vector<model::ValidationRow>& rows, const std::shared_ptr<const model::StackProfile>& stack) {
    for (auto& row : rows) {
        if (!row.skip_reason.empty()) continue;
        row.plan.hardware = model::apply_stack(row.plan.hardware, *stack);
        row.plan.stack = stack;
        row.plan.parallel.stack = stack->source_file;
    }
}

Band band_with_stack(const model::Plan& plan, const model::StackProfile& stack, const std::optional<Band>& uncalibrated) {
    if (!stack.fitted) return uncalibrated.value_or(Band{});
    // What the runs left unconstrained is no better known than without a fit, and no worse: its
    // part of the band is at most the uncalibrated band's own spread (the published runs' errors
    // in this plan's regime, docs/trust.md), which the priors' widths would otherwise exceed.
    double cap = std::numeric_limits<double>::infinity();
    if (uncalibrated && uncalibrated->time_p90 > uncalibrated->time_p10) {
        const double unc_sd = std::log(uncalibrated->time_p90 / uncalibrated->time_p10) / (2 * kZ80);
        cap = unc_sd * unc_sd;
    }
    const StackBand sb = stack_band(plan, stack, cap);
    Band b;
    b.time_p10 = sb.time_p10;
    b.time_p50 = 1.0;
    b.time_p90 = sb.time_p90;
    b.rows = static_cast<int>(stack.runs.size());
    b.regime = "stack:" + stack.name;
    b.basis = fmt::format("stack profile '{}': the fit's uncertainty over its {} runs propagated through this plan "
                          "(sd {:.1f}% in log time, leave-one-run-out scatter {:.1f}%)",
                          stack.name, stack.runs.size(), 100 * sb.sd_log, 100 * stack.loo_sd_log);
    if (!sb.beyond.empty()) {
        b.out_of_domain = sb.beyond;
        if (uncalibrated) {
            // Beyond the runs the fit says less than it seems: the band also spans the uncalibrated one.
            b.time_p10 = std::min(b.time_p10, uncalibrated->time_p10);
            b.time_p90 = std::max(b.time_p90, uncalibrated->time_p90);
            b.basis += fmt::format("; beyond the runs ({}), widened to span the uncalibrated band ({})",
                                   fmt::join(sb.beyond, "; "), uncalibrated->basis);
        } else {
            b.basis += fmt::format("; beyond the runs: {}", fmt::join(sb.beyond, "; "));
        }
    }
    return b;
}

RowHook stack_band_hook(std::shared_ptr<const model::StackProfile> stack, const ErrorModel* bands) {
    return [stack = std::move(stack), bands](const model::Plan& plan, const RunEstimate& e, RowResult& r) {
        if (!stack->fitted || r.predicted <= 0) return;
        std::optional<Band> unc;
        if (bands != nullptr) unc = band_for(*bands, plan, e.step ? &*e.step : nullptr);
        const Band b = band_with_stack(plan, *stack, unc);
        r.has_band = true;
        r.predicted_p10 = r.predicted / b.time_p90;
        r.predicted_p90 = r.predicted / b.time_p10;
        r.out_of_domain = b.out_of_domain;
    };
}

nlohmann::json stack_fit_json(const model::StackProfile& s) {
    nlohmann::json params = nlohmann::json::object();
    for (const auto& spec : model::stack_param_specs()) {
        const auto i = static_cast<std::size_t>(spec.param);
        params[std::string(spec.name)] = {{"value", s.factors[i]},
                                          {"prior", 1.0},
                                          {"sd_log", s.sd_log(spec.param)},
                                          {"prior_sd_log", spec.prior_sd_log},
                                          {"bounds", {spec.lo, spec.hi}},
                                          {"free", s.free[i]},
                                          {"constrained", s.constrained[i]},
                                          {"at_bound", s.at_bound[i]},
                                          {"scales", spec.scales}};
    }
    nlohmann::json runs = nlohmann::json::array();
    for (const auto& r : s.runs)
        runs.push_back({{"id", r.id},
                        {"gpus", r.gpus},
                        {"nodes", r.nodes},
                        {"measured_tokens_per_s_per_gpu", r.measured},
                        {"prior_tokens_per_s_per_gpu", r.prior},
                        {"fitted_tokens_per_s_per_gpu", r.fitted},
                        {"fitted_error_pct", (r.fitted - r.measured) / r.measured * 100.0},
                        {"loo_error_pct", r.loo_error_pct}});
    const auto& e = s.evidence;
    return {{"name", s.name},
            {"file", s.source_file},
            {"fitted_on", s.fitted_on},
            {"parameters", params},
            {"residual_sd_log", s.residual_sd_log},
            {"loo_sd_log", s.loo_sd_log},
            {"evidence",
             {{"min_gpus", e.min_gpus},
              {"max_gpus", e.max_gpus},
              {"max_nodes", e.max_nodes},
              {"max_tp", e.max_tp},
              {"max_pp", e.max_pp},
              {"max_cp", e.max_cp},
              {"gpus", e.gpus},
              {"frameworks", e.frameworks}}},
            {"runs", runs},
            {"discrepancy", s.discrepancy.present
                                ? nlohmann::json{{"signal_sd_log", std::sqrt(s.discrepancy.signal_var)},
                                                 {"noise_sd_log", std::sqrt(s.discrepancy.noise_var)},
                                                 {"length_log2", {{"tp", s.discrepancy.length[0]},
                                                                  {"pp", s.discrepancy.length[1]},
                                                                  {"cp", s.discrepancy.length[2]},
                                                                  {"dp", s.discrepancy.length[3]},
                                                                  {"micro_batch", s.discrepancy.length[4]}}},
                                                 {"loo_sd_log", s.discrepancy.loo_sd_log}}
                                : nlohmann::json(nullptr)},
            {"notes", s.notes}};
}

std::string stack_fit_text(const StackFitResult& fit) {
    const auto& s = fit.stack;
    std::vector<double> prior_err, fitted_err, loo_err;
    for (const auto& r : s.runs) {
        prior_err.push_back(std::abs(r.prior - r.measured) / r.measured * 100);
        fitted_err.push_back(std::abs(r.fitted - r.measured) / r.measured * 100);
        loo_err.push_back(std::abs(r.loo_error_pct));
    }
    auto mean = [](const std::vector<double>& v) {
        double t = 0;
        for (double x : v) t += x;
        return v.empty() ? 0.0 : t / static_cast<double>(v.size());
    };
    std::string o = fmt::format("stack profile '{}' fitted on {} runs ({} to {} GPUs, {} node(s) at most; {} "
                                "simulations, {} iterations)\n",
                                s.name, s.runs.size(), s.evidence.min_gpus, s.evidence.max_gpus, s.evidence.max_nodes,
                                fit.simulations, fit.iterations);
    o += fmt::format("  runs' error (MAPE): stock profiles {:.1f}% -> fitted {:.1f}% (leave-one-run-out {:.1f}%)\n",
                     mean(prior_err), mean(fitted_err), mean(loo_err));
    o += fmt::format("  {:<22} {:>8} {:>9} {:>14}  {}\n", "parameter", "factor", "sd (log)", "", "scales");
    for (const auto& spec : model::stack_param_specs()) {
        const auto i = static_cast<std::size_t>(spec.param);
        const char* state = s.at_bound[i] ? "AT BOUND" : s.constrained[i] ? "constrained" : s.free[i] ? "weak" : "prior";
        o += fmt::format("  {:<22} {:>8.3f} {:>9.3f} {:>14}  {}\n", spec.name, s.factors[i], s.sd_log(spec.param), state,
                         spec.scales);
    }
    for (const auto& n : s.notes) o += "  note: " + n + "\n";
    for (const auto& u : fit.unused) o += "  not used: " + u + "\n";
    return o;
}

} // namespace trainsim::sim
