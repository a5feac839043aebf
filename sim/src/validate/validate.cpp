#include "trainsim/sim/validate/validate.hpp"

#include "trainsim/model/accounting/layout.hpp"
#include "trainsim/model/accounting/memory_model.hpp"
#include "trainsim/model/input/loader.hpp"
#include "trainsim/sim/report/report.hpp"
#include "trainsim/sim/run/estimate.hpp"
#include "trainsim/sim/search/parallel_for.hpp"
#include "trainsim/sim/search/plan_search.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

namespace trainsim::sim {

ErrorStats error_stats(const std::vector<double>& signed_errors_pct) {
    ErrorStats s;
    s.n = static_cast<int>(signed_errors_pct.size());
    if (s.n == 0) return s;
    std::vector<double> a;
    for (double e : signed_errors_pct) {
        a.push_back(std::abs(e));
        s.bias += e;
        s.mape += std::abs(e);
    }
    s.bias /= s.n;
    s.mape /= s.n;
    std::sort(a.begin(), a.end());
    s.median = quantile(a, 0.5);
    s.p90 = quantile(a, 0.9);
    s.max = a.back();
    std::vector<double> sorted = signed_errors_pct;
    std::sort(sorted.begin(), sorted.end());
    s.median_signed = quantile(sorted, 0.5);
    return s;
}

namespace {
// Blank tp / pp that the GPU count could not settle (two blank degrees, or dp blank too): the
// least model parallelism that fits, TP (inside the node) before PP, as Megatron's guidance
// has it (Narayanan et al. SC'21 Sec. 3.3: tensor parallelism up to the node size, then
// pipeline parallelism as the model needs). Checked with the most frugal blank settings
// (micro-batch 1, full recompute, no interleaving); the tuning then runs on the chosen degrees.
// Leaves the plan as it is when nothing fits.
model::Plan choose_blank_degrees(const model::ValidationRow& row, std::vector<std::string>& choices,
                                 std::vector<std::string>& still_defaulted) {
    model::Plan base = row.plan;
    still_defaulted = row.defaulted_degrees;
    if (row.defaulted_degrees.empty()) return base;
    auto is_free = [&](const char* d) {
        return std::find(row.defaulted_degrees.begin(), row.defaulted_degrees.end(), d) != row.defaulted_degrees.end();
    };
    const auto& m = base.model;
    const int gpus = base.num_gpus(), cp = base.parallel.cp;
    std::vector<int> tps{base.parallel.tp}, pps{base.parallel.pp};
    if (is_free("tp")) tps = divisors(base.cluster.gpus_per_node, base.cluster.gpus_per_node);
    if (is_free("pp")) pps = model::pipeline_depths(m.layers, gpus);
    std::vector<std::pair<int, int>> cands;
    for (int tp : tps)
        for (int pp : pps) {
            if (m.heads % tp != 0 || m.kv_heads % tp != 0 || gpus % (tp * pp * cp) != 0) continue;
            const int dp = gpus / (tp * pp * cp);
            if (!row.dp_blank && dp != row.plan.parallel.dp) continue;
            if (base.training.global_batch % dp != 0) continue;
            cands.emplace_back(tp, pp);
        }
    std::sort(cands.begin(), cands.end(), [](const auto& a, const auto& b) {
        return std::make_pair(a.first * a.second, a.second) < std::make_pair(b.first * b.second, b.second);
    });
    const auto fw = model::framework_profile(row.framework);
    for (const auto& [tp, pp] : cands) {
        model::Plan p = base;
        p.parallel.tp = tp;
        p.parallel.pp = pp;
        p.parallel.dp = gpus / (tp * pp * cp);
        // The framework's degree-dependent behaviours follow the new tp (sequence parallelism
        // only where the row left it blank).
        model::apply_framework_profile(fw, p, [&](std::string_view key) {
            return key != "parallel.tp_comm_overlap" &&
                   (key != "parallel.sequence_parallel" || !row.sequence_parallel_blank);
        });
        if (row.vp_cell_blank) p.parallel.vp = 1;
        model::Plan frugal = p;
        if (row.micro_batch_blank) frugal.training.micro_batch = 1;
        if (row.recompute_blank) {
            frugal.parallel.recompute = model::Recompute::full;
            frugal.parallel.recompute_layers = 0;
        }
        if (!model::check_layout(frugal).empty()) continue;
        if (model::peak_memory(frugal).total() > frugal.hardware.hbm_capacity) continue;
        // The load's "tp=1 (blank)" and "dp=N (blank: ...)" give way to the degrees chosen here.
        std::erase_if(choices, [&](const std::string& c) {
            return c.starts_with("dp=") || std::any_of(row.defaulted_degrees.begin(), row.defaulted_degrees.end(),
                                                       [&](const std::string& d) { return c == d + "=1 (blank)"; });
        });
        choices.push_back(fmt::format("tp={} pp={} dp={} (blank {}: the least model parallelism that fits, TP first)",
                                      tp, pp, p.parallel.dp, fmt::join(row.defaulted_degrees, ", ")));
        // A blank sequence_parallel was chosen at the load's tp; say what the chosen tp gives.
        if (row.sequence_parallel_blank) {
            std::erase_if(choices, [](const std::string& c) { return c.starts_with("sequence_parallel="); });
            choices.push_back(fmt::format("sequence_parallel={} (blank: {} at tp={})", p.parallel.sequence_parallel,
                                          fw.name, tp));
        }
        still_defaulted.clear();
        return p;
    }
    return base;
}
} // namespace

model::Plan tune_blank_cells(const model::ValidationRow& row, std::vector<std::string>& choices,
                             std::vector<std::string>* defaulted) {
    std::vector<std::string> still_defaulted;
    model::Plan best = choose_blank_degrees(row, choices, still_defaulted);
    if (defaulted != nullptr) *defaulted = still_defaulted;
    const auto fw = model::framework_profile(row.framework);
    // A blank sharding (after the degrees: the least model parallelism that fits was chosen at
    // the framework's default sharding): when the default does not fit, the framework's least
    // sharding that does. With one data-parallel rank ZeRO shards nothing, so it stays.
    if (row.sharding_blank && !fw.blank_sharding_fallbacks.empty() && best.parallel.dp * best.parallel.cp > 1 &&
        !model::fits_in_memory(best, model::peak_memory(best)))
        for (const auto s : fw.blank_sharding_fallbacks) {
            model::Plan p = best;
            p.parallel.sharding = s;
            if (!model::check_layout(p).empty() || !model::fits_in_memory(p, model::peak_memory(p))) continue;
            const auto it = std::find_if(choices.begin(), choices.end(),
                                         [](const std::string& c) { return c.starts_with("sharding="); });
            const std::string why = fmt::format("sharding={} (blank: the least sharding of {} that fits, its default {} "
                                                "does not)",
                                                model::to_string(s), fw.name, model::to_string(best.parallel.sharding));
            if (it != choices.end()) *it = why;
            else choices.push_back(why);
            best = p;
            break;
        }
    const model::Plan chosen = best;
    const bool vp_blank = row.vp_cell_blank && chosen.parallel.pp > 1 && fw.tune_blank_vp;
    // A framework that splits the batch into one micro-batch per pipeline stage by default (the
    // whole batch at once without pipelining) rather than a tuned size.
    const bool per_stage_mb = row.micro_batch_blank && fw.microbatch_per_stage;
    if (!row.micro_batch_blank && !row.recompute_blank && !vp_blank) return best;
    // A published benchmark was tuned: among the micro-batch sizes that divide the per-rank batch
    // (blank micro_batch) and the recompute policies (blank recompute, cheapest first), take the
    // plan that fits in memory with the highest throughput.
    const int per_rank = chosen.training.global_batch / chosen.parallel.dp;
    std::vector<int> mbs{chosen.training.micro_batch};
    if (row.micro_batch_blank && !per_stage_mb) {
        mbs.clear();
        for (int m = 1; m <= std::min(per_rank, 16); ++m)
            if (per_rank % m == 0) mbs.push_back(m);
    }
    std::vector<model::Recompute> policies{chosen.parallel.recompute};
    if (row.recompute_blank) {
        policies = {model::Recompute::none, model::Recompute::selective, model::Recompute::full};
        // A framework whose default is a stronger policy starts there.
        policies.erase(policies.begin(), std::find(policies.begin(), policies.end(), chosen.parallel.recompute));
    }
    // Blank vp with pipelining: every interleaving depth that splits the layers evenly over the
    // chunks (or, when they do not divide, the layers with the embedding and the loss counted as
    // one each, model::chunk_layers) and leaves no chunk empty, as a tuned benchmark would have
    // picked.
    std::vector<int> vps{chosen.parallel.vp};
    if (vp_blank) {
        vps = model::interleavings(chosen.model.layers, chosen.parallel.pp);
        if (vps.empty()) vps.push_back(1);
    }
    if (per_stage_mb) {
        mbs.clear();
        for (int v : vps) {
            const int stages = chosen.parallel.pp * v;
            if (per_rank % stages == 0 && std::find(mbs.begin(), mbs.end(), per_rank / stages) == mbs.end())
                mbs.push_back(per_rank / stages);
        }
    }
    double best_tps = -1;
    for (auto rc : policies) {
        for (int m : mbs) for (int v : vps) {
                if (per_stage_mb && m * chosen.parallel.pp * v != per_rank) continue;
                model::Plan p = chosen;
                p.training.micro_batch = m;
                p.parallel.recompute = rc;
                p.parallel.vp = v;
                if (!model::check_layout(p).empty()) continue;
                // A tuned benchmark that must recompute recomputes as few layers as fit (block recompute).
                if (row.recompute_blank && rc == model::Recompute::full && fw.block_recompute)
                    p.parallel.recompute_layers = model::fewest_recompute_layers(p);
                const auto e = estimate_plan(p);
                if (!e.fits) continue;
                if (e.tokens_per_s_per_gpu > best_tps) {
                    best_tps = e.tokens_per_s_per_gpu;
                    best = p;
            }
        }
        if (best_tps > 0) break; // the cheapest policy that fits wins; stronger ones only cost time
    }
    if (per_stage_mb)
        choices.push_back(
            fmt::format("micro_batch={} (blank: one micro-batch per pipeline stage, the framework's "
                        "default{})",
                        best.training.micro_batch, best_tps < 0 ? "; none fits, kept 1" : ""));
    else if (row.micro_batch_blank)
        choices.push_back(
            fmt::format("micro_batch={} (blank: the best-throughput size that fits, as the benchmark was "
                        "tuned{})",
                        best.training.micro_batch, best_tps < 0 ? "; none fits, kept 1" : ""));
    if (vp_blank)
        choices.push_back(fmt::format("vp={} (blank: the best-throughput interleaving that fits{})", best.parallel.vp,
                                      best_tps < 0 ? "; none fits, kept 1" : ""));
    if (row.recompute_blank)
        choices.push_back(fmt::format("recompute={} (blank: the cheapest policy that fits{}{})",
                                      model::recompute_label(best),
                                      policies.front() != model::Recompute::none
                                          ? fmt::format(", from the framework's default {}",
                                                        model::to_string(policies.front()))
                                          : "",
                                      best_tps < 0 ? "; none fits, kept the framework default" : ""));
    return best;
}

BandStats band_stats(const std::vector<const RowResult*>& rows) {
    BandStats b;
    std::vector<double> widths;
    int inside = 0;
    for (const auto* r : rows) {
        if (!r->has_band) continue;
        inside += r->measured >= r->predicted_p10 && r->measured <= r->predicted_p90 ? 1 : 0;
        widths.push_back(r->predicted_p90 / r->predicted_p10 - 1.0);
    }
    b.rows = static_cast<int>(widths.size());
    if (widths.empty()) return b;
    std::sort(widths.begin(), widths.end());
    b.coverage = static_cast<double>(inside) / static_cast<double>(widths.size());
    b.median_width = widths.size() % 2 == 1 ? widths[widths.size() / 2]
                                            : 0.5 * (widths[widths.size() / 2 - 1] + widths[widths.size() / 2]);
    return b;
}

ValidationReport validate_rows(const std::vector<model::ValidationRow>& rows, const std::string& kind, unsigned threads,
                               const ErrorModel* bands, const std::function<void(std::size_t, std::size_t)>& progress,
                               const RowHook& row_hook, const std::vector<std::string>& in_fit) {
    ValidationReport rep;
    rep.rows.resize(rows.size());
    const std::unordered_set<std::string_view> fitted(in_fit.begin(), in_fit.end());
    auto one_row = [&](std::size_t i) {
        const auto& row = rows[i];
        RowResult& r = rep.rows[i];
        r.id = row.id;
        r.line = row.line;
        // A skipped row says why, of what kind and which column (name and number).
        auto skip = [&](std::string why_kind, const std::string& column, std::string reason) {
            r.status = "skipped";
            r.skip_kind = std::move(why_kind);
            r.column = column;
            r.column_number = row.column_number(column);
            r.reason = std::move(reason);
        };
        r.in_fit = fitted.contains(row.id);
        r.measured = row.measured_tokens_per_s_per_gpu;
        r.gpu = row.gpu;
        r.precision = model::to_string(row.plan.precision);
        r.source_group = row.source_group;
        r.kind = row.kind;
        r.choices = row.choices;
        r.cluster_origin = row.cluster_origin;
        if (!row.skip_reason.empty()) {
            skip(row.skip_kind.empty() ? std::string("cannot be simulated") : row.skip_kind, row.skip_column,
                 row.skip_reason);
            return;
        }
        if (!kind.empty() && row.kind != kind) {
            skip("kind not selected (--kind)", "kind", fmt::format("kind '{}' not selected (--kind {})", row.kind, kind));
            return;
        }
        // Memory is reported but not enforced: a measured run fits by definition, so a
        // "does not fit" verdict flags a memory-model error while the row is still compared.
        std::vector<std::string> defaulted;
        const model::Plan plan = tune_blank_cells(row, r.choices, &defaulted);
        if (const auto problems = model::check_layout(plan); !problems.empty()) {
            // Blank degrees for which no layout fits, left at the default 1 that the row's other
            // cells rule out.
            std::string reason = fmt::format("blank {}: no layout fits; with the default 1:", fmt::join(defaulted, ", "));
            for (const auto& prob : problems) reason += " " + prob.key + ": " + prob.message + ";";
            reason.pop_back();
            skip("blank degrees: no layout fits", defaulted.empty() ? std::string() : defaulted.front(),
                 std::move(reason));
            return;
        }
        auto e = estimate_plan(plan, {}, /*simulate_even_if_too_big=*/true);
        if (!e.fits && !defaulted.empty()) {
            skip("blank degrees: the default layout does not fit", defaulted.front(),
                 fmt::format("blank {}: the frameworks' default layout ({}) needs {:.1f} GiB > {:.1f} GiB on "
                             "stage {}; the source's layout is needed",
                             fmt::join(row.defaulted_degrees, ", "), layout_label(plan),
                             model::to_gib(e.memory.total()), model::to_gib(e.capacity), e.memory.stage));
            return;
        }
        r.predicted = e.tokens_per_s_per_gpu;
        if (e.step) {
            r.has_step = true;
            r.step_time_s = e.step->step_time.seconds();
            r.host_busy_s = e.step->host_busy.seconds();
            r.breakdown = e.step->breakdown;
        }
        r.regime = regime_of(plan, e.step ? &*e.step : nullptr);
        r.features = features_of(plan);
        const auto& par = plan.parallel;
        r.layout = {par.tp, par.pp, par.vp, par.cp, par.dp, plan.training.micro_batch, plan.grad_accum(),
                    plan.num_gpus(), plan.training.seq_len,
                    static_cast<double>(plan.training.global_batch) * plan.training.seq_len / plan.num_gpus(),
                    model::to_string(par.sharding), model::recompute_label(plan),
                    par.framework.empty() ? std::string("(none)") : par.framework};
        if (row.kind == "end_to_end") {
            // Whole-run totals also pay slowdowns, checkpoint writes, work lost to failures,
            // planned stops and restarts: the run model's expected wall clock over the steady one
            // (docs/model.md, "Whole run"), with the default run settings (Llama 3's published
            // interruption table, planned stops, effective training time and diurnal variation;
            // ByteDance's straggler waste; BLOOM's evaluation pauses), the same for every row, as the
            // rows give none.
            const auto& run = e.run;
            r.predicted = e.tokens_per_s_per_gpu / run.overhead_factor;
            r.choices.push_back(fmt::format(
                "end_to_end: steady {:.0f} tokens/s/GPU / {:.4f} (run model with default run settings: x{:.3f} "
                "slowdowns, stragglers and evaluations, a {:.2g} s checkpoint write every {:.0f} min, cluster MTBF {:.1f} h, a planned stop every "
                "{:.1f} h, {:.0f} min per restart)",
                e.tokens_per_s_per_gpu, run.overhead_factor, run.stretch, run.checkpoint_write_s,
                run.checkpoint_interval_s / 60.0, run.cluster_mtbf_s / 3600.0, run.planned_interval_s / 3600.0,
                run.restart_s / 60.0));
        }
        r.error_pct = (r.predicted - r.measured) / r.measured * 100.0;
        if (bands != nullptr) {
            const auto b = band_for(*bands, plan, e.step ? &*e.step : nullptr);
            r.has_band = true;
            r.predicted_p10 = r.predicted / b.time_p90;
            r.predicted_p90 = r.predicted / b.time_p10;
            r.out_of_domain = b.out_of_domain;
        }
        if (row_hook) row_hook(plan, e, r);
        if (!e.fits) {
            r.status = "does_not_fit";
            r.reason = fmt::format(
                "memory model says {:.1f} GiB > {:.1f} GiB on stage {} although the run "
                "was measured: a memory-model error",
                model::to_gib(e.memory.total()), model::to_gib(e.capacity), e.memory.stage);
        } else {
            r.status = "ok";
        }
    };
    // Rows with the same plan key (the cells the plan follows from) are simulated once: the first of
    // them runs, the others take its result with their own id, line, group and measurement. A file
    // of 100k rows of a few shapes is then a few simulations (bench/bench_validate.cpp).
    std::vector<std::size_t> first_of(rows.size());
    std::vector<std::size_t> simulated;
    {
        std::unordered_map<std::string_view, std::size_t> first;
        for (std::size_t i = 0; i < rows.size(); ++i) {
            first_of[i] = i;
            if (!rows[i].plan_key.empty()) first_of[i] = first.emplace(rows[i].plan_key, i).first->second;
            if (first_of[i] == i) simulated.push_back(i);
        }
    }
    std::mutex progress_mu;
    std::size_t done = 0;
    parallel_for(simulated.size(), threads, [&](std::size_t k) {
        one_row(simulated[k]);
        if (!progress) return;
        std::lock_guard lock(progress_mu);
        progress(++done, simulated.size());
    });
    for (std::size_t i = 0; i < rows.size(); ++i) {
        if (first_of[i] == i) continue;
        const auto& row = rows[i];
        RowResult& r = rep.rows[i];
        r = rep.rows[first_of[i]];
        r.id = row.id;
        r.line = row.line;
        r.in_fit = fitted.contains(row.id);
        r.measured = row.measured_tokens_per_s_per_gpu;
        r.source_group = row.source_group;
        if (r.status != "skipped") r.error_pct = (r.predicted - r.measured) / r.measured * 100.0;
    }

    std::vector<double> all;
    std::map<std::string, std::vector<double>> gp, sg, kd;
    for (const auto& r : rep.rows) {
        if (r.status == "skipped") {
            ++rep.skipped;
            continue;
        }
        if (r.in_fit) {
            ++rep.in_fit;
            continue;
        }
        if (r.status == "does_not_fit") ++rep.does_not_fit;
        all.push_back(r.error_pct);
        gp[r.gpu + " " + r.precision].push_back(r.error_pct);
        sg[r.source_group].push_back(r.error_pct);
        kd[r.kind].push_back(r.error_pct);
    }
    rep.overall = error_stats(all);
    if (bands != nullptr) {
        std::vector<const RowResult*> compared;
        for (const auto& r : rep.rows)
            if (r.status != "skipped" && !r.in_fit) compared.push_back(&r);
        const auto b = band_stats(compared);
        rep.has_bands = b.rows > 0;
        rep.coverage = b.coverage;
        rep.median_width = b.median_width;
    }
    for (const auto& [k, v] : gp) rep.by_gpu_precision[k] = error_stats(v);
    for (const auto& [k, v] : sg) rep.by_source_group[k] = error_stats(v);
    for (const auto& [k, v] : kd) rep.by_kind[k] = error_stats(v);
    return rep;
}

std::vector<ErrorSample> error_samples(const std::vector<model::ValidationRow>& rows, const std::string& file_name,
                                       bool held_out, unsigned threads) {
    std::vector<ErrorSample> out;
    const auto rep = validate_rows(rows, "step", threads);
    for (const auto& r : rep.rows) {
        if (r.status == "skipped") continue;
        out.push_back({file_name, r.source_group, r.regime, r.features, r.error_pct / 100.0, held_out});
    }
    return out;
}

std::vector<FileCoverage> cross_validate_bands(const std::vector<PublishedFile>& files, unsigned threads) {
    std::vector<std::vector<ErrorSample>> samples;
    for (const auto& f : files) samples.push_back(error_samples(f.rows, f.name, f.held_out, threads));
    auto pooled = [&](std::size_t skip) {
        std::vector<ErrorSample> out;
        for (std::size_t i = 0; i < samples.size(); ++i)
            if (i != skip) out.insert(out.end(), samples[i].begin(), samples[i].end());
        return out;
    };
    // Each table as it would ship (its quantiles rounded as error_model_json writes them), so the
    // in-sample coverage is the one `validate` reads with the committed table: rows at a band's
    // edge (a quantile is often a row's own error) fall the same side.
    auto shipped = [](const std::vector<ErrorSample>& s) {
        return error_model_from_json(error_model_json(build_error_model(s)), "(rebuilt table)");
    };
    const ErrorModel all = shipped(pooled(files.size()));
    auto coverage = [&](const PublishedFile& f, const ErrorModel& m) {
        const auto rep = validate_rows(f.rows, "step", threads, &m);
        std::vector<const RowResult*> compared;
        for (const auto& r : rep.rows)
            if (r.status != "skipped" && !r.in_fit) compared.push_back(&r);
        return band_stats(compared);
    };
    std::vector<FileCoverage> out;
    for (std::size_t i = 0; i < files.size(); ++i) {
        FileCoverage c;
        c.file = files[i].name;
        c.rows = static_cast<int>(samples[i].size());
        const auto others = pooled(i);
        c.left_out_basis = static_cast<int>(others.size());
        c.in_sample = coverage(files[i], all);
        // With fewer other rows than a band needs there is no table to judge the file by.
        if (static_cast<int>(others.size()) >= kMinRegimeRows) c.left_out = coverage(files[i], shipped(others));
        out.push_back(std::move(c));
    }
    return out;
}

namespace {
nlohmann::json stats_json(const ErrorStats& s) {
    return {{"n", s.n},
            {"mape_pct", s.mape},
            {"median_abs_pct", s.median},
            {"p90_abs_pct", s.p90},
            {"max_abs_pct", s.max},
            {"bias_pct", s.bias},
            {"median_signed_pct", s.median_signed}};
}
} // namespace

nlohmann::json report_json(const ValidationReport& r) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& x : r.rows) {
        nlohmann::json j{{"id", x.id},
                         {"line", x.line},
                         {"status", x.status},
                         {"in_fit", x.in_fit},
                         {"measured_tokens_per_s_per_gpu", x.measured},
                         {"reason", x.reason},
                         {"choices", x.choices},
                         {"cluster_origin",
                          {{"gpus_per_node", x.cluster_origin.gpus_per_node},
                           {"nics_per_node", x.cluster_origin.nics_per_node},
                           {"nic_rate", x.cluster_origin.nic_rate}}}};
        if (x.status == "skipped") {
            j["predicted_tokens_per_s_per_gpu"] = nullptr;
            j["error_pct"] = nullptr;
            j["reason_kind"] = x.skip_kind;
            j["column"] = x.column.empty() ? nlohmann::json(nullptr) : nlohmann::json(x.column);
            j["column_number"] = x.column_number > 0 ? nlohmann::json(x.column_number) : nlohmann::json(nullptr);
        } else {
            j["predicted_tokens_per_s_per_gpu"] = x.predicted;
            j["error_pct"] = x.error_pct;
            j["regime"] = x.regime.key();
            if (x.has_step) {
                j["step_time_s"] = x.step_time_s;
                j["host_busy_s"] = x.host_busy_s;
                j["breakdown"] = breakdown_json(x.breakdown);
            }
            if (x.has_band) {
                j["predicted_p10"] = x.predicted_p10;
                j["predicted_p90"] = x.predicted_p90;
                j["out_of_domain"] = x.out_of_domain;
            }
        }
        rows.push_back(j);
    }
    nlohmann::json summary = stats_json(r.overall);
    summary["skipped"] = r.skipped;
    summary["does_not_fit"] = r.does_not_fit;
    summary["in_fit"] = r.in_fit;
    for (const auto& [k, v] : r.by_gpu_precision) summary["by_gpu_precision"][k] = stats_json(v);
    for (const auto& [k, v] : r.by_source_group) summary["by_source_group"][k] = stats_json(v);
    for (const auto& [k, v] : r.by_kind) summary["by_kind"][k] = stats_json(v);
    if (r.has_bands) {
        summary["band_coverage"] = r.coverage;
        summary["band_median_width"] = r.median_width;
    }
    return {{"rows", rows}, {"summary", summary}};
}

