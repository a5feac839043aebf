// The market table of a sweep (trainsim/sim/report/sweep_html.hpp).
#include "trainsim/sim/report/sweep_html.hpp"

#include "trainsim/model/core/text_format.hpp"

#include "page_style.hpp"
#include "svg_charts.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string_view>

namespace trainsim::sim {

using nlohmann::json;
using namespace svg;

namespace {

std::optional<double> num(const json& r, const char* k) {
    if (!r.is_object() || !r.contains(k) || !r[k].is_number()) return std::nullopt;
    return r[k].get<double>();
}
std::string str(const json& r, const char* k) {
    return r.is_object() && r.contains(k) && r[k].is_string() ? r[k].get<std::string>() : std::string();
}
bool pareto(const json& r) {
    return r.is_object() && r.contains("pareto") && r["pareto"].is_boolean() && r["pareto"].get<bool>();
}
bool ok(const json& r) {
    return str(r, "status") == "ok";
}

constexpr std::string_view kDash = "\u2014";

// The days and the cost the rows' pareto flags compare (the grid's basis).
std::optional<double> days_of(const json& r, bool expected) {
    return num(r, expected ? "expected_days" : "days_to_train");
}
std::optional<double> cost_of(const json& r, bool expected) {
    return num(r, expected ? "expected_cost" : "cost");
}

std::string money(const json& r, const char* k) {
    const auto v = num(r, k);
    return v ? model::format_money(*v, str(r, "currency")) : std::string(kDash);
}
std::string fixed(const json& r, const char* k, int decimals) {
    const auto v = num(r, k);
    return v ? grouped(*v, decimals) : std::string(kDash);
}
// Days: one decimal, or three significant digits under 10 days (a small model's test run).
std::string days_text(double d) {
    return d >= 10 ? grouped(d, 1) : fmt::format("{:.3g}", d);
}
std::string days(const json& r, const char* k) {
    const auto v = num(r, k);
    return v ? days_text(*v) : std::string(kDash);
}

// "gpu bf16 list": the cell's labels but its model ("-" for an axis the grid does not have).
std::string cell_label(const json& r) {
    const std::string cell = str(r, "cell");
    std::vector<std::string> parts;
    std::size_t pos = 0;
    while (pos <= cell.size()) {
        const auto bar = cell.find('|', pos);
        parts.push_back(cell.substr(pos, bar == std::string::npos ? std::string::npos : bar - pos));
        if (bar == std::string::npos) break;
        pos = bar + 1;
    }
    std::string out;
    for (std::size_t i = 1; i < parts.size(); ++i) {
        if (parts[i].empty() || parts[i] == "-") continue;
        if (!out.empty()) out += ' ';
        out += parts[i];
    }
    return out.empty() ? cell : out;
}

// ---- the table ----

std::string table(const std::vector<json>& rows, bool expected) {
    auto varies = [&](const char* k) {
        for (const auto& r : rows)
            if (r.contains(k) && !r[k].is_null() && r[k] != rows.front()[k]) return true;
        return false;
    };
    auto present = [&](const char* k) {
        return std::any_of(rows.begin(), rows.end(), [&](const json& r) { return !str(r, k).empty(); });
    };
    const bool tokens = !rows.empty() && varies("tokens_axis");
    const bool framework = present("framework_axis"), stack = present("stack_axis");
    std::string s = "<div class=\"scroll\"><table id=\"sweep-table\">\n<thead><tr><th>model</th><th>GPU</th>"
                    "<th>precision</th>";
    if (tokens) s += "<th>tokens</th>";
    if (framework) s += "<th>framework</th>";
    if (stack) s += "<th>stack</th>";
    s += fmt::format(
        "<th>price</th><th>GPUs</th><th title=\"on the cell's days-vs-cost front\">front</th><th>best layout</th>"
        "<th>days (steady)</th><th>expected days</th><th>{} days p10\u2013p90</th><th>cost as billed (steady)</th>"
        "<th>expected cost as billed</th><th>energy (kWh)</th><th>status</th></tr></thead>\n<tbody>\n",
        expected ? "expected" : "steady");
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const json& r = rows[i];
        s += fmt::format("<tr data-row=\"{}\" data-cell=\"{}\" data-pareto=\"{}\"{}>", i, esc(str(r, "cell")),
                         pareto(r) ? "true" : "false", ok(r) ? "" : " class=\"nofit\"");
        s += fmt::format("<th>{}</th><td>{}</td><td>{}</td>", esc(str(r, "model")), esc(str(r, "gpu")),
                         esc(str(r, "precision")));
        if (tokens) s += fmt::format("<td>{}</td>", esc(str(r, "tokens_axis")));
        if (framework) s += fmt::format("<td>{}</td>", esc(str(r, "framework_axis")));
        if (stack) s += fmt::format("<td>{}</td>", esc(str(r, "stack_axis")));
        const std::string price = str(r, "price");
        s += fmt::format("<td>{}</td><td>{}</td><td>{}</td>", price.empty() ? std::string(kDash) : esc(price),
                         fixed(r, "num_gpus", 0), pareto(r) ? "\u2605" : "");
        if (!ok(r)) {
            const std::string why = str(r, "excluded_by");
            s += fmt::format("<td colspan=\"7\">{}</td><td>no plan{}</td></tr>\n", kDash,
                             why.empty() ? std::string() : ": " + esc(why));
            continue;
        }
        const char* p10 = expected ? "expected_days_p10" : "days_to_train_p10";
        const char* p90 = expected ? "expected_days_p90" : "days_to_train_p90";
        const auto lo = num(r, p10), hi = num(r, p90);
        s += fmt::format("<td class=\"layout\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
                         "<td>{}</td><td>ok</td></tr>\n",
                         esc(sweep_layout_words(r)), days(r, "days_to_train"), days(r, "expected_days"),
                         lo && hi ? fmt::format("{}\u2013{}", days_text(*lo), days_text(*hi)) : std::string(kDash),
                         money(r, "cost"), money(r, "expected_cost"), fixed(r, "energy_kwh", 0));
    }
    s += "</tbody></table></div>\n";
    return s;
}

// ---- a model's frontier ----

// A log axis from the 1-2-5 values around [lo, hi]; ticks at those values (decades only over more
// than 3.5 decades).
struct LogAxis {
    double lo = 1, hi = 10;
    std::vector<double> ticks;
};

LogAxis log_axis(double mn, double mx) {
    std::vector<double> steps;
    const int d0 = static_cast<int>(std::floor(std::log10(mn))) - 1, d1 = static_cast<int>(std::ceil(std::log10(mx))) + 1;
    for (int d = d0; d <= d1; ++d)
        for (double m : {1.0, 2.0, 5.0}) steps.push_back(m * std::pow(10.0, d));
    LogAxis a;
    std::size_t i_lo = 0, i_hi = steps.size() - 1;
    for (std::size_t i = 0; i < steps.size(); ++i) {
        if (steps[i] <= mn * (1 + 1e-12)) i_lo = i;
        if (steps[steps.size() - 1 - i] >= mx * (1 - 1e-12)) i_hi = steps.size() - 1 - i;
    }
    if (i_hi <= i_lo) {
        i_lo = i_lo > 0 ? i_lo - 1 : 0;
        i_hi = std::min(steps.size() - 1, i_lo + 2);
    }
    a.lo = steps[i_lo];
    a.hi = steps[i_hi];
    const bool dense = std::log10(a.hi / a.lo) <= 3.5;
    for (std::size_t i = i_lo; i <= i_hi; ++i)
        if (dense || i % 3 == 0) a.ticks.push_back(steps[i]);
    return a;
}

std::string frontier(std::size_t index, const std::string& model, const std::vector<json>& rows,
                     const std::vector<std::size_t>& of_model, bool expected) {
    struct Pt {
        std::size_t row;
        double days, cost;
    };
    // Series: the model's cells in the order of their first row.
    std::vector<std::string> cells;
    std::map<std::string, std::vector<Pt>> by_cell;
    std::string currency;
    for (std::size_t i : of_model) {
        const json& r = rows[i];
        const auto d = days_of(r, expected), c = cost_of(r, expected);
        if (!ok(r) || !d || !c || !(*d > 0) || !(*c > 0)) continue;
        const std::string cell = str(r, "cell");
        if (!by_cell.count(cell)) cells.push_back(cell);
        by_cell[cell].push_back({i, *d, *c});
        if (currency.empty()) currency = str(r, "currency");
    }
    std::string s = fmt::format("<section class=\"frontier\" data-model=\"{}\">\n<h2>{}: days against cost</h2>\n",
                                esc(model), esc(model));
    if (cells.empty()) {
        s += "<p class=\"note\">No row of this model has both a plan and a cost (no price, or no plan fits): "
             "nothing to plot.</p>\n</section>\n";
        return s;
    }
    s += fmt::format(
        "<p class=\"note\">Each point is the best plan of one GPU count of one cell, {} days against {} cost as "
        "billed (log scales); a colour is a cell over the grid's GPU counts. Ringed points, joined, are the cell's "
        "Pareto front: no other GPU count of the cell is both faster and cheaper (the rows' <code>pareto</code> "
        "flag).</p>\n",
        expected ? "expected" : "steady-state", expected ? "expected" : "steady-state");
    double dmin = 0, dmax = 0, cmin = 0, cmax = 0;
    bool first = true;
    for (const auto& [cell, pts] : by_cell)
        for (const auto& p : pts) {
            dmin = first ? p.days : std::min(dmin, p.days);
            dmax = first ? p.days : std::max(dmax, p.days);
            cmin = first ? p.cost : std::min(cmin, p.cost);
            cmax = first ? p.cost : std::max(cmax, p.cost);
            first = false;
        }
    const LogAxis xa = log_axis(dmin, dmax), ya = log_axis(cmin, cmax);
    constexpr double left = 84, right = 24, top = 14, plot_h = 300;
    const double pw = kWidth - left - right, bottom = top + plot_h;
    auto xpos = [&](double d) { return left + (std::log10(d) - std::log10(xa.lo)) / std::log10(xa.hi / xa.lo) * pw; };
    auto ypos = [&](double c) {
        return top + plot_h * (1 - (std::log10(c) - std::log10(ya.lo)) / std::log10(ya.hi / ya.lo));
    };
    std::vector<Tick> yt, xt;
    for (double t : ya.ticks) yt.push_back({ypos(t), esc(model::format_count(t))});
    for (double t : xa.ticks) xt.push_back({xpos(t), axis_num(t)});
    std::string body = plot_frame(left, top, pw, bottom, yt, xt);
    body += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{} days to train (log scale)</text>",
                        left + pw / 2, bottom + 36, expected ? "expected" : "steady-state");
    body += fmt::format(
        "<text x=\"16\" y=\"{0:.1f}\" text-anchor=\"middle\" transform=\"rotate(-90 16 {0:.1f})\">cost as billed "
        "({1}, log scale)</text>",
        top + plot_h / 2, esc(currency));
    std::vector<LegendItem> items;
    for (std::size_t k = 0; k < cells.size(); ++k) {
        const auto& pts = by_cell[cells[k]];
        const std::string col = color(k);
        std::vector<Pt> front;
        for (const auto& p : pts)
            if (pareto(rows[p.row])) front.push_back(p);
        std::sort(front.begin(), front.end(), [](const Pt& a, const Pt& b) { return a.days < b.days; });
        if (front.size() >= 2) {
            std::string coords;
            for (const auto& p : front) coords += fmt::format("{:.1f},{:.1f} ", xpos(p.days), ypos(p.cost));
            coords.pop_back();
            body += fmt::format("<polyline class=\"front\" data-cell=\"{}\" points=\"{}\" fill=\"none\" stroke=\"{}\" "
                                "stroke-width=\"2\"/>",
                                esc(cells[k]), coords, col);
        }
        for (const auto& p : pts) {
            const json& r = rows[p.row];
            const bool f = pareto(r);
            body += fmt::format(
                "<circle class=\"{}\" data-row=\"{}\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\"{}><title>{}: "
                "{} GPUs, {} days, {}{}</title></circle>",
                f ? "pt front" : "pt", p.row, xpos(p.days), ypos(p.cost), f ? 6 : 4, col,
                f ? " stroke=\"#222\" stroke-width=\"1.5\"" : " opacity=\"0.75\"", esc(cell_label(r)),
                fixed(r, "num_gpus", 0), days_text(p.days), esc(model::format_money(p.cost, str(r, "currency"))),
                f ? " (front)" : "");
        }
        items.push_back({cell_label(rows[pts.front().row]), col});
    }
    const double ly = bottom + 50;
    const double h = ly + legend(body, items, ly) + 8;
    s += fmt::format(
        "<svg id=\"frontier-{0}\" role=\"img\" width=\"{1:.0f}\" height=\"{2:.0f}\" viewBox=\"0 0 {1:.0f} {2:.0f}\">"
        "<title>{3}: days against cost</title>{4}</svg>\n</section>\n",
        index, kWidth, h, esc(model), body);
    return s;
}

