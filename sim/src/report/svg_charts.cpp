// SVG primitives of the HTML report (svg_charts.hpp).
#include "svg_charts.hpp"

#include "trainsim/model/core/text_format.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace trainsim::sim::svg {

using nlohmann::json;

// ---- text ----

std::string esc(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
        switch (c) {
            case '&':
                out += "&amp;";
                break;
            case '<':
                out += "&lt;";
                break;
            case '>':
                out += "&gt;";
                break;
            case '"':
                out += "&quot;";
                break;
            case '\'':
                out += "&#39;";
                break;
            default:
                out += c;
        }
    }
    return out;
}

// 1234567.8 -> "1,234,568" (decimals 0) or "1,234,567.80" (decimals 2).
std::string grouped(double v, int decimals) {
    return model::format_grouped(v, decimals);
}

std::string axis_num(double v) {
    return std::fabs(v) >= 1000 ? grouped(v, 0) : fmt::format("{:g}", v);
}

// JSON inside <script type="application/json">: "<" only occurs inside strings, where \u003c
// is the same character, so "</script>" in a plan name cannot end the block. Compact (no
// indentation): a page is read by a program, and a sweep's rows indented were most of its bytes
// (issue #43).
std::string script_json(const json& j) {
    const std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
        if (c == '<')
            out += "\\u003c";
        else
            out += c;
    }
    return out;
}

// Tableau 10: distinguishable, and readable by most colour-blind viewers.
constexpr std::string_view kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                         "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
std::string color(std::size_t i) {
    return std::string(kPalette[i % std::size(kPalette)]);
}

// A round tick step (1, 2 or 5 x 10^k) giving about `target` intervals over [0, range].
double nice_step(double range, int target) {
    if (!(range > 0)) return 1;
    const double raw = range / target;
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    const double f = raw / mag;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}



// Legend items in rows that wrap at the chart width; returns the height used.
double legend(std::string& s, const std::vector<LegendItem>& items, double y0) {
    // About 7 px per character at 12 px; a label longer than a row is cut (full text on hover).
    constexpr std::size_t max_chars = static_cast<std::size_t>((kWidth - 24 - 44) / 7);
    double x = 12, y = y0;
    for (const auto& it : items) {
        const bool cut = it.label.size() > max_chars;
        std::size_t keep = max_chars - 3;
        while (cut && keep > 0 && (static_cast<unsigned char>(it.label[keep]) & 0xC0) == 0x80) --keep; // UTF-8
        const std::string shown = cut ? fmt::format("{}...", it.label.substr(0, keep)) : it.label;
        const double w = 26 + 7.0 * static_cast<double>(shown.size()) + 18;
        if (x + w > kWidth - 12 && x > 12) {
            x = 12;
            y += 20;
        }
        if (it.whisker)
            s += fmt::format(
                "<g class=\"legend-whisker\" stroke=\"{0}\" stroke-width=\"1.5\"><line x1=\"{1:.1f}\" y1=\"{2:.1f}\" "
                "x2=\"{3:.1f}\" y2=\"{2:.1f}\"/><line x1=\"{1:.1f}\" y1=\"{4:.1f}\" x2=\"{1:.1f}\" y2=\"{5:.1f}\"/>"
                "<line x1=\"{3:.1f}\" y1=\"{4:.1f}\" x2=\"{3:.1f}\" y2=\"{5:.1f}\"/></g>",
                it.color, x, y + 7, x + 18, y + 2, y + 12);
        else if (it.dashed)
            s += fmt::format(
                "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"2\" "
                "stroke-dasharray=\"5 3\"/>",
                x, y + 7, x + 18, y + 7, it.color);
        else
            s +=
                fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"14\" height=\"14\" fill=\"{}\"/>", x, y, it.color);
        s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}{}</text>", x + 22, y + 11, esc(shown),
                         cut ? fmt::format("<title>{}</title>", esc(it.label)) : "");
        x += w;
    }
    return y + 20 - y0;
}

// ---- horizontal stacked bars (step breakdown, memory, days, cost) ----


