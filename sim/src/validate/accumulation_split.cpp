#include "trainsim/sim/validate/accumulation_split.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <map>
#include <optional>
#include <tuple>

namespace trainsim::sim {

namespace {
// Everything a group's rows share: the row's source, model and hardware, and the simulated
// layout but its gradient accumulation.
std::string group_key(const model::ValidationRow& row, const RowResult& r) {
    const auto& m = row.plan.model;
    const auto& l = r.layout;
    return fmt::format("{}|{}|{} {} {} {} {} {} {}|{}|{}|{}|{} {} {} {} {} {} {} {}|{}|{}|{}", r.source_group, m.name,
                       m.layers, m.hidden, m.heads, m.kv_heads, m.ffn, m.vocab, static_cast<int>(m.ffn_type), r.gpu,
                       r.precision, l.framework, l.tp, l.pp, l.vp, l.cp, l.dp, l.micro_batch, l.gpus, l.seq_len,
                       l.sharding, l.recompute, row.plan.parallel.sequence_parallel);
}

std::string group_label(const model::ValidationRow& row, const RowResult& r) {
    const auto& l = r.layout;
    std::string s =
        fmt::format("{} {} {} {} tp{} pp{}", row.plan.model.name, r.gpu, r.precision, l.framework, l.tp, l.pp);
    if (l.vp > 1) s += fmt::format(" vp{}", l.vp);
    if (l.cp > 1) s += fmt::format(" cp{}", l.cp);
    s += fmt::format(" dp{} mb{} s{} {} recompute {}", l.dp, l.micro_batch, l.seq_len, l.sharding, l.recompute);
    return s + (row.plan.parallel.sequence_parallel && l.tp > 1 ? " sp" : "");
}

// The least-squares line y = a + b x through the points (at least two different x).
struct Line {
    double intercept = 0, slope = 0;
};
Line fit_line(const std::vector<double>& x, const std::vector<double>& y) {
    const auto n = static_cast<double>(x.size());
    double mx = 0, my = 0;
    for (std::size_t i = 0; i < x.size(); ++i) mx += x[i], my += y[i];
    mx /= n, my /= n;
    double sxx = 0, sxy = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        sxx += (x[i] - mx) * (x[i] - mx);
        sxy += (x[i] - mx) * (y[i] - my);
    }
    const double b = sxy / sxx;
    return {my - b * mx, b};
}

// simulated / measured, when the measured part is a time at all (noise can fit a per-step part
// at or below zero).
std::optional<double> ratio(double simulated, double measured) {
    if (!(measured > 0)) return std::nullopt;
    return simulated / measured;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return quantile(v, 0.5);
}
} // namespace

std::vector<AccumulationSplit> split_accumulation(const std::vector<model::ValidationRow>& rows,
                                                  const ValidationReport& r) {
    struct Point {
        const model::ValidationRow* row;
        const RowResult* result;
        double measured_s, simulated_s;
    };
    std::map<std::string, std::vector<Point>> groups;
    // validate_rows keeps the report's rows in the order of the file's: pair them by position.
    for (std::size_t i = 0; i < r.rows.size() && i < rows.size(); ++i) {
        const auto& x = r.rows[i];
        const auto& row = rows[i];
        if (x.id != row.id || x.status != "ok" || x.kind != "step" || !x.has_step) continue;
        // A blank micro-batch or recompute was chosen by the simulator: the measured run's own
        // setting, and so its split, is not known.
        if (row.micro_batch_blank || row.recompute_blank) continue;
        // Both sides from the same tokens per GPU per step: the measured time is what the
        // measured throughput took for it.
        const double measured_s = x.layout.tokens_per_gpu / x.measured;
        if (!std::isfinite(measured_s) || !(measured_s > 0) || !std::isfinite(x.step_time_s) || !(x.step_time_s > 0))
            continue;
        groups[group_key(row, x)].push_back({&row, &x, measured_s, x.step_time_s});
    }
    std::vector<AccumulationSplit> out;
    for (auto& [key, points] : groups) {
        std::stable_sort(points.begin(), points.end(), [](const Point& a, const Point& b) {
            return a.result->layout.grad_accum < b.result->layout.grad_accum;
        });
        if (points.front().result->layout.grad_accum == points.back().result->layout.grad_accum) continue;
        AccumulationSplit s;
        s.label = group_label(*points.front().row, *points.front().result);
        s.source_group = points.front().result->source_group;
        s.layout = points.front().result->layout;
        s.sequence_parallel = points.front().row->plan.parallel.sequence_parallel;
        std::vector<double> ga, measured, simulated;
        for (const auto& p : points) {
            s.ids.push_back(p.result->id);
            s.grad_accum.push_back(p.result->layout.grad_accum);
            ga.push_back(p.result->layout.grad_accum);
            measured.push_back(p.measured_s);
            simulated.push_back(p.simulated_s);
        }
        const auto m = fit_line(ga, measured);
        const auto sim = fit_line(ga, simulated);
        s.measured_per_step_s = m.intercept, s.measured_per_microbatch_s = m.slope;
        s.simulated_per_step_s = sim.intercept, s.simulated_per_microbatch_s = sim.slope;
        out.push_back(std::move(s));
    }
    // By source group, then layout, then label (model and the rest), so that a file's layouts
    // read as a table.
    const auto order_key = [](const AccumulationSplit& x) {
        const auto& l = x.layout;
        return std::tuple(x.source_group, l.tp, l.pp, l.vp, l.cp, l.dp, l.micro_batch, l.gpus, x.label);
    };
    std::stable_sort(out.begin(), out.end(), [&](const AccumulationSplit& a, const AccumulationSplit& b) {
        return order_key(a) < order_key(b);
    });
    return out;
}

