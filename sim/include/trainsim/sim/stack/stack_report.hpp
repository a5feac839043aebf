// A stack profile in a validation run and in reports: rows run with the stack, their bands from
// the fit (stack_fit.hpp), and the fit's summary as text and JSON.
#pragma once

#include "trainsim/sim/stack/stack_fit.hpp"
#include "trainsim/sim/validate/validate.hpp"

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace trainsim::sim {

// Every simulable row's hardware as the stack runs it (the row's framework behaviours still apply).
void apply_stack_to_rows(std::vector<model::ValidationRow>& rows, const std::shared_ptr<const model::StackProfile>& stack);

// The band a prediction made with `stack` gets: for a fitted stack, stack_band's; a plan beyond the
// fit's runs also spans `uncalibrated` (the error-band table's band for it, when there is one) and
// says why in out_of_domain. A stack written by hand keeps `uncalibrated` as it is.
[[nodiscard]] Band band_with_stack(const model::Plan& plan, const model::StackProfile& stack,
                                   const std::optional<Band>& uncalibrated);

// validate_rows' hook that gives each compared row its band_with_stack.
[[nodiscard]] RowHook stack_band_hook(std::shared_ptr<const model::StackProfile> stack, const ErrorModel* bands);

[[nodiscard]] nlohmann::json stack_fit_json(const model::StackProfile& stack);
[[nodiscard]] std::string stack_fit_text(const StackFitResult& fit);

} // namespace trainsim::sim