namespace {
// One key's value for a row: a sort key (numbers ascending, then text), its label, and whether
// it is a count (JSON gives a count as a number, a bucket or a name as text).
struct GroupValue {
    double order = 0;
    std::string label;
    bool count = false;
    auto operator<=>(const GroupValue& o) const { return std::tie(order, label) <=> std::tie(o.order, o.label); }
    bool operator==(const GroupValue& o) const { return order == o.order && label == o.label; }
};

GroupValue count(int v) { return {static_cast<double>(v), std::to_string(v), true}; }
GroupValue text(const std::string& v) { return {0.0, v, false}; }

// `v` in the first bucket whose upper edge (inclusive) holds it; the last edge is open.
template <std::size_t N>
GroupValue bucket(double v, const std::array<std::pair<double, const char*>, N>& edges) {
    for (const auto& [edge, label] : edges)
        if (v <= edge) return {edge, label, false};
    return {edges.back().first, edges.back().second, false};
}

// Tokens per GPU per step in factor-of-4 buckets: few tokens per GPU mean short kernels, where the
// host and the per-kernel fixed costs weigh most (docs/accuracy.md).
constexpr std::array<std::pair<double, const char*>, 5> kTokenBuckets{
    {{2048, "<=2k"}, {8192, "2k-8k"}, {32768, "8k-32k"}, {131072, "32k-128k"}, {1e300, ">128k"}}};
// Model parameters in factor-of-~3 buckets: small models mean small kernels per token.
constexpr std::array<std::pair<double, const char*>, 6> kParamBuckets{
    {{1e9, "<=1B"}, {3e9, "1-3B"}, {10e9, "3-10B"}, {30e9, "10-30B"}, {100e9, "30-100B"}, {1e300, ">100B"}}};
// The share of the step the GPU waited for its host thread (edges exclusive above: 1% is "1-10%").
GroupValue host_bound(const RowResult& r) {
    const double share = r.has_step && r.step_time_s > 0 ? r.breakdown.host_bound.seconds() / r.step_time_s : 0.0;
    if (share < 0.01) return {0, "<1%", false};
    if (share < 0.10) return {1, "1-10%", false};
    return {2, ">=10%", false};
}

// Every --by key and how a row gives its value, in the order the help lists them.
using GroupKey = std::pair<const char*, GroupValue (*)(const RowResult&)>;
const std::vector<GroupKey>& group_key_table() {
    static const std::vector<GroupKey> table{
        {"tp", [](const RowResult& r) { return count(r.layout.tp); }},
        {"pp", [](const RowResult& r) { return count(r.layout.pp); }},
        {"vp", [](const RowResult& r) { return count(r.layout.vp); }},
        {"cp", [](const RowResult& r) { return count(r.layout.cp); }},
        {"dp", [](const RowResult& r) { return count(r.layout.dp); }},
        {"micro_batch", [](const RowResult& r) { return count(r.layout.micro_batch); }},
        {"grad_accum", [](const RowResult& r) { return count(r.layout.grad_accum); }},
        {"num_gpus", [](const RowResult& r) { return count(r.layout.gpus); }},
        {"seq_len", [](const RowResult& r) { return count(r.layout.seq_len); }},
        {"tokens_per_gpu", [](const RowResult& r) { return bucket(r.layout.tokens_per_gpu, kTokenBuckets); }},
        {"host_bound", host_bound},
        {"params", [](const RowResult& r) { return bucket(r.features.params, kParamBuckets); }},
        {"sharding", [](const RowResult& r) { return text(r.layout.sharding); }},
        {"recompute", [](const RowResult& r) { return text(r.layout.recompute); }},
        {"framework", [](const RowResult& r) { return text(r.layout.framework); }},
        {"gpu", [](const RowResult& r) { return text(r.gpu); }},
        {"precision", [](const RowResult& r) { return text(r.precision); }},
        {"source_group", [](const RowResult& r) { return text(r.source_group); }},
        {"kind", [](const RowResult& r) { return text(r.kind); }},
        {"regime", [](const RowResult& r) { return text(r.regime.key()); }},
    };
    return table;
}
} // namespace