std::string accumulation_text(const std::vector<AccumulationSplit>& splits) {
    std::string s =
        "step time split by gradient accumulation (rows that differ only in their global batch: step = per step + "
        "grad_accum x per micro-batch, least squares; measured, simulated, simulated / measured):\n";
    if (splits.empty()) return s + "  no two compared step rows differ only in their global batch\n";
    std::size_t width = 0;
    for (const auto& x : splits) width = std::max(width, x.label.size());
    const auto r = [](std::optional<double> v) { return v ? fmt::format("x{:.2f}", *v) : std::string("-"); };
    std::vector<double> step_ratios, mb_ratios;
    for (const auto& x : splits) {
        const auto rs = ratio(x.simulated_per_step_s, x.measured_per_step_s);
        const auto rm = ratio(x.simulated_per_microbatch_s, x.measured_per_microbatch_s);
        if (rs) step_ratios.push_back(*rs);
        if (rm) mb_ratios.push_back(*rm);
        s += fmt::format(
            "  {:<{}}  ga {:>3}-{:<3} ({} rows)  per step {:8.1f} {:8.1f} ms {:>6}  per micro-batch "
            "{:8.1f} {:8.1f} ms {:>6}\n",
            x.label, width, x.grad_accum.front(), x.grad_accum.back(), x.ids.size(), 1e3 * x.measured_per_step_s,
            1e3 * x.simulated_per_step_s, r(rs), 1e3 * x.measured_per_microbatch_s, 1e3 * x.simulated_per_microbatch_s,
            r(rm));
    }
    const auto med = [](const std::vector<double>& v) {
        return v.empty() ? std::string("-") : fmt::format("x{:.2f}", median(v));
    };
    s += fmt::format(
        "  median over the {} groups: per step {} ({} groups with a measured part above 0), per "
        "micro-batch {} ({})\n",
        splits.size(), med(step_ratios), step_ratios.size(), med(mb_ratios), mb_ratios.size());
    return s;
}

nlohmann::json accumulation_json(const std::vector<AccumulationSplit>& splits) {
    nlohmann::json j = nlohmann::json::array();
    const auto opt = [](std::optional<double> v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
    for (const auto& x : splits) {
        const auto& l = x.layout;
        j.push_back({{"label", x.label},
                     {"source_group", x.source_group},
                     {"ids", x.ids},
                     {"grad_accum", x.grad_accum},
                     {"tp", l.tp},
                     {"pp", l.pp},
                     {"vp", l.vp},
                     {"cp", l.cp},
                     {"dp", l.dp},
                     {"micro_batch", l.micro_batch},
                     {"num_gpus", l.gpus},
                     {"seq_len", l.seq_len},
                     {"sharding", l.sharding},
                     {"recompute", l.recompute},
                     {"sequence_parallel", x.sequence_parallel},
                     {"measured_per_step_s", x.measured_per_step_s},
                     {"measured_per_microbatch_s", x.measured_per_microbatch_s},
                     {"simulated_per_step_s", x.simulated_per_step_s},
                     {"simulated_per_microbatch_s", x.simulated_per_microbatch_s},
                     {"per_step_ratio", opt(ratio(x.simulated_per_step_s, x.measured_per_step_s))},
                     {"per_microbatch_ratio", opt(ratio(x.simulated_per_microbatch_s, x.measured_per_microbatch_s))}});
    }
    return j;
}

} // namespace trainsim::sim
