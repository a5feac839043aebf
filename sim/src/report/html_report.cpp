#include "trainsim/sim/report/html_report.hpp"

#include "trainsim/model/accounting/memory_model.hpp"
#include "trainsim/sim/run/billing.hpp"

#include "pipeline_chart.hpp"
#include "page_style.hpp"
#include "svg_charts.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <string_view>

namespace trainsim::sim {

using model::to_gib;
using nlohmann::json;

using namespace svg;

namespace {

// fmt::format with the format string in the page's language (lang.hpp; English is the key).
template <class... Args> std::string trf(const Translator& tr, std::string_view f, Args&&... args) {
    return fmt::format(fmt::runtime(tr(f)), std::forward<Args>(args)...);
}

// ---- the plans table ----

enum class Cell { integer, fixed, percent, money, billed, text, yes_no };

struct RowSpec {
    const char* key; // JSON path, dotted for nested fields
    const char* label;
    Cell kind;
    int decimals = 0;
};

const json* lookup(const json& plan, std::string_view path) {
    const json* j = &plan;
    while (!path.empty()) {
        const auto dot = path.find('.');
        const std::string part(path.substr(0, dot));
        if (!j->is_object() || !j->contains(part)) return nullptr;
        j = &(*j)[part];
        path = dot == std::string_view::npos ? std::string_view() : path.substr(dot + 1);
    }
    return j;
}

std::string cell_text(const json& plan, const RowSpec& r, const Translator& tr) {
    const json* v = lookup(plan, r.key);
    if (v == nullptr || v->is_null()) return "\u2014";
    switch (r.kind) {
        case Cell::integer:
            return grouped(v->get<double>(), 0);
        case Cell::fixed:
            return grouped(v->get<double>(), r.decimals);
        case Cell::percent:
            return fmt::format("{:.{}f}%", 100 * v->get<double>(), r.decimals);
        case Cell::money:
            return fmt::format("{} {}", grouped(v->get<double>(), r.decimals), plan.value("currency", ""));
        case Cell::billed: {
            // "12 machine-months", "9,112.3 GPU-hours": whole units without decimals.
            const double units = v->get<double>();
            const json* unit = lookup(plan, "billing.steady.unit");
            const bool whole = std::fabs(units - std::round(units)) < 1e-9 * std::max(1.0, std::fabs(units));
            const std::string name =
                unit != nullptr && unit->is_string() ? unit->get<std::string>() : std::string("unit");
            // English adds a plural "s"; a translated unit name has no plural form.
            if (!tr.english()) return fmt::format("{} {}", grouped(units, whole ? 0 : 1), tr(name));
            return fmt::format("{} {}{}", grouped(units, whole ? 0 : 1), name, whole && std::round(units) == 1 ? "" : "s");
        }
        case Cell::text:
            return v->is_string() ? v->get<std::string>() : v->dump();
        case Cell::yes_no:
            return std::string(v->get<bool>() ? tr("yes") : tr("no"));
    }
    return "";
}

std::string days_text(double hours, const Translator& tr) {
    return trf(tr, "{:.1f} days", hours / 24.0);
}

// Why a plan's bill is larger than the hours it uses (sim/run/billing.hpp): a term or a month is
// paid whole, an hourly rate per started increment. An em dash where there is no bill.
std::string bill_why(const RunEstimate& e, const Translator& tr) {
    if (!e.fits || !e.step || !e.priced) return "\u2014";
    const auto& b = e.bill;
    const std::string used = days_text(b.used_hours, tr), paid = days_text(b.billed_hours, tr);
    switch (b.commitment) {
        case model::Commitment::monthly:
        case model::Commitment::quarterly:
        case model::Commitment::annual: {
            const int months = b.commitment == model::Commitment::monthly     ? 1
                               : b.commitment == model::Commitment::quarterly ? 3
                                                                              : 12;
            const double terms = std::round(b.billed_hours / (months * kHoursPerMonth));
            if (!tr.english())
                return trf(tr, "{} commitment, paid in whole {}-month terms: {:.0f} terms ({}) paid for the {} the run takes",
                           tr(model::to_string(b.commitment)), months, terms, paid, used);
            return fmt::format("{} {} commitment is paid in whole {}-month terms: {:.0f} term{} ({}) paid for the "
                               "{} the run takes",
                               b.commitment == model::Commitment::annual ? "an" : "a", model::to_string(b.commitment),
                               months, terms, terms == 1 ? "" : "s", paid, used);
        }
        case model::Commitment::on_demand:
        case model::Commitment::spot:
            break;
    }
    const std::string_view how = tr(b.commitment == model::Commitment::spot ? "spot" : "on demand");
    if (e.pricing.basis == model::PriceBasis::machine_month && !tr.english())
        return trf(tr, "{}, machine-months are paid whole: {:.0f} months ({}) paid for the {} the run takes", how,
                   std::round(b.billed_hours / kHoursPerMonth), paid, used);
    if (e.pricing.basis == model::PriceBasis::machine_month)
        return fmt::format("{}, machine-months are paid whole: {:.0f} month{} ({}) paid for the {} the run takes", how,
                           std::round(b.billed_hours / kHoursPerMonth),
                           std::round(b.billed_hours / kHoursPerMonth) == 1 ? "" : "s", paid, used);
    if (b.unused_fraction < 5e-4)
        return trf(tr, "{}, billed per {}: only the hours used are paid", how,
                   tr(model::to_string(e.pricing.increment)));
    // Hourly bases: in hours, where a started increment shows.
    return trf(tr, "{}, billed per started {}: {:.1f} hours paid for the {:.1f} hours the run takes", how,
               tr(model::to_string(e.pricing.increment)), b.billed_hours, b.used_hours);
}

std::string plans_table(const json& plans, const std::vector<PlanResult>& results, const Translator& tr) {
    std::vector<RowSpec> rows{
        {"num_gpus", "GPUs", Cell::integer},           {"gpu", "GPU (profile)", Cell::text},
        {"precision", "precision", Cell::text},        {"model", "model", Cell::text},
        {"tp", "tensor parallel (tp)", Cell::integer}, {"pp", "pipeline parallel (pp)", Cell::integer}};
    bool any_vp = false, any_cp = false, any_block = false;
    for (const auto& r : results) {
        any_vp = any_vp || r.plan->parallel.vp > 1;
        any_cp = any_cp || r.plan->parallel.cp > 1;
        any_block = any_block || model::block_recompute(*r.plan);
    }
    // The stack profile the figures come from, where a plan has one (--stack / parallel.stack).
    if (std::any_of(results.begin(), results.end(), [](const PlanResult& r) { return r.plan->stack != nullptr; }))
        rows.push_back({"stack_profile.name", "stack profile", Cell::text});
    if (any_vp) rows.push_back({"vp", "virtual stages (vp)", Cell::integer});
    if (any_cp) rows.push_back({"cp", "context parallel (cp)", Cell::integer});
    std::vector<RowSpec> rest{{"dp", "data parallel (dp)", Cell::integer},
                              {"micro_batch", "micro-batch", Cell::integer},
                              {"grad_accum", "gradient accumulation", Cell::integer},
                              {"sharding", "sharding", Cell::text},
                              {"recompute", "recompute", Cell::text},
                              {"fits", "fits in memory", Cell::yes_no},
                              {"memory_per_gpu_gib", "memory per GPU (GiB)", Cell::fixed, 1},
                              {"memory.capacity_gib", "HBM capacity (GiB)", Cell::fixed, 1},
                              {"step_time_s", "step time (s)", Cell::fixed, 3},
                              {"tokens_per_s", "tokens/s (cluster)", Cell::integer},
                              {"tokens_per_s_per_gpu", "tokens/s per GPU", Cell::integer},
                              {"model_tflops_per_gpu", "model TFLOP/s per GPU", Cell::fixed, 1},
                              {"mfu", "MFU (causal, precision peak)", Cell::percent, 1},
                              {"days_to_train", "days (steady state)", Cell::fixed, 1},
                              {"expected_days", "days (expected, with checkpoints and failures)", Cell::fixed, 1},
                              {"gpu_hours", "GPU-hours", Cell::integer},
                              {"price_per_gpu_hour", "price per GPU-hour", Cell::money, 2},
                              // The money as a budget holder reads it (docs/report.md "Money"): what is
                              // charged, what of it the run uses, and the rest with why (bill_why).
                              {"cost", "cost as billed (whole billing units)", Cell::money, 0},
                              {"billed_units", "billed", Cell::billed},
                              {"cost_prorated", "cost pro-rated (the hours used)", Cell::money, 0},
                              {"unused_fraction", "unused share of the bill", Cell::percent, 1},
                              {"expected_cost", "cost as billed, expected wall clock", Cell::money, 0},
                              {"cost_per_million_tokens", "cost per million tokens (as billed)", Cell::money, 2},
                              {"energy_kwh", "energy (kWh, expected wall clock)", Cell::integer},
                              {"facility_power_kw", "average facility power (kW)", Cell::fixed, 2}};
    if (any_block) {
        // After "recompute": how many layers of each model chunk block recompute covers.
        const auto at = std::find_if(rest.begin(), rest.end(),
                                     [](const RowSpec& r) { return std::string_view(r.key) == "recompute"; });
        rest.insert(at + 1, {"recompute_layers", "layers recomputed per chunk", Cell::integer});
    }
    rows.insert(rows.end(), rest.begin(), rest.end());
    std::string s = fmt::format("<div class=\"scroll\"><table id=\"plans-table\">\n<thead><tr><th>{}</th>", tr("plan"));
    for (std::size_t i = 0; i < plans.size(); ++i)
        s += fmt::format("<th data-plan=\"{}\"{}>{}</th>", i, plans[i]["fits"].get<bool>() ? "" : " class=\"nofit\"",
                         esc(plans[i]["name"].get<std::string>()));
    s += "</tr></thead>\n<tbody>\n";
    for (const auto& r : rows) {
        s += fmt::format("<tr><th>{}</th>", esc(tr(r.label)));
        for (std::size_t i = 0; i < plans.size(); ++i)
            s += fmt::format("<td data-plan=\"{}\" data-key=\"{}\">{}</td>", i, r.key, esc(cell_text(plans[i], r, tr)));
        s += "</tr>\n";
        if (std::string_view(r.key) == "unused_fraction") {
            // Text, not a JSON field: data-note instead of data-key.
            s += fmt::format("<tr><th>{}</th>", tr("why the bill exceeds the hours used"));
            for (std::size_t i = 0; i < plans.size(); ++i)
                s += fmt::format("<td class=\"why\" data-plan=\"{}\" data-note=\"bill_why\">{}</td>", i,
                                 esc(bill_why(results[i].estimate, tr)));
            s += "</tr>\n";
        }
    }
    bool any_reason = false;
    for (const auto& p : plans) any_reason = any_reason || p.contains("reason");
    if (any_reason) {
        s += fmt::format("<tr><th>{}</th>", tr("note"));
        for (std::size_t i = 0; i < plans.size(); ++i) {
            if (plans[i].contains("reason"))
                // The JSON's reason (data-key), in the page's language.
                s += fmt::format("<td class=\"nofit\" data-plan=\"{}\" data-key=\"reason\">{}</td>", i,
                                 esc(no_fit_reason(*results[i].plan, results[i].estimate, tr)));
            else
                s += "<td></td>";
        }
        s += "</tr>\n";
    }
    s += "</tbody></table></div>\n";
    return s;
}

// ---- the sections ----

// Legend items with their labels in the page's language.
std::vector<LegendItem> translated(std::vector<LegendItem> items, const Translator& tr) {
    for (auto& it : items) it.label = std::string(tr(it.label));
    return items;
}

std::string breakdown_chart(const std::vector<PlanResult>& results, const Translator& tr) {
    const std::vector<LegendItem> seg = translated(
        {{"forward", color(0)},    {"backward", color(3)},   {"recompute", color(5)},
         {"optimizer", color(9)},  {"TP exposed", color(1)}, {"CP exposed", color(7)},
         {"DP exposed", color(2)}, {"PP exposed", color(6)}, {"pipeline bubble", color(8)},
         {"host-bound", color(4)}},
        tr);
    std::vector<BarRow> rows;
    for (const auto& r : results) {
        BarRow row;
        row.label = r.estimate.name;
        if (!r.estimate.step) {
            row.note = tr("does not fit in memory: not simulated");
            rows.push_back(row);
            continue;
        }
        const auto& b = r.estimate.step->breakdown;
        for (const Time t : {b.forward, b.backward, b.recompute, b.optimizer, b.tp_exposed, b.cp_exposed, b.dp_exposed,
                             b.pp_exposed, b.bubble, b.host_bound})
            row.values.push_back(t.seconds());
        row.value_text = fmt::format("{:.3f} s", r.estimate.step_time_s);
        rows.push_back(row);
    }
    return stacked_bars("chart-breakdown", std::string(tr("Step time breakdown of the critical rank")), seg, rows,
                        std::string(tr("seconds per step")), std::nullopt);
}

std::string memory_chart(const std::vector<PlanResult>& results, const Translator& tr) {
    const std::vector<LegendItem> seg = translated(
        {{"weights", color(0)},     {"gradients", color(3)},   {"optimizer", color(4)},
         {"activations", color(1)}, {"FP8 buffers", color(6)}, {"workspace", color(5)},
         {"reserved", color(9)}, {"optimizer-step temporaries beyond the activations", color(2)}},
        tr);
    std::vector<BarRow> rows;
    for (const auto& r : results) {
        const auto& m = r.estimate.memory;
        BarRow row;
        row.label = trf(tr, "{} (pipeline stage {})", r.estimate.name, m.stage);
        for (const Bytes b :
             {m.weights, m.gradients, m.optimizer, m.activations, m.fp8_buffers, m.workspace, m.reserved,
              // The step's temporaries replace the freed activations: only their excess adds.
              m.step_transient > m.activations ? m.step_transient - m.activations : Bytes(0)})
            row.values.push_back(to_gib(b));
        row.marker = to_gib(r.estimate.capacity);
        row.value_text = fmt::format("{:.1f} / {:.1f} GiB", to_gib(m.total()), to_gib(r.estimate.capacity));
        if (!r.estimate.fits) row.note = tr("does not fit");
        rows.push_back(row);
    }
    return stacked_bars("chart-memory", std::string(tr("Memory per GPU against HBM capacity")), seg, rows,
                        std::string(tr("GiB per GPU")), LegendItem{std::string(tr("HBM capacity")), "#b00020", true});
}

// One bar row per plan: `fill` sets the values of a simulated plan; a plan that does not fit
// gets a note instead.
template <class Fill>
std::vector<BarRow> plan_rows(const std::vector<PlanResult>& results, const Translator& tr, Fill&& fill) {
    std::vector<BarRow> rows;
    for (const auto& r : results) {
        BarRow row;
        row.label = r.estimate.name;
        if (!r.estimate.step) row.note = tr("does not fit in memory");
        else fill(r, row);
        rows.push_back(row);
    }
    return rows;
}

// The error bars of the days and cost charts, explained where they are drawn (docs/trust.md).
LegendItem band_legend(const Translator& tr) {
    return {std::string(tr("whisker: 80% band (p10 to p90), trainsim's error on published runs like the plan")), "#222",
            false, true};
}

std::string days_chart(const std::vector<PlanResult>& results, const Translator& tr) {
    const auto rows = plan_rows(results, tr, [&](const PlanResult& r, BarRow& row) {
        row.values = {r.estimate.days_to_train};
        if (r.estimate.run.first_order_valid) {
            row.marker = r.estimate.expected_days;
            row.value_text =
                trf(tr, "{:.1f} days ({:.1f} expected)", r.estimate.days_to_train, r.estimate.expected_days);
        } else {
            // Interrupted more often than a checkpoint interval: no expected figure (report.cpp).
            row.value_text = trf(tr, "{:.1f} days (expected: not estimated, failures too frequent)",
                                         r.estimate.days_to_train);
        }
        if (const auto& b = r.estimate.band)
            row.range = std::pair{r.estimate.days_to_train * b->time_p10, r.estimate.days_to_train * b->time_p90};
    });
    return stacked_bars("chart-days", std::string(tr("Days to train (error bar: 80% band, docs/trust.md)")),
                        {{std::string(tr("steady state (tokens / throughput)")), color(0)}}, rows,
                        std::string(tr("days")),
                        LegendItem{std::string(tr("expected: with checkpoints, failures and restarts")), "#222", true},
                        band_legend(tr), tr);
}

std::string cost_chart(const std::vector<PlanResult>& results, const Translator& tr) {
    std::set<std::string> currencies;
    const auto rows = plan_rows(results, tr, [&](const PlanResult& r, BarRow& row) {
        if (!r.estimate.priced) {
            row.note = tr("no price (pricing.rate)");
            return;
        }
        row.values = {r.estimate.cost};
        row.value_text = fmt::format("{} {}", grouped(r.estimate.cost, 0), r.estimate.currency);
        if (const auto& b = r.estimate.band)
            row.range = std::pair{r.estimate.bill_for_days(r.estimate.days_to_train * b->time_p10).cost,
                                  r.estimate.bill_for_days(r.estimate.days_to_train * b->time_p90).cost};
        currencies.insert(r.estimate.currency);
    });
    std::string unit(tr("cost"));
    if (currencies.size() == 1)
        unit = trf(tr, "cost ({})", *currencies.begin());
    else if (currencies.size() > 1)
        unit = tr("cost (mixed currencies: compare per plan)");
    return stacked_bars("chart-cost", std::string(tr("Cost of the training run")),
                        {{std::string(tr("as billed: whole billing units")), color(4)}}, rows, unit, std::nullopt,
                        band_legend(tr), tr);
}

// Days against cost, one point per plan that fits: the plans on the Pareto front (no other plan
// is at least as fast and as cheap, and better on one) are joined by a line, "8 or 64 GPUs?" at a
// glance. Empty when fewer than two plans have a cost.
std::string frontier_chart(const std::vector<PlanResult>& results, const Translator& tr) {
    struct Pt {
        std::size_t i;
        double days, cost;
        bool front = false;
    };
    std::vector<Pt> pts;
    for (std::size_t i = 0; i < results.size(); ++i) {
        const auto& e = results[i].estimate;
        if (e.fits && e.step && e.days_to_train > 0 && e.cost > 0) pts.push_back({i, e.days_to_train, e.cost});
    }
    if (pts.size() < 2) return {};
    for (auto& a : pts)
        a.front = std::none_of(pts.begin(), pts.end(), [&](const Pt& b) {
            return &b != &a && b.days <= a.days && b.cost <= a.cost && (b.days < a.days || b.cost < a.cost);
        });
    constexpr double left = 96, right = 24, top = 14, plot_h = 300;
    const double pw = kWidth - left - right;
    double dmax = 0, cmax = 0;
    for (const auto& p : pts) {
        dmax = std::max(dmax, p.days);
        cmax = std::max(cmax, p.cost);
    }
    const double dstep = nice_step(dmax, 6), cstep = nice_step(cmax, 5);
    dmax = std::ceil(dmax * 1.05 / dstep) * dstep;
    cmax = std::ceil(cmax * 1.05 / cstep) * cstep;
    auto xpos = [&](double d) { return left + d / dmax * pw; };
    auto ypos = [&](double c) { return top + plot_h * (1 - c / cmax); };
    const double bottom = top + plot_h;
    std::vector<Tick> yt, xt;
    for (double t = 0; t <= cmax + cstep / 2; t += cstep) yt.push_back({ypos(t), axis_num(t)});
    for (double t = 0; t <= dmax + dstep / 2; t += dstep) xt.push_back({xpos(t), axis_num(t)});
    std::string body = plot_frame(left, top, pw, bottom, yt, xt);
    body += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>", left + pw / 2, bottom + 36,
                        tr("days to train (steady state)"));
    body += fmt::format(
        "<text x=\"16\" y=\"{0:.1f}\" text-anchor=\"middle\" transform=\"rotate(-90 16 {0:.1f})\">{1}</text>",
        top + plot_h / 2, esc(trf(tr, "cost ({})", results[pts.front().i].estimate.currency)));
    std::vector<Pt> front;
    for (const auto& p : pts)
        if (p.front) front.push_back(p);
    std::sort(front.begin(), front.end(), [](const Pt& a, const Pt& b) { return a.days < b.days; });
    if (front.size() >= 2) {
        std::string coords;
        for (const auto& p : front) coords += fmt::format("{:.1f},{:.1f} ", xpos(p.days), ypos(p.cost));
        coords.pop_back();
        body += fmt::format(
            "<polyline class=\"front\" points=\"{}\" fill=\"none\" stroke=\"#222\" "
            "stroke-width=\"1.5\" stroke-dasharray=\"6 4\"/>",
            coords);
    }
    std::vector<LegendItem> items;
    for (const auto& p : pts) {
        const auto& r = results[p.i];
        body += fmt::format(
            "<circle class=\"{}\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\"{}><title>{}</title></circle>",
            p.front ? "plan front" : "plan", xpos(p.days), ypos(p.cost), p.front ? 7 : 5, color(p.i),
            p.front ? " stroke=\"#222\" stroke-width=\"2\"" : "",
            esc(trf(tr, "{}: {:.1f} days, {} {}", r.plan->name, p.days, grouped(p.cost, 0), r.estimate.currency)));
        items.push_back({fmt::format("{}{}", r.plan->name, p.front ? tr(" (on the front)") : ""), color(p.i)});
    }
    items.push_back({std::string(tr("Pareto front: no other plan both faster and cheaper")), "#222", true});
    const double ly = bottom + 50;
    const double h = ly + legend(body, items, ly) + 8;
    return fmt::format(
        "<svg id=\"chart-frontier\" role=\"img\" width=\"{0:.0f}\" height=\"{1:.0f}\" viewBox=\"0 0 {0:.0f} {1:.0f}\">"
        "<title>{3}</title>{2}</svg>\n",
        kWidth, h, body, tr("Days against cost: the plans on the Pareto front"));
}

std::string scaling_section(const std::vector<PlanResult>& results, const std::vector<ScalingSeries>& scaling,
                            json& scaling_json, const Translator& tr) {
    std::set<int> counts;
    for (const auto& s : scaling)
        for (const auto& p : s.points) counts.insert(p.gpus);
    std::vector<int> ticks(counts.begin(), counts.end());
    std::vector<LineSeries> tps, days;
    scaling_json = json::array();
    for (std::size_t i = 0; i < scaling.size(); ++i) {
        const auto& s = scaling[i];
        LineSeries a;
        a.label = fmt::format("{} [{}]", s.label, s.layout);
        a.color = color(i);
        for (std::size_t p : s.plans) a.own.insert(results[p].plan->num_gpus());
        LineSeries b = a;
        json pts = json::array();
        for (const auto& p : s.points) {
            json pj{{"gpus", p.gpus}, {"dp", p.dp}, {"valid", p.valid}, {"fits", p.fits}};
            if (p.valid) pj["memory_per_gpu_gib"] = p.memory_per_gpu_gib;
            if (p.fits) {
                pj["step_time_s"] = p.step_time_s;
                pj["tokens_per_s"] = p.tokens_per_s;
                pj["tokens_per_s_per_gpu"] = p.tokens_per_s_per_gpu;
                pj["days_to_train"] = p.days_to_train;
                pj["cost"] = p.cost ? json(*p.cost) : json(nullptr);
                a.points.emplace_back(p.gpus, p.tokens_per_s_per_gpu);
                b.points.emplace_back(p.gpus, p.days_to_train);
            } else {
                pj["reason"] = p.reason;
            }
            pts.push_back(pj);
        }
        json plan_names = json::array();
        for (std::size_t p : s.plans) plan_names.push_back(results[p].estimate.name);
        scaling_json.push_back({{"plans", plan_names}, {"layout", s.layout}, {"points", pts}});
        // Ideal linear scaling from the smallest count that fits: tokens/s per GPU stays,
        // days fall as 1 / GPUs.
        if (!a.points.empty()) {
            const auto [g0, t0] = a.points.front();
            const double d0 = b.points.front().second;
            const double g1 = a.points.back().first;
            a.ideal = {{g0, t0}, {g1, t0}};
            for (const auto& pt : b.points) b.ideal.emplace_back(pt.first, d0 * g0 / pt.first);
        }
        tps.push_back(std::move(a));
        days.push_back(std::move(b));
    }
    std::string s = line_chart("chart-scaling-throughput", std::string(tr("Throughput per GPU against GPU count")),
                               std::string(tr("tokens/s per GPU")), false, ticks, tps, tr);
    s += line_chart("chart-scaling-days", std::string(tr("Days to train against GPU count")),
                    std::string(tr("days to train (log scale)")), true, ticks, days, tr);
    // The same points as a table: a count that is missing could not be laid out or does not fit.
    s += fmt::format("<div class=\"scroll\"><table id=\"scaling-table\">\n<thead><tr><th>{}</th>", tr("tokens/s per GPU"));
    for (int g : ticks) s += trf(tr, "<th>{} GPUs</th>", g);
    s += "</tr></thead>\n<tbody>\n";
    for (std::size_t i = 0; i < scaling.size(); ++i) {
        s += fmt::format("<tr><th><span class=\"swatch\" style=\"background:{}\"></span>{}</th>", color(i),
                         esc(scaling[i].label));
        for (int g : ticks) {
            const auto& pts = scaling[i].points;
            const auto it = std::find_if(pts.begin(), pts.end(), [g](const ScalingPoint& p) { return p.gpus == g; });
            if (it == pts.end())
                s += "<td></td>";
            else if (it->fits)
                s += fmt::format("<td>{}</td>", grouped(it->tokens_per_s_per_gpu, 0));
            else
                // Why: memory in the page's language; a count the layout cannot take, the layout
                // check's diagnostic (scenario keys), as in the JSON.
                s += fmt::format("<td class=\"nofit\" title=\"{}\">{}</td>",
                                 esc(it->valid ? trf(tr, "needs {:.1f} GiB per GPU, the GPU has {:.1f} GiB",
                                                     it->memory_per_gpu_gib, it->capacity_gib)
                                               : it->reason),
                                 it->valid ? tr("no fit") : tr("invalid"));
        }
        s += "</tr>\n";
    }
    s += "</tbody></table></div>\n";
    return s;
}

// The report's own rules, after the shared page style (page_style.hpp).
constexpr std::string_view kCss = R"(
tbody th { white-space: nowrap; }
thead th { max-width: 220px; }
#scaling-table tbody th { white-space: normal; min-width: 260px; }
.nofit { color: #b00020; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 6px; }
svg text.label { font-weight: 600; }
svg text.nofit { fill: #b00020; }
)";

} // namespace

std::string html_report(const std::string& title, const std::string& scenario_file,
                        const std::vector<PlanResult>& results, const std::vector<ScalingSeries>& scaling,
                        const Translator& tr) {
    const json data = results_json(results);
    const json plans = data.contains("plans") ? data["plans"] : json::array({data});
    const std::string heading = title.empty() ? scenario_file : title;
    json scaling_json;
    const std::string scaling_html = scaling_section(results, scaling, scaling_json, tr);
    std::string s;
    s += fmt::format("<!DOCTYPE html>\n<html lang=\"{}\">\n<head>\n<meta charset=\"utf-8\">\n", lang_tag(tr.lang()));
    s += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
    s += fmt::format("<title>{}</title>\n<style>{}{}{}</style>\n</head>\n<body>\n",
                     esc(trf(tr, "trainsim report: {}", heading)), report_style::kPageCss, kCss,
                     report_style::lang_css(tr.lang()));
    s += fmt::format("<h1>{}</h1>\n", esc(heading));
    s += tr.english() ? fmt::format("<p class=\"meta\">trainsim report of <code>{}</code>: {} plan{}. Figures are "
                                    "simulated, not measured; definitions in the trainsim README and docs/report.md.</p>\n",
                                    esc(scenario_file), results.size(), results.size() == 1 ? "" : "s")
                      : trf(tr, "<p class=\"meta\">trainsim report of <code>{}</code>: {} plans. Figures are "
                                "simulated, not measured; definitions in the trainsim README and docs/report.md.</p>\n",
                            esc(scenario_file), results.size());

    s += tr("<section id=\"plans\">\n<h2>Plans side by side</h2>\n");
    s += plans_table(plans, results, tr);
    s += tr("<p class=\"note\">tokens/s per GPU = global batch x sequence length / (step time x GPUs). MFU: causal model "
         "FLOPs against the dense peak of the precision used. Days: tokens / throughput; the expected figure adds "
         "checkpoint writes, failures and restarts.</p>\n");
    s += tr("<p class=\"note\" id=\"money-note\">Money: the cost as billed is what the capacity is charged, in whole "
         "billing units of the plan's pricing (a commitment's whole terms, whole machine-months, or started hourly "
         "increments); pro-rated is the part of it that pays for the hours the run uses, and the unused share is the "
         "rest, with why beneath it.</p>\n</section>\n");

    s += tr("<section id=\"breakdown\">\n<h2>Step time breakdown</h2>\n");
    s += tr("<p class=\"note\">Where the critical rank's step time goes: compute kernels and the communication and "
         "pipeline waits that were not hidden behind them (the segments add up to the step time).</p>\n");
    s += breakdown_chart(results, tr);
    s += "</section>\n";

    s += tr("<section id=\"pipeline\">\n<h2>Pipeline schedule</h2>\n");
    s += tr("<p class=\"note\">Each pipelined plan's step as simulated, one row per pipeline stage (its first "
         "simulated rank): the boxes are the schedule's passes on the compute stream, from their first kernel's start "
         "to their last kernel's end, with the micro-batch number inside where it fits; F forward, B+W a whole "
         "backward, and for the zero-bubble schedules B the input-gradient and W the weight-gradient pass. A lighter "
         "box is an odd model chunk (interleaved and V schedules). The gaps are the bubble and the waits for "
         "transfers; the grey lane runs to the step's end (optimizer). Plans of one layout share a time axis "
         "(docs/model.md \"Pipeline schedules\").</p>\n");
    s += pipeline_timelines(results, tr);
    s += "</section>\n";

    s += tr("<section id=\"memory\">\n<h2>Memory per GPU</h2>\n");
    s += tr("<p class=\"note\">The peak pipeline stage, by kind; the dashed line is the GPU's HBM capacity. A plan past "
         "it is not simulated.</p>\n");
    s += memory_chart(results, tr);
    s += "</section>\n";

    s += tr("<section id=\"days-cost\">\n<h2>Days and cost</h2>\n");
    if (std::any_of(results.begin(), results.end(), [](const PlanResult& r) { return r.estimate.band.has_value(); }))
        s += tr("<p class=\"note\" id=\"band-legend\">The whiskers on the bars are each plan's 80% band, p10 to p90: "
             "trainsim's own error on published training runs like the plan (same framework family, GPU generation "
             "and scale), so 8 in 10 such runs took between the two ends (docs/trust.md). They measure the model's "
             "error, not run-to-run noise. The cost whisker is billed like the bar, in whole billing units, so a "
             "commitment that covers both ends has none.</p>\n");
    s += days_chart(results, tr);
    s += cost_chart(results, tr);
    if (const auto fc = frontier_chart(results, tr); !fc.empty()) {
        s += tr("<p class=\"note\">Days against cost: the plans joined by the dashed line are the Pareto front (no "
             "other plan of the scenario is both faster and cheaper); the others are beaten on both.</p>\n");
        s += fc;
    }
    s += "</section>\n";

    s += tr("<section id=\"scaling\">\n<h2>Scaling with data parallelism</h2>\n");
    s += tr("<p class=\"note\">Each plan's model-parallel layout (tp, pp, vp, cp), micro-batch, global batch, sharding "
         "and recompute kept; the data-parallel degree filled to each GPU count (whole nodes, as many GPUs per node "
         "as the plan). Counts the layout cannot fill are left out; plans that give the same line share it. Ideal "
         "linear scaling starts at the smallest count that fits.</p>\n");
    if (scaling.empty())
        s += tr("<p class=\"note\">Not computed (--no-scaling).</p>\n");
    else
        s += scaling_html;
    s += "</section>\n";

    s += fmt::format("<script type=\"application/json\" id=\"trainsim-data\">\n{}\n</script>\n", script_json(data));
    s += fmt::format("<script type=\"application/json\" id=\"trainsim-scaling\">\n{}\n</script>\n",
                     script_json(scaling_json));
    s += "</body>\n</html>\n";
    return s;
}

} // namespace trainsim::sim