const std::vector<std::string>& group_keys() {
    static const std::vector<std::string> keys = [] {
        std::vector<std::string> k;
        for (const auto& [name, value] : group_key_table()) k.emplace_back(name);
        return k;
    }();
    return keys;
}

std::vector<std::string> parse_group_spec(const std::string& spec) {
    std::vector<std::string> keys;
    for (std::size_t start = 0;;) {
        const auto end = spec.find(':', start);
        keys.push_back(spec.substr(start, end == std::string::npos ? std::string::npos : end - start));
        if (end == std::string::npos) break;
        start = end + 1;
    }
    for (auto it = keys.begin(); it != keys.end(); ++it) {
        if (std::find(group_keys().begin(), group_keys().end(), *it) == group_keys().end())
            throw std::invalid_argument(fmt::format("unknown key '{}'{} (one of {}, or several joined by ':')", *it,
                                                    model::did_you_mean(*it, group_keys()),
                                                    fmt::join(group_keys(), ", ")));
        if (std::find(keys.begin(), it, *it) != it) throw std::invalid_argument(fmt::format("key '{}' given twice", *it));
    }
    return keys;
}

std::vector<ErrorGroup> group_errors(const ValidationReport& r, const std::string& spec) {
    const auto keys = parse_group_spec(spec);
    std::vector<GroupValue (*)(const RowResult&)> getters;
    for (const auto& k : keys)
        getters.push_back(std::find_if(group_key_table().begin(), group_key_table().end(),
                                       [&](const GroupKey& g) { return k == g.first; })
                              ->second);
    std::map<std::vector<GroupValue>, std::vector<const RowResult*>> groups;
    for (const auto& row : r.rows) {
        if (row.status == "skipped" || row.in_fit) continue;
        std::vector<GroupValue> values;
        for (auto* get : getters) values.push_back(get(row));
        groups[values].push_back(&row);
    }
    std::vector<ErrorGroup> out;
    for (const auto& [values, rows] : groups) {
        ErrorGroup g;
        for (std::size_t i = 0; i < keys.size(); ++i) {
            g.label += fmt::format("{}{}={}", i == 0 ? "" : " ", keys[i], values[i].label);
            g.values.push_back({keys[i], values[i].label, values[i].count});
        }
        std::vector<double> errors;
        for (const auto* row : rows) errors.push_back(row->error_pct);
        g.stats = error_stats(errors);
        g.bands = band_stats(rows);
        out.push_back(std::move(g));
    }
    return out;
}

