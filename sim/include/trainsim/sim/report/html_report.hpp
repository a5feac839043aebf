// The self-contained HTML report of a scenario (`trainsim report FILE --html out.html`,
// docs/report.md): plans side by side, step-time breakdown, memory per GPU against HBM capacity,
// days and cost, and data-parallel scaling. Inline CSS and SVG only: no script, no external URL.
#pragma once

#include "trainsim/sim/report/report.hpp"
#include "trainsim/sim/search/scaling.hpp"

#include <string>
#include <vector>

namespace trainsim::sim {

// The whole page. It embeds results_json(results) — what `trainsim compare FILE --json` prints —
// in <script type="application/json" id="trainsim-data">, and the scaling points in
// <script type="application/json" id="trainsim-scaling">, so that the figures can be checked.
// Plan columns and table cells carry data-plan (index into results) and data-key (the JSON field,
// dotted for nested ones, e.g. "memory.capacity_gib").
[[nodiscard]] std::string html_report(const std::string& title, const std::string& scenario_file,
                                      const std::vector<PlanResult>& results,
                                      const std::vector<ScalingSeries>& scaling,
                                      const Translator& tr = Translator());

} // namespace trainsim::sim
