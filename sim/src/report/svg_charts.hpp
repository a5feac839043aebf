// SVG primitives of the HTML report: escaping and number formats, the palette, legends,
// horizontal stacked bars and line charts. Inline SVG and CSS only, nothing fetched. Internal to
// sim/src/report.
#pragma once

#include "trainsim/sim/report/lang.hpp"

#include <nlohmann/json.hpp>

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trainsim::sim::svg {

// Width of every chart (px).
constexpr double kWidth = 960;

struct LegendItem {
    std::string label;
    std::string color;
    bool dashed = false;  // a line, not a swatch
    bool whisker = false; // an error bar |-| (the 80% band), not a swatch
};

struct BarRow {
    std::string label;
    std::vector<double> values;   // one per segment; empty: no bar, `note` instead
    std::optional<double> marker; // a vertical mark on the bar (HBM capacity, expected days)
    // An error bar over the bar: the 80% band (p10, p90) of its total (docs/trust.md).
    std::optional<std::pair<double, double>> range;
    std::string value_text;       // after the bar
    std::string note;
};

struct LineSeries {
    std::string label;
    std::string color;
    std::vector<std::pair<double, double>> points; // (gpus, y), ascending gpus
    std::vector<std::pair<double, double>> ideal;  // dashed
    std::set<int> own;                             // the scenario plans' own GPU counts (ringed)
};

[[nodiscard]] std::string esc(std::string_view s);
[[nodiscard]] std::string grouped(double v, int decimals);
[[nodiscard]] std::string axis_num(double v);
[[nodiscard]] std::string script_json(const nlohmann::json& j);
[[nodiscard]] std::string color(std::size_t i);
[[nodiscard]] double nice_step(double range, int target);
// A tick of a plot's axis: where it is drawn (px) and its label (escaped, or plain numbers).
struct Tick {
    double pos = 0;
    std::string label;
};
// A plot's frame for the area [left, left + width] x [top, bottom]: per y tick a grid line across
// and its label on the left, per x tick a grid line up and its label below, then the two axes.
[[nodiscard]] std::string plot_frame(double left, double top, double width, double bottom,
                                     const std::vector<Tick>& y_ticks, const std::vector<Tick>& x_ticks);
// Legend items in rows that wrap at the chart width; returns the height used.
double legend(std::string& s, const std::vector<LegendItem>& items, double y0);
// `band`: the legend item of the rows' error bars (BarRow::range), shown when a row has one.
// `tr`: the language of the bars' tooltips ("80% band: ... to ...").
[[nodiscard]] std::string stacked_bars(const std::string& id, const std::string& title, const std::vector<LegendItem>& segments,
                         const std::vector<BarRow>& rows, const std::string& unit,
                         const std::optional<LegendItem>& marker, const std::optional<LegendItem>& band = std::nullopt,
                         const Translator& tr = Translator());
[[nodiscard]] std::string line_chart(const std::string& id, const std::string& title, const std::string& y_title, bool log_y,
                       const std::vector<int>& x_ticks, const std::vector<LineSeries>& series,
                       const Translator& tr = Translator());

} // namespace trainsim::sim::svg