std::string stats_line(const std::string& name, const ErrorStats& st, std::size_t width) {
    return fmt::format("  {:<{}} n={:<3} MAPE {:5.1f}%  median {:5.1f}%  p90 {:5.1f}%  max {:5.1f}%  bias {:+5.1f}%\n",
                       name, width, st.n, st.mape, st.median, st.p90, st.max, st.bias);
}

std::string groups_text(const std::string& spec, const std::vector<ErrorGroup>& groups) {
    std::size_t width = 34;
    for (const auto& g : groups) width = std::max(width, g.label.size());
    std::string s = fmt::format(
        "by {} (of the simulated plans; median and p90 of |error|; bias = mean signed error, then the median "
        "signed):\n",
        spec);
    for (const auto& g : groups) {
        auto line = stats_line(g.label, g.stats, width);
        line.pop_back(); // the newline
        s += fmt::format("{}  signed median {:+5.1f}%", line, g.stats.median_signed);
        if (g.bands.rows > 0)
            s += fmt::format("  in band {:3.0f}% (width {:.0f}%)", 100 * g.bands.coverage, 100 * g.bands.median_width);
        s += "\n";
    }
    return s;
}

nlohmann::json groups_json(const std::vector<ErrorGroup>& groups) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& g : groups) {
        nlohmann::json o = stats_json(g.stats);
        o["label"] = g.label;
        if (g.bands.rows > 0) {
            o["band_coverage"] = g.bands.coverage;
            o["band_median_width"] = g.bands.median_width;
        }
        // Each key's value, a number where the key counts something (tp, micro_batch, ...), else
        // its text (a bucket such as "2k-8k", a sharding, a framework).
        for (const auto& v : g.values) o[v.key] = v.count ? nlohmann::json(std::stol(v.value)) : nlohmann::json(v.value);
        j.push_back(std::move(o));
    }
    return j;
}

