// Fitting a stack profile on the user's own runs (`trainsim fit-stack`, `validate --fit-on`), and
// the band of a prediction made with a fitted stack (docs/calibration.md "Calibrating on your own
// runs"; the method in docs/trust.md "Bands after a fit").
//
// The fit: maximum a posteriori in log time. Each run i gives r_i(u) = log predicted - log measured
// tokens/s/GPU, with u the log factors of the stack parameters (model::StackParam). The objective
//   sum_i r_i(u)^2 / sigma^2 + sum_j (u_j / tau_j)^2,   u_j in [log lo_j, log hi_j]
// (tau_j: the parameter's prior width; sigma: the runs' scatter, 0.05 in log time until the fit's
// own residuals say otherwise) is minimised by projected Levenberg-Marquardt with Jacobians by
// finite differences of the simulator itself (Eigen). A parameter the runs do not exercise keeps
// its prior; at most one parameter per run is freed, the most informative first.
#pragma once

#include "trainsim/model/core/stack_discrepancy.hpp"

#include "trainsim/model/core/stack_profile.hpp"
#include "trainsim/model/input/validation_set.hpp"

#include <limits>
#include <string>
#include <vector>

namespace trainsim::sim {

struct StackFitOptions {
    std::string name = "fitted-stack";
    std::string fitted_with; // command line, for the profile's provenance
    std::string fitted_on;   // the runs file(s)
    unsigned threads = 1;
    double sigma_log = 0.05; // assumed scatter of one run in log time before the fit sees its residuals
    int max_iterations = 10;
};

struct StackFitResult {
    model::StackProfile stack;
    // Rows of the runs file not used, with why (skipped rows, end_to_end rows).
    std::vector<std::string> unused;
    int iterations = 0;
    int simulations = 0;
};

// Throws std::invalid_argument when no row can be used (the message says why for each).
[[nodiscard]] StackFitResult fit_stack(const std::vector<model::ValidationRow>& runs, const StackFitOptions& opt);

// The 80% band of a plan's predicted step time under a fitted stack: the fit's posterior
// uncertainty propagated through the plan's own sensitivity to each parameter (a parameter the runs
// did not constrain keeps its prior width, so a plan that leans on it gets a wide band) plus the
// fit's leave-one-run-out scatter. `plan` already runs with the stack applied.
// The normal 90th percentile: an 80% band's ends lie this many standard deviations either side.
inline constexpr double kZ80 = 1.2815515655446004;

struct StackBand {
    double time_p10 = 1, time_p90 = 1; // factors on the predicted step time
    double sd_log = 0;
    // The variance (log time) from the fitted parameters' posterior, from the parameters the runs
    // left at their priors (capped), and from the runs' leave-one-out scatter.
    double fit_var = 0, prior_var = 0, scatter_var = 0;
    // The discrepancy at the plan (its variance is scatter_var; mean 0 and the leave-one-out
    // scatter without one).
    model::DiscrepancyAt discrepancy;
    // How the plan's layout or machine lies beyond the runs (deeper pipeline or TP, context
    // parallelism, another GPU or framework): the caller widens to the uncalibrated band for these.
    std::vector<std::string> beyond;
};
// `prior_var_cap` bounds the part of the parameters the runs left at their priors (band_with_stack
// passes the uncalibrated band's own spread).
[[nodiscard]] StackBand stack_band(const model::Plan& plan, const model::StackProfile& stack,
                                   double prior_var_cap = std::numeric_limits<double>::infinity());

// What a plan has that the fit's runs did not (empty: inside the evidence).
[[nodiscard]] std::vector<std::string> beyond_evidence(const model::Plan& plan, const model::StackEvidence& e);

} // namespace trainsim::sim
