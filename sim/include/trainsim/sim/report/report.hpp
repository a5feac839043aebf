// Report writers: human-readable tables and machine-readable JSON (field names are a contract
// with users' budgeting scripts: see README "JSON output").
#pragma once

#include "trainsim/model/core/scenario.hpp"
#include "trainsim/sim/report/lang.hpp"
#include "trainsim/sim/run/estimate.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace trainsim::sim {

struct PlanResult {
    const model::Plan* plan = nullptr;
    RunEstimate estimate;
};

[[nodiscard]] nlohmann::json plan_json(const model::Plan& plan, const RunEstimate& e);
// Why a plan does not fit: its memory per GPU (or its offloaded state's host memory per node)
// against what there is. plan_json's "reason" (English); the HTML report's note in `tr`'s language.
[[nodiscard]] std::string no_fit_reason(const model::Plan& plan, const RunEstimate& e,
                                        const Translator& tr = Translator());
// The step-time breakdown as it appears in plan_json's "breakdown" (seconds per category).
[[nodiscard]] nlohmann::json breakdown_json(const StepBreakdown& b);
// One plan: the plan object itself; several: {"plans": [...]}.
[[nodiscard]] nlohmann::json results_json(const std::vector<PlanResult>& results);

// Plan objects (plan_json, with anything added) as CSV: one header line, one row per plan; nested
// fields as dotted columns ("memory.weights_gib"), null as an empty cell. Columns are the union
// over the plans, the layout and README's contract figures first.
[[nodiscard]] std::string plans_csv(const nlohmann::json& plans);
// One CSV line of fixed `columns` (dotted paths into `row`, as plans_csv names them), or the header
// line itself when `row` is null: for outputs written row by row (trainsim sweep).
[[nodiscard]] std::string csv_line(const std::vector<std::string>& columns, const nlohmann::json& row);

// Detailed text for one plan (step breakdown, throughput, memory, days, money).
[[nodiscard]] std::string format_plan(const model::Plan& plan, const RunEstimate& e, const Translator& tr = Translator());
// Plans side by side, one column each; past `width` characters the plan columns wrap into blocks,
// each with the row labels (the CLI passes the terminal's width, $COLUMNS, else 120).
[[nodiscard]] std::string format_comparison(const std::vector<PlanResult>& results, std::size_t width = 120,
                                            const Translator& tr = Translator());

} // namespace trainsim::sim