std::string skipped_where(const RowResult& r) {
    std::string s = fmt::format("line {}", r.line);
    if (!r.column.empty())
        s += r.column_number > 0 ? fmt::format(", column {} ({})", r.column_number, r.column)
                                 : fmt::format(", column {}", r.column);
    return s;
}

std::string nothing_compared_text(const ValidationReport& r, const std::string& file) {
    std::string s = fmt::format("{}: no row was compared ({} rows, {} skipped", file, r.rows.size(), r.skipped);
    if (r.in_fit > 0) s += fmt::format(", {} runs of the fit", r.in_fit);
    s += ")";
    if (r.rows.empty()) return s + ": the file has no data rows under its header\n";
    s += ":\n";
    // Each kind of reason, in the order first met: how many rows, and the first few of them.
    constexpr std::size_t kShown = 3;
    std::vector<std::pair<std::string, std::vector<const RowResult*>>> kinds;
    for (const auto& row : r.rows) {
        const std::string kind = row.status == "skipped" ? (row.skip_kind.empty() ? "skipped" : row.skip_kind)
                                 : row.in_fit           ? "a run of the fit (--fit-on): left out of the summary"
                                                        : std::string();
        if (kind.empty()) continue;
        auto it = std::find_if(kinds.begin(), kinds.end(), [&](const auto& k) { return k.first == kind; });
        if (it == kinds.end()) {
            kinds.emplace_back(kind, std::vector<const RowResult*>{});
            it = kinds.end() - 1;
        }
        it->second.push_back(&row);
    }
    for (const auto& [kind, rows] : kinds) {
        s += fmt::format("  {} row{}: {}; e.g.", rows.size(), rows.size() == 1 ? "" : "s", kind);
        for (std::size_t i = 0; i < std::min(rows.size(), kShown); ++i) {
            const auto& row = *rows[i];
            s += fmt::format("{} id {} ({}{}{})", i == 0 ? "" : ";", row.id, skipped_where(row),
                             row.reason.empty() ? "" : ": ", row.reason);
        }
        if (rows.size() > kShown) s += fmt::format("; and {} more", rows.size() - kShown);
        s += "\n";
    }
    return s;
}

