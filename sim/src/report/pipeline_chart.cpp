// The HTML report's pipeline timelines (pipeline_chart.hpp).
#include "pipeline_chart.hpp"

#include "svg_charts.hpp"

#include "trainsim/model/accounting/pipeline_schedule.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

namespace trainsim::sim::svg {

namespace {

// Geometry (px): stage labels on the left, a row per stage, the time axis below.
constexpr double kLeft = 64, kRight = 12, kTop = 26, kRow = 22, kRowGap = 4, kAxis = 30;
constexpr double kPlotWidth = kWidth - kLeft - kRight;
// A micro-batch number is written inside a box at least this wide (px).
constexpr double kLabelWidth = 14;

// The passes' colours (Tableau 10, as the other charts): forward, input gradient, weight
// gradient, a whole backward; a box of an odd model chunk is lighter. A run of mixed passes
// (kMaxPipelineBoxes) is grey.
struct PassStyle {
    const char* key;    // data-pass
    const char* color;
    const char* label;  // legend
};
PassStyle style_of(model::PipelinePass p) {
    switch (p) {
        case model::PipelinePass::forward: return {"F", "#4e79a7", "F: forward"};
        case model::PipelinePass::input_grad: return {"B", "#f28e2b", "B: input gradient"};
        case model::PipelinePass::weight_grad: return {"W", "#59a14f", "W: weight gradient"};
        case model::PipelinePass::backward: break;
    }
    return {"BW", "#e15759", "B+W: whole backward"};
}
constexpr const char* kMixed = "#9c9c9c";

// Seconds in the unit of the axis.
struct Unit {
    double scale;
    const char* name;
};
Unit unit_for(double seconds) {
    return seconds >= 10 ? Unit{1, "s"} : Unit{1e3, "ms"};
}

std::string timeline(std::size_t index, const PlanResult& r, double t_max, const Translator& tr) {
    const auto& plan = *r.plan;
    const auto& q = plan.parallel;
    const auto& step = *r.estimate.step;
    const auto schedule = model::effective_schedule(q.pp_schedule, q.vp);
    const double x_per_s = kPlotWidth / t_max;
    const Unit u = unit_for(t_max);
    const bool coalesce = step.passes.size() > kMaxPipelineBoxes;
    auto xpos = [&](Time t) { return kLeft + t.seconds() * x_per_s; };

    std::string body;
    body += fmt::format(fmt::runtime(tr("<text class=\"label\" x=\"0\" y=\"16\">{}: {}{}, {} micro-batches, step {:.4g} {} (bubble "
                        "{:.4g} {} on the critical stage {})</text>")),
                        esc(plan.name), model::to_string(schedule), q.vp > 1 ? fmt::format(" vp {}", q.vp) : "",
                        plan.grad_accum(), step.step_time.seconds() * u.scale, u.name,
                        step.breakdown.bubble.seconds() * u.scale, u.name, step.critical_stage);
    std::size_t drawn = 0, merged = 0;
    std::size_t i = 0;
    for (int s = 0; s < q.pp; ++s) {
        const double y = kTop + s * (kRow + kRowGap);
        body += fmt::format("<g class=\"pp-stage\" data-stage=\"{}\"><text x=\"0\" y=\"{:.1f}\">{}</text>", s,
                            y + kRow / 2 + 4, fmt::format(fmt::runtime(tr("stage {}")), s));
        body += fmt::format("<rect class=\"pp-lane\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.0f}\" "
                            "fill=\"#f6f6f6\"/>",
                            kLeft, y, step.step_time.seconds() * x_per_s, kRow);
        while (i < step.passes.size() && step.passes[i].stage == s) {
            const auto& p = step.passes[i];
            const auto st = style_of(p.pass);
            const double x0 = xpos(p.start);
            double x1 = xpos(p.end);
            // Many passes: a run of sub-pixel passes less than a pixel apart is one box.
            std::size_t j = i + 1;
            bool mixed = false;
            if (coalesce && x1 - x0 < 1) {
                while (j < step.passes.size() && step.passes[j].stage == s && xpos(step.passes[j].start) - x1 < 1 &&
                       xpos(step.passes[j].end) - xpos(step.passes[j].start) < 1) {
                    mixed = mixed || step.passes[j].pass != p.pass;
                    x1 = xpos(step.passes[j].end);
                    ++j;
                }
            }
            const double w = std::max(x1 - x0, 0.5);
            if (j > i + 1) {
                body += fmt::format("<rect class=\"pp-run\" data-pass=\"{}\" data-count=\"{}\" x=\"{:.2f}\" y=\"{:.1f}\" "
                                    "width=\"{:.2f}\" height=\"{:.0f}\" fill=\"{}\"/>",
                                    mixed ? "mixed" : st.key, j - i, x0, y, w, kRow, mixed ? kMixed : st.color);
                merged += j - i;
            } else {
                body += fmt::format(
                    "<rect class=\"pp-op\" data-pass=\"{}\" data-mb=\"{}\" data-chunk=\"{}\" x=\"{:.2f}\" y=\"{:.1f}\" "
                    "width=\"{:.2f}\" height=\"{:.0f}\" fill=\"{}\"{}>",
                    st.key, p.microbatch, p.chunk, x0, y, w, kRow, st.color,
                    p.chunk % 2 == 1 ? " fill-opacity=\"0.55\"" : "");
                if (!coalesce)
                    body += fmt::format(
                        "<title>{}</title>",
                        fmt::format(fmt::runtime(tr("stage {} {} micro-batch {}{}: {:.4g} to {:.4g} {}")), s, st.key,
                                    p.microbatch,
                                    q.vp > 1 ? fmt::format(fmt::runtime(tr(" chunk {}")), p.chunk) : std::string(),
                                    p.start.seconds() * u.scale, p.end.seconds() * u.scale, u.name));
                body += "</rect>";
                if (w >= kLabelWidth)
                    body += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"#fff\" "
                                        "style=\"font-size:10px;fill:#fff\">{}</text>",
                                        x0 + w / 2, y + kRow / 2 + 4, p.microbatch);
                ++drawn;
            }
            i = j;
        }
        body += "</g>";
    }
    // The time axis.
    const double axis_y = kTop + q.pp * (kRow + kRowGap);
    body += fmt::format("<line class=\"axis\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\"/>", kLeft,
                        axis_y, kLeft + kPlotWidth);
    const double span = t_max * u.scale;
    const double tick = nice_step(span, 8);
    for (double v = 0; v <= span + 1e-9 * span; v += tick) {
        const double x = kLeft + v / u.scale * x_per_s;
        body += fmt::format("<line class=\"axis\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\"/><text "
                            "x=\"{0:.1f}\" y=\"{3:.1f}\" text-anchor=\"middle\">{4}</text>",
                            x, axis_y, axis_y + 4, axis_y + 16, axis_num(v));
    }
    body += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>", kLeft + kPlotWidth,
                        axis_y + 28, u.name);
    std::vector<LegendItem> items;
    for (auto pass : {model::PipelinePass::forward, model::PipelinePass::backward, model::PipelinePass::input_grad,
                      model::PipelinePass::weight_grad}) {
        // Only the passes this schedule runs.
        if (std::none_of(step.passes.begin(), step.passes.end(), [&](const PassSpan& p) { return p.pass == pass; }))
            continue;
        const auto st = style_of(pass);
        items.push_back({std::string(tr(st.label)), st.color});
    }
    if (merged > 0) items.push_back({std::string(tr("passes under a pixel, drawn together")), kMixed});
    const double ly = axis_y + kAxis + 8;
    const double h = ly + legend(body, items, ly) + 4;
    return fmt::format("<svg id=\"pipeline-{0}\" class=\"pipeline\" data-plan=\"{0}\" data-schedule=\"{1}\" "
                       "data-vp=\"{2}\" data-microbatches=\"{3}\" data-boxes=\"{4}\" data-merged=\"{5}\" role=\"img\" "
                       "width=\"{6:.0f}\" height=\"{7:.0f}\" viewBox=\"0 0 {6:.0f} {7:.0f}\"><title>{8}</title>{9}</svg>\n",
                       index, model::to_string(schedule), q.vp, plan.grad_accum(), drawn, merged, kWidth, h,
                       esc(fmt::format(fmt::runtime(tr("Pipeline timeline of {}: one row per stage")), plan.name)), body);
}

} // namespace

