// trainsim simulate, compare, report, keys, explain: a scenario's plans, simulated and reported.
#include "commands.hpp"

#include <charconv>
#include <cstring>

#ifndef TRAINSIM_DEFAULT_DATA_DIR
#define TRAINSIM_DEFAULT_DATA_DIR "scenarios"
#endif

namespace trainsim::sim::cli {

// --data-dir, else $TRAINSIM_DATA_DIR, else the source tree's scenarios/ recorded at build time.
fs::path data_dir(const std::string& flag) {
    if (!flag.empty()) return flag;
    if (const char* env = std::getenv("TRAINSIM_DATA_DIR"); env != nullptr && *env != '\0') return env;
    return TRAINSIM_DEFAULT_DATA_DIR;
}

// The checked-in error model (docs/trust.md) of a data folder: absent -> no bands (said once on
// stderr); malformed -> an input error naming the file.
std::optional<ErrorModel> load_error_model(const fs::path& dir) {
    const fs::path file = dir / "trust" / "error-model.json";
    std::error_code ec;
    if (!fs::exists(file, ec)) {
        std::cerr << fmt::format("trainsim: no error model at {}: figures are printed without error bands\n",
                                 file.string());
        return std::nullopt;
    }
    std::string text;
    try {
        text = model::read_regular_file(file, model::kMaxInputBytes);
    } catch (const model::FileReadError& e) {
        throw model::InputError("error model", {model::Diagnostic{file.string(), 0, 0, "", e.what()}});
    }
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        throw model::InputError("error model", {model::Diagnostic{file.string(), 0, 0, "", e.what()}});
    }
    return error_model_from_json(j, file.string());
}

void attach_band(RunEstimate& e, const model::Plan& plan, const std::optional<ErrorModel>& em) {
    if (!e.fits || !e.step) return;
    std::optional<Band> band;
    if (em) band = band_for(*em, plan, &*e.step);
    // A fitted stack's band replaces the table's: it comes from the user's own runs.
    if (plan.stack && plan.stack->fitted) band = band_with_stack(plan, *plan.stack, band);
    if (band) e.band = *band;
}


// simulate / compare / report: the plans as CSV too.
void add_csv(CLI::App* cmd, Common& c) {
    cmd->add_flag("--csv", c.csv, "print the plans as CSV (one row per plan, the JSON fields as columns)")
        ->excludes("--json");
}

std::string non_empty_path(const std::string& v) {
    return v.empty() ? std::string("is empty: a file path is needed") : std::string();
}

void add_lang(CLI::App* cmd, std::string& lang) {
    cmd->add_option("--lang", lang,
                    fmt::format("language of the text tables and the HTML report: {} (default en; JSON and CSV are "
                                "never translated)",
                                fmt::join(available_langs(), ", ")))
        ->check([](const std::string& v) {
            try {
                (void)parse_lang(v);
                return std::string();
            } catch (const LangError& e) {
                return std::string(e.what());
            }
        });
}

void add_common(CLI::App* cmd, Common& c) {
    cmd->add_option("FILE", c.file, "scenario YAML file")->required();
    cmd->add_option("--data-dir", c.data_dir, "folder with models/ and hardware/ (default: $TRAINSIM_DATA_DIR or the "
                                              "shipped scenarios/)");
    cmd->add_option("--profile", c.profile, "hardware profile YAML used for every plan (e.g. a calibrated one)");
    cmd->add_option("--stack", c.stack,
                    "stack profile YAML (trainsim fit-stack) every plan runs with, in place of parallel.stack")
        ->check(non_empty_path);
    cmd->add_flag("--json", c.json, "print machine-readable JSON");
    cmd->add_flag("--all-ranks", c.all_ranks, "simulate every rank instead of one per pipeline stage (slower, same result)");
}

// A progress bar on standard error: "[####    ]  40% 400/1000 plans", redrawn per percent.
std::function<void(std::size_t, std::size_t)> progress_bar(std::string what) {
    return [last = -1, what = std::move(what)](std::size_t done, std::size_t total) mutable {
        const int pct = total == 0 ? 100 : static_cast<int>(100 * done / total);
        if (pct == last) return;
        last = pct;
        const int w = 40, fill = pct * w / 100;
        std::cerr << fmt::format("\r[{:<{}}] {:3d}% {}/{} {}", std::string(static_cast<std::size_t>(fill), '#'), w, pct,
                                 done, total, what)
                  << std::flush;
        if (done == total) std::cerr << "\n";
    };
}

// Long runs (many plans or rows) show a bar when standard error is a terminal.

// --profile replaces the GPU of every plan: said, so that a scenario comparing GPUs is not
// silently turned into one GPU compared with itself.
void note_profile_override(const std::string& profile, std::size_t plans) {
    std::cerr << fmt::format("trainsim: note: --profile {} replaces the GPU (cluster.gpu) of {}\n", profile,
                             plans == 1 ? std::string("the plan") : fmt::format("all {} plans", plans));
}

