// The market table of a sweep (`trainsim sweep GRID.yaml --html page.html`, docs/plan-search.md
// "Sweeps"): one table row per sweep row, and per model a days-against-cost chart of its rows with
// each cell's Pareto front joined. Inline CSS and SVG only, in the report's style: nothing fetched,
// no script.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace trainsim::sim {

struct SweepPage {
    std::string title;         // the grid's title (empty: the grid file is the heading)
    std::string grid_file;
    bool expected_days = true; // the basis of the rows' `pareto` flags (the grid's constraints.days)
    std::size_t cells = 0, counts = 0;
};

// The whole page, from the rows as `sweep --out rows.jsonl` writes them (or as read back from the
// CSV: numbers, the `pareto` flag, text). Table rows carry data-row (the row's index in `rows`),
// data-cell and data-pareto; each model's chart is a <section class="frontier" data-model=...>,
// its points <circle class="pt" data-row=...> ("pt front" for a row flagged pareto) and each
// cell's front a <polyline class="front" data-cell=...>. The rows are embedded as JSON in
// <script type="application/json" id="trainsim-sweep">.
[[nodiscard]] std::string sweep_html(const SweepPage& page, const std::vector<nlohmann::json>& rows);

// "tp8 pp2 dp4 mbs1 dist_opt rc:none": a row's layout (plan_json's layout fields).
[[nodiscard]] std::string sweep_layout_words(const nlohmann::json& row);

} // namespace trainsim::sim