std::string pipeline_timelines(const std::vector<PlanResult>& results, const Translator& tr) {
    // One time axis per layout: the longest step among the plans that share it.
    using Key = std::tuple<int, int, int>;  // GPUs, pp, micro-batches per step
    auto key = [](const model::Plan& p) { return Key{p.num_gpus(), p.parallel.pp, p.grad_accum()}; };
    auto drawable = [](const PlanResult& r) {
        return r.plan->parallel.pp > 1 && r.estimate.step && !r.estimate.step->passes.empty();
    };
    std::map<Key, double> t_max;
    for (const auto& r : results)
        if (drawable(r)) {
            auto& t = t_max[key(*r.plan)];
            t = std::max(t, r.estimate.step->step_time.seconds());
        }
    std::string s;
    for (std::size_t i = 0; i < results.size(); ++i) {
        const auto& r = results[i];
        if (r.plan->parallel.pp < 2)
            s += fmt::format(fmt::runtime(tr("<p class=\"note pp-none\" data-plan=\"{}\">{}: pp 1, no pipeline (every GPU "
                                             "holds all the layers), so there is no schedule to draw.</p>\n")),
                             i, esc(r.plan->name));
        else if (!drawable(r))
            s += fmt::format(fmt::runtime(tr("<p class=\"note pp-none\" data-plan=\"{}\">{}: not simulated ({}), no "
                                             "timeline.</p>\n")),
                             i, esc(r.plan->name),
                             tr(r.estimate.fits ? "no passes recorded" : "it does not fit in memory"));
        else
            s += timeline(i, r, t_max.at(key(*r.plan)), tr);
    }
    return s;
}

} // namespace trainsim::sim::svg