// The market table's own rules, after the shared page style (page_style.hpp): wider, one line per row.
constexpr std::string_view kCss = R"(
body { max-width: 1200px; }
th, td { padding: 3px 8px; white-space: nowrap; }
td.layout { text-align: left; font-family: ui-monospace, monospace; font-size: 12px; }
tr.nofit td { color: #b00020; }
)";

} // namespace

std::string sweep_layout_words(const json& r) {
    auto i = [&](const char* k) { return r.contains(k) && r[k].is_number() ? r[k].get<int>() : 0; };
    auto s = [&](const char* k) { return r.contains(k) && r[k].is_string() ? r[k].get<std::string>() : std::string(); };
    std::string out = fmt::format("tp{} pp{}", i("tp"), i("pp"));
    if (i("vp") > 1) out += fmt::format(" vp{}", i("vp"));
    if (i("cp") > 1) out += fmt::format(" cp{}", i("cp"));
    out += fmt::format(" dp{} mbs{} {} rc:{}", i("dp"), i("micro_batch"), s("sharding"), s("recompute"));
    return out;
}

std::string sweep_html(const SweepPage& page, const std::vector<json>& rows) {
    const std::string heading = page.title.empty() ? page.grid_file : page.title;
    std::string s;
    s += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
    s += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
    s += fmt::format("<title>trainsim sweep: {}</title>\n<style>{}{}</style>\n</head>\n<body>\n", esc(heading),
                     report_style::kPageCss, kCss);
    s += fmt::format("<h1>{}</h1>\n", esc(heading));
    s += fmt::format(
        "<p class=\"meta\">trainsim sweep of <code>{}</code>: {} cells \u00d7 {} GPU counts = {} rows, the best plan "
        "of each. Figures are simulated, not measured; the columns are those of <code>sweep --out rows.jsonl</code> "
        "(docs/plan-search.md, \"Sweeps\"). The front (\u2605) is each cell's days-vs-cost front over its GPU counts, "
        "on {} days and cost.</p>\n",
        esc(page.grid_file), page.cells, page.counts, rows.size(), page.expected_days ? "expected" : "steady-state");
    s += "<section id=\"market\">\n<h2>Market table</h2>\n";
    s += table(rows, page.expected_days);
    s += "<p class=\"note\">Days: tokens / throughput; expected days add checkpoint writes, failures and restarts, "
         "and the band is trainsim's own 80% error band on published runs like the plan (docs/trust.md). Cost as "
         "billed: in whole billing units of the price's terms (docs/model.md \"Billing\"). Energy: the run's "
         "electricity over the expected wall clock (docs/model.md \"Energy\").</p>\n</section>\n";
    // One chart per model, in the order of the rows.
    std::vector<std::string> models;
    std::map<std::string, std::vector<std::size_t>> of_model;
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const std::string m = str(rows[i], "model");
        if (!of_model.count(m)) models.push_back(m);
        of_model[m].push_back(i);
    }
    for (std::size_t k = 0; k < models.size(); ++k)
        s += frontier(k, models[k], rows, of_model[models[k]], page.expected_days);
    s += fmt::format("<script type=\"application/json\" id=\"trainsim-sweep\">\n{}\n</script>\n",
                     script_json(json(rows)));
    s += "</body>\n</html>\n";
    return s;
}

} // namespace trainsim::sim