model::Scenario load(const Common& c) {
    model::LoadOptions opts;
    opts.data_dir = data_dir(c.data_dir);
    if (!c.profile.empty()) opts.profile_override = fs::path(c.profile);
    if (!c.stack.empty()) opts.stack_override = fs::path(c.stack);
    auto sc = c.text ? model::load_scenario_text(*c.text, c.file, opts) : model::load_scenario(c.file, opts);
    for (const auto& w : sc.warnings) std::cerr << "trainsim: warning: " << w << "\n";
    if (!c.profile.empty()) note_profile_override(c.profile, sc.plans.size());
    return sc;
}

namespace {
// The width the side-by-side table wraps at: $COLUMNS when it is a sensible terminal width (as
// shells export it), else 120 columns.
std::size_t terminal_width() {
    constexpr std::size_t kDefault = 120;
    const char* env = std::getenv("COLUMNS");
    if (env == nullptr || *env == '\0') return kDefault;
    std::size_t n = 0;
    const auto [end, ec] = std::from_chars(env, env + std::strlen(env), n);
    return ec == std::errc() && *end == '\0' && n >= 40 && n <= 10000 ? n : kDefault;
}
} // namespace

void print_results(const Common& c, const model::Scenario& scenario, const std::vector<PlanResult>& results,
                   bool side_by_side) {
    if (c.trace == "-") return; // stdout carries the trace
    if (c.json && c.json_out) {
        *c.json_out = results_json(results);
        return;
    }
    if (c.json) {
        std::cout << results_json(results).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n"; // with the same advice
        return;
    }
    if (c.csv) {
        nlohmann::json arr = nlohmann::json::array();
        for (const auto& r : results) arr.push_back(plan_json(*r.plan, r.estimate));
        std::cout << plans_csv(arr);
        return;
    }
    // A plan that does not fit: what would make it (memory figures only; plan simulates them).
    std::vector<std::optional<FitAdvice>> advice(results.size());
    for (std::size_t i = 0; i < results.size(); ++i)
        if (!results[i].estimate.fits && model::check_layout(*results[i].plan).empty())
            advice[i] = fit_advice({*results[i].plan}, kMemoryHeadroomFraction, false);
    const Translator tr(parse_lang(c.lang));
    if (!scenario.title.empty()) std::cout << scenario.title << "\n\n";
    if (side_by_side && results.size() > 1) std::cout << format_comparison(results, terminal_width(), tr) << "\n";
    for (std::size_t i = 0; i < results.size(); ++i) {
        std::cout << format_plan(*results[i].plan, results[i].estimate, tr);
        if (advice[i]) std::cout << format_fit_advice(*advice[i]);
        std::cout << "\n";
    }
}

// --trace out.json: one plan writes out.json; several write out.1.json, out.2.json ... in the
// scenario's plan order (docs/report.md).
fs::path trace_path(const fs::path& base, std::size_t index, std::size_t count) {
    if (count == 1) return base;
    fs::path p = base;
    p.replace_filename(fmt::format("{}.{}{}", base.stem().string(), index + 1, base.extension().string()));
    return p;
}

// Staged in `batch`: the plans' traces are renamed into place together once every one was written;
// what to say about this one is added to `said`, printed once they are.
void write_trace(const Common& c, const model::Plan& plan, RunEstimate& e, const fs::path& path, OutputBatch& batch,
                 std::vector<std::string>& said) {
    if (!e.step) {
        std::cerr << fmt::format("trainsim: '{}' does not fit in memory: no trace written to {}\n", plan.name,
                                 path.string());
        return;
    }
    const auto graph = model::build_workload(plan);
    const std::string note =
        batch.stage(path, "--trace", [&](std::ostream& os) { write_chrome_trace(os, plan, graph, *e.step, c.file); });
    if (!note.empty()) said.push_back(note);
    said.push_back(fmt::format("trace of '{}' ({} ops on {} ranks) written to {}", plan.name, e.step->trace.size(),
                               e.step->simulated_ranks, path.string()));
    e.step->trace = {};  // a large plan's trace need not stay in memory
}

std::vector<PlanResult> simulate_plans(const Common& c, const model::Scenario& scenario, bool& all_fit,
                                       bool record_passes) {
    ExecOptions opt;
    opt.all_ranks = c.all_ranks;
    opt.record_trace = !c.trace.empty();
    opt.record_passes = record_passes;
    if (c.trace == "-" && scenario.plans.size() > 1)
        throw model::InputError("--trace", {model::Diagnostic{c.file, 0, 0, "--trace",
                                                              fmt::format("'-' (stdout) takes one trace, and the scenario "
                                                                          "has {} plans: give a file name",
                                                                          scenario.plans.size())}});
    std::vector<PlanResult> results;
    all_fit = true;
    const auto em = load_error_model(data_dir(c.data_dir));
    // A later plan's trace that cannot be written leaves the earlier ones' files as they were.
    OutputBatch traces;
    std::vector<std::string> said;
    auto progress = scenario.plans.size() >= kProgressFrom && isatty(STDERR_FILENO) != 0
                        ? progress_bar("plans")
                        : std::function<void(std::size_t, std::size_t)>();
    for (std::size_t i = 0; i < scenario.plans.size(); ++i) {
        if (progress) progress(i, scenario.plans.size());
        const auto& plan = scenario.plans[i];
        results.push_back({&plan, estimate_plan(plan, opt)});
        attach_band(results.back().estimate, plan, em);
        all_fit = all_fit && results.back().estimate.fits;
        if (opt.record_trace)
            write_trace(c, plan, results.back().estimate, trace_path(c.trace, i, scenario.plans.size()), traces,
                        said);
    }
    traces.commit();
    for (const auto& s : said) std::cerr << "trainsim: " << s << "\n";
    if (progress) progress(scenario.plans.size(), scenario.plans.size());
    return results;
}