std::string stacked_bars(const std::string& id, const std::string& title, const std::vector<LegendItem>& segments,
                         const std::vector<BarRow>& rows, const std::string& unit,
                         const std::optional<LegendItem>& marker, const std::optional<LegendItem>& band,
                         const Translator& tr) {
    constexpr double pad_l = 12, pad_r = 150, row_h = 46;
    const double pw = kWidth - pad_l - pad_r;
    std::string body;
    std::vector<LegendItem> items = segments;
    if (marker) items.push_back(*marker);
    if (band && std::any_of(rows.begin(), rows.end(), [](const BarRow& r) { return r.range.has_value(); }))
        items.push_back(*band);
    const double y0 = 8 + legend(body, items, 8) + 8;
    double xmax = 0;
    for (const auto& r : rows) {
        double total = 0;
        for (double v : r.values) total += v;
        xmax = std::max({xmax, total, r.marker.value_or(0.0), r.range ? r.range->second : 0.0});
    }
    if (!(xmax > 0)) xmax = 1;
    const double step = nice_step(xmax, 6);
    xmax = std::ceil(xmax / step - 1e-9) * step;
    auto xpos = [&](double v) { return pad_l + v / xmax * pw; };
    const double y_axis = y0 + static_cast<double>(rows.size()) * row_h + 4;
    for (double t = 0; t <= xmax + step / 2; t += step) {
        body += fmt::format("<line class=\"grid\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\"/>",
                            xpos(t), y0, y_axis);
        body += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>", xpos(t), y_axis + 16,
                            axis_num(t));
    }
    body += fmt::format("<line class=\"axis\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/>", pad_l, y_axis,
                        pad_l + pw, y_axis);
    body += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>", pad_l + pw / 2, y_axis + 34,
                        esc(unit));
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const auto& r = rows[i];
        const double y = y0 + static_cast<double>(i) * row_h;
        const double by = y + 20;
        body += fmt::format("<text class=\"label\" x=\"{:.1f}\" y=\"{:.1f}\">{}</text>", pad_l, y + 13, esc(r.label));
        if (r.values.empty()) {
            body +=
                fmt::format("<text class=\"nofit\" x=\"{:.1f}\" y=\"{:.1f}\">{}</text>", pad_l, by + 15, esc(r.note));
            continue;
        }
        double total = 0;
        for (double v : r.values) total += v;
        double cum = 0;
        for (std::size_t k = 0; k < r.values.size(); ++k) {
            const double v = r.values[k];
            if (!(v > 0)) continue;
            body += fmt::format(
                "<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"20\" fill=\"{}\"><title>{}: {} "
                "{} ({:.1f}%)</title></rect>",
                xpos(cum), by, v / xmax * pw, segments[k].color, esc(segments[k].label), fmt::format("{:.4g}", v),
                esc(unit), total > 0 ? 100 * v / total : 0.0);
            cum += v;
        }
        double text_x = xpos(total) + 6;
        if (r.range) {
            const double x1 = xpos(r.range->first), x2 = xpos(r.range->second), ym = by + 10;
            body += fmt::format(
                "<g class=\"band\" stroke=\"#222\" stroke-width=\"1.5\"><title>{}</title>"
                "<line x1=\"{:.2f}\" y1=\"{:.1f}\" x2=\"{:.2f}\" y2=\"{:.1f}\"/>"
                "<line x1=\"{:.2f}\" y1=\"{:.1f}\" x2=\"{:.2f}\" y2=\"{:.1f}\"/>"
                "<line x1=\"{:.2f}\" y1=\"{:.1f}\" x2=\"{:.2f}\" y2=\"{:.1f}\"/></g>",
                esc(fmt::format(fmt::runtime(tr("80% band: {:.4g} to {:.4g} {}")), r.range->first, r.range->second,
                                unit)),
                x1, ym, x2, ym, x1, ym - 5, x1, ym + 5, x2, ym - 5, x2,
                ym + 5);
            text_x = std::max(text_x, x2 + 6);
        }
        if (r.marker) {
            const double mx = xpos(*r.marker);
            body += fmt::format(
                "<line x1=\"{0:.2f}\" y1=\"{1:.1f}\" x2=\"{0:.2f}\" y2=\"{2:.1f}\" stroke=\"{3}\" "
                "stroke-width=\"2\" stroke-dasharray=\"4 3\"><title>{4}: {5:.4g} {6}</title></line>",
                mx, by - 5, by + 25, marker->color, esc(marker->label), *r.marker, esc(unit));
            text_x = std::max(text_x, mx + 6);
        }
        body += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>", text_x, by + 15, esc(r.value_text));
        if (!r.note.empty())
            body += fmt::format("<text class=\"nofit\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>",
                                pad_l + pw + pad_r - 4, y + 13, esc(r.note));
    }
    const double h = y_axis + 44;
    return fmt::format(
        "<svg id=\"{0}\" role=\"img\" width=\"{1:.0f}\" height=\"{2:.0f}\" viewBox=\"0 0 {1:.0f} {2:.0f}\">"
        "<title>{3}</title>{4}</svg>\n",
        id, kWidth, h, esc(title), body);
}

// ---- line chart over GPU counts (log2 x axis) ----