std::string report_text(const ValidationReport& r, bool verbose) {
    std::string s = fmt::format("{:>5}  {:<14} {:<22} {:>11} {:>11} {:>8}  {}\n", "id", "status", "gpu precision",
                                "predicted", "measured", "error", "note");
    for (const auto& x : r.rows) {
        if (x.status == "skipped") {
            s += fmt::format("{:>5}  {:<14} {:<22} {:>11} {:>11.0f} {:>8}  {}: {}\n", x.id, x.status,
                             x.gpu + " " + x.precision, "-", x.measured, "-", skipped_where(x), x.reason);
            continue;
        }
        s += fmt::format("{:>5}  {:<14} {:<22} {:>11.0f} {:>11.0f} {:>+7.1f}%  {}\n", x.id, x.status,
                         x.gpu + " " + x.precision, x.predicted, x.measured, x.error_pct,
                         x.status == "does_not_fit" ? x.reason : x.in_fit ? "in the fit (not in the summary)" : "");
        if (verbose)
            for (const auto& c : x.choices) s += fmt::format("{:>7}chose {}\n", "", c);
    }
    const auto line = [](const std::string& name, const ErrorStats& st) { return stats_line(name, st); };
    s += "\nsummary (|predicted - measured| / measured, tokens/s/GPU):\n";
    s += line("overall", r.overall);
    s += "by gpu x precision:\n";
    for (const auto& [k, v] : r.by_gpu_precision) s += line(k, v);
    s += "by source group:\n";
    for (const auto& [k, v] : r.by_source_group) s += line(k, v);
    s += "by kind:\n";
    for (const auto& [k, v] : r.by_kind) s += line(k, v);
    s += fmt::format("skipped {}, measured-but-does-not-fit (memory-model errors) {}\n", r.skipped, r.does_not_fit);
    if (r.in_fit > 0) s += fmt::format("left out of the summary: {} rows the stack was fitted on\n", r.in_fit);
    if (r.has_bands)
        s += fmt::format(
            "80% bands (docs/trust.md): {:.0f}% of the compared rows inside their band; median width "
            "{:.0f}% of the p10 throughput\n",
            100 * r.coverage, 100 * r.median_width);
    return s;
}

} // namespace trainsim::sim
