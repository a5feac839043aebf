// The stack profile's model discrepancy (stack_profile.hpp StackDiscrepancy): fitted on the runs'
// residuals after the factors, evaluated for any plan. docs/calibration.md "The discrepancy".
#pragma once

#include "trainsim/model/core/scenario.hpp"
#include "trainsim/model/core/stack_profile.hpp"

#include <array>
#include <string>
#include <vector>

namespace trainsim::model {

// Where a plan sits for the discrepancy: its shape (what one GPU computes apart from the layout)
// and its layout features.
struct LayoutPoint {
    std::string shape;
    std::array<double, 5> features{};  // log2 of tp, pp, cp, dp, micro-batch
};
[[nodiscard]] LayoutPoint layout_point(const Plan& plan);
[[nodiscard]] LayoutPoint layout_point(const StackFitRun& run);

// The runs' log residuals log(measured / fitted); a run without both reads 0.
[[nodiscard]] double run_residual_log(const StackFitRun& run);

// Fewer runs than this fit no discrepancy (its three hyperparameter groups need more residuals);
// more than this neither (the O(n^3) solve per hyperparameter trial; a user with that many runs has
// the layouts they want to predict among them).
inline constexpr std::size_t kDiscrepancyMinRuns = 6;
inline constexpr std::size_t kDiscrepancyMaxRuns = 600;

// The hyperparameters that maximise the residuals' marginal likelihood (Rasmussen and Williams
// 2006, eq. 5.8), by coordinate search over fixed grids; `present` false with fewer runs than
// kDiscrepancyMinRuns or more than kDiscrepancyMaxRuns, or when independent noise alone explains
// the residuals as well (no structure to carry). Fills alpha / k_inv and loo_sd_log.
[[nodiscard]] StackDiscrepancy fit_discrepancy(const std::vector<StackFitRun>& runs);

// Recomputes alpha and k_inv from the runs and the hyperparameters (after reading a profile).
void prepare_discrepancy(StackDiscrepancy& d, const std::vector<StackFitRun>& runs);

struct DiscrepancyAt {
    double mean_log = 0;  // log(true / simulated throughput) expected at the plan
    double var_log = 0;   // its predictive variance, the new run's own noise included
    double max_corr = 0;  // the largest kernel correlation with a run (0: no run of its shape)
};
// At a plan: without a discrepancy, mean 0 and the variance of the fit's leave-one-out scatter.
[[nodiscard]] DiscrepancyAt discrepancy_at(const StackProfile& stack, const LayoutPoint& at);

} // namespace trainsim::model