std::string line_chart(const std::string& id, const std::string& title, const std::string& y_title, bool log_y,
                       const std::vector<int>& x_ticks, const std::vector<LineSeries>& series, const Translator& tr) {
    constexpr double left = 84, right = 24, top = 14, plot_h = 300;
    const double pw = kWidth - left - right;
    double xmin = 0, xmax = 0, ymin = 0, ymax = 0;
    bool any = false;
    auto see_x = [&](double x) {
        xmin = any ? std::min(xmin, x) : x;
        xmax = any ? std::max(xmax, x) : x;
        any = true;
    };
    for (int t : x_ticks) see_x(t);
    bool any_y = false;
    for (const auto& s : series) {
        for (const auto& vec : {s.points, s.ideal})
            for (const auto& [x, y] : vec) {
                see_x(x);
                if (!(y > 0)) continue;
                ymin = any_y ? std::min(ymin, y) : y;
                ymax = any_y ? std::max(ymax, y) : y;
                any_y = true;
            }
    }
    if (!any_y) {
        ymin = 1;
        ymax = 10;
    }
    std::vector<double> y_ticks;
    if (log_y) {
        ymin = std::pow(10.0, std::floor(std::log10(ymin)));
        ymax = std::pow(10.0, std::ceil(std::log10(ymax)));
        if (ymax <= ymin) ymax = ymin * 10;
        const bool dense = std::log10(ymax / ymin) <= 3.5;
        for (double d = ymin; d <= ymax * 1.0001; d *= 10)
            for (double m : {1.0, 2.0, 5.0})
                if ((dense || m == 1.0) && d * m <= ymax * 1.0001) y_ticks.push_back(d * m);
    } else {
        ymin = 0;
        const double step = nice_step(ymax, 5);
        ymax = std::ceil(ymax * 1.05 / step) * step;
        for (double t = 0; t <= ymax + step / 2; t += step) y_ticks.push_back(t);
    }
    const double lx0 = std::log2(std::max(xmin, 1.0)), lx1 = std::log2(std::max(xmax, 1.0));
    auto xpos = [&](double x) {
        if (lx1 <= lx0) return left + pw / 2;
        return left + (std::log2(x) - lx0) / (lx1 - lx0) * pw;
    };
    auto ypos = [&](double y) {
        const double f = log_y ? (std::log10(y) - std::log10(ymin)) / (std::log10(ymax) - std::log10(ymin))
                               : (y - ymin) / (ymax - ymin);
        return top + plot_h * (1 - f);
    };
    const double bottom = top + plot_h;
    std::vector<Tick> yt, xt;
    for (double t : y_ticks) yt.push_back({ypos(t), axis_num(t)});
    for (int t : x_ticks) xt.push_back({xpos(t), std::to_string(t)});
    std::string body = plot_frame(left, top, pw, bottom, yt, xt);
    body += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>", left + pw / 2,
                        bottom + 36, tr("GPUs (log scale)"));
    body += fmt::format(
        "<text x=\"16\" y=\"{0:.1f}\" text-anchor=\"middle\" transform=\"rotate(-90 16 {0:.1f})\">{1}</text>",
        top + plot_h / 2, esc(y_title));
    auto polyline = [&](const std::vector<std::pair<double, double>>& pts, const std::string& col, bool dashed) {
        if (pts.size() < 2) return;
        std::string coords;
        for (const auto& [x, y] : pts) coords += fmt::format("{:.1f},{:.1f} ", xpos(x), ypos(y));
        coords.pop_back();
        body += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{}\"{}/>", coords, col,
                            dashed ? 1.5 : 2.5, dashed ? " stroke-dasharray=\"6 4\" opacity=\"0.8\"" : "");
    };
    for (const auto& s : series) {
        polyline(s.ideal, s.color, true);
        polyline(s.points, s.color, false);
        for (const auto& [x, y] : s.points) {
            const bool own = s.own.count(static_cast<int>(x)) > 0;
            body += fmt::format(
                "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\"{}><title>{}</title></circle>", xpos(x),
                ypos(y), own ? 6 : 4, s.color, own ? " stroke=\"#222\" stroke-width=\"2\"" : "",
                esc(fmt::format(fmt::runtime(tr("{}: {} GPUs, {}")), s.label, x, fmt::format("{:.4g}", y))));
        }
    }
    std::vector<LegendItem> items;
    for (const auto& s : series)
        items.push_back(
            {s.points.empty() ? fmt::format(fmt::runtime(tr("{} (no point fits)")), s.label) : s.label, s.color});
    items.push_back({std::string(tr("ideal linear scaling (dashed)")), "#666", true});
    items.push_back({std::string(tr("ringed: the scenario's own GPU count")), "#222", false});
    const double ly = bottom + 50;
    const double h = ly + legend(body, items, ly) + 8;
    return fmt::format(
        "<svg id=\"{0}\" role=\"img\" width=\"{1:.0f}\" height=\"{2:.0f}\" viewBox=\"0 0 {1:.0f} {2:.0f}\">"
        "<title>{3}</title>{4}</svg>\n",
        id, kWidth, h, esc(title), body);
}

std::string plot_frame(double left, double top, double width, double bottom, const std::vector<Tick>& y_ticks,
                       const std::vector<Tick>& x_ticks) {
    std::string body;
    for (const auto& t : y_ticks) {
        body += fmt::format("<line class=\"grid\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/>", left, t.pos,
                            left + width, t.pos);
        body += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>", left - 6, t.pos + 4, t.label);
    }
    for (const auto& t : x_ticks) {
        body += fmt::format("<line class=\"grid\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\"/>", t.pos,
                            top, bottom);
        body += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>", t.pos, bottom + 16,
                            t.label);
    }
    body += fmt::format("<line class=\"axis\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\"/>", left,
                        bottom, left + width);
    body += fmt::format("<line class=\"axis\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\"/>", left, top,
                        bottom);
    return body;
}

} // namespace trainsim::sim::svg