int run_plans(const Common& c, bool side_by_side) {
    const auto scenario = load(c);
    bool all_fit = true;
    const auto results = simulate_plans(c, scenario, all_fit);
    print_results(c, scenario, results, side_by_side);
    return all_fit ? kExitOk : kExitDoesNotFit;
}

// ---- trainsim report (docs/report.md) ----


int run_report(const Common& c, const ReportArgs& a) {
    const auto scenario = load(c);
    bool all_fit = true;
    // The pipeline passes for the report's timelines (html_report's "Pipeline" section).
    const auto results = simulate_plans(c, scenario, all_fit, true);
    std::vector<ScalingSeries> scaling;
    if (!a.no_scaling) {
        std::vector<const model::Plan*> plans;
        for (const auto& p : scenario.plans) plans.push_back(&p);
        scaling = data_parallel_scaling(plans, a.scaling_gpus);
    }
    const std::string page = html_report(scenario.title, c.file, results, scaling, Translator(parse_lang(c.lang)));
    const std::string note = write_file_atomically(a.html, "--html", [&](std::ostream& os) { os << page; });
    if (!note.empty()) std::cerr << "trainsim: " << note << "\n";
    if (a.html != "-") print_results(c, scenario, results, true); // else stdout carries the page
    return all_fit ? kExitOk : kExitDoesNotFit;
}

// What a key accepts beyond its type: an enum's values, a number's physical range.
std::string accepted_values(const model::KeySpec& k) {
    if (!k.allowed.empty()) return fmt::format("one of: {}", fmt::join(k.allowed, ", "));
    if (k.range_min.empty() && k.range_max.empty()) return {};
    return fmt::format("range {} to {} ({})", k.range_min.empty() ? "-" : k.range_min,
                       k.range_max.empty() ? "-" : k.range_max, k.range_basis);
}

int print_keys(bool markdown) {
    const auto& keys = model::scenario_keys();
    if (markdown) {
        std::cout << "| key | type | unit | default | accepts | description |\n|---|---|---|---|---|---|\n";
        for (const auto& k : keys)
            std::cout << fmt::format("| `{}` | {} | {} | {} | {} | {} |\n", k.path, k.type, k.unit, k.default_value,
                                     accepted_values(k), k.description);
        return kExitOk;
    }
    std::size_t w = 0;
    for (const auto& k : keys) w = std::max(w, k.path.size());
    for (const auto& k : keys) {
        const std::string accepts = accepted_values(k);
        std::cout << fmt::format("{:<{}}  {:<9} {:<8} default {:<10} {}{}\n", k.path, w, k.type, k.unit,
                                 k.default_value.empty() ? "-" : k.default_value, k.description,
                                 accepts.empty() ? "" : " [" + accepts + "]");
    }
    return kExitOk;
}

int explain(const Common& c) {
    const auto scenario = load(c);
    for (const auto& plan : scenario.plans) {
        const auto g = model::build_workload(plan);
        std::cout << fmt::format("== {} ==\n  {} stages x {} micro-batches, {} ops, {} op shapes\n", plan.name, g.pp,
                                 g.microbatches, g.op_count(), g.protos.size());
        std::map<std::string, int> seen;
        for (std::size_t i = 1; i < g.protos.size(); ++i) {
            const auto& p = g.protos[i];
            if (seen[p.name]++) continue;
            std::cout << fmt::format("  {:<26} {:<14}", p.name, model::to_string(p.kind));
            if (p.kind == model::OpKind::gemm) {
                std::cout << fmt::format(" m={} n={} k={} {}", p.m, p.n, p.k, model::to_string(p.precision));
                if (p.splits > 1) std::cout << fmt::format(" in {} chunks of m", p.splits);
            } else if (p.kind == model::OpKind::collective)
                std::cout << fmt::format(" {} over {} {}", model::to_string(p.collective), model::to_string(p.group),
                                         model::format_bytes(p.bytes));
            else
                std::cout << fmt::format(" {}", model::format_bytes(p.bytes));
            std::cout << "\n";
        }
    }
    return kExitOk;
}

} // namespace trainsim::sim::cli
