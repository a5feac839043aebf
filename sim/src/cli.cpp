#include "trainsim/sim/cli.hpp"

#include "trainsim/model/loader.hpp"
#include "trainsim/model/workload.hpp"
#include "trainsim/sim/estimate.hpp"
#include "trainsim/sim/report.hpp"
#include "trainsim/sim/validate.hpp"
#include "trainsim/model/validation_set.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <algorithm>
#include <map>
#include <thread>

#ifndef TRAINSIM_DEFAULT_DATA_DIR
#define TRAINSIM_DEFAULT_DATA_DIR "scenarios"
#endif

namespace trainsim::sim {

namespace fs = std::filesystem;

namespace {

// --data-dir, else $TRAINSIM_DATA_DIR, else the source tree's scenarios/ recorded at build time.
fs::path data_dir(const std::string& flag) {
    if (!flag.empty()) return flag;
    if (const char* env = std::getenv("TRAINSIM_DATA_DIR"); env != nullptr && *env != '\0') return env;
    return TRAINSIM_DEFAULT_DATA_DIR;
}

struct Common {
    std::string file;
    std::string data_dir;
    std::string profile;
    bool json = false;
    bool all_ranks = false;
};

void add_common(CLI::App* cmd, Common& c) {
    cmd->add_option("FILE", c.file, "scenario YAML file")->required();
    cmd->add_option("--data-dir", c.data_dir, "folder with models/ and hardware/ (default: $TRAINSIM_DATA_DIR or the "
                                              "shipped scenarios/)");
    cmd->add_option("--profile", c.profile, "hardware profile YAML used for every plan (e.g. a calibrated one)");
    cmd->add_flag("--json", c.json, "print machine-readable JSON");
    cmd->add_flag("--all-ranks", c.all_ranks, "simulate every rank instead of one per pipeline stage (slower, same result)");
}

model::Scenario load(const Common& c) {
    model::LoadOptions opts;
    opts.data_dir = data_dir(c.data_dir);
    if (!c.profile.empty()) opts.profile_override = fs::path(c.profile);
    return model::load_scenario(c.file, opts);
}

int run_plans(const Common& c, bool side_by_side) {
    const auto scenario = load(c);
    ExecOptions opt;
    opt.all_ranks = c.all_ranks;
    std::vector<PlanResult> results;
    bool all_fit = true;
    for (const auto& plan : scenario.plans) {
        results.push_back({&plan, estimate_plan(plan, opt)});
        all_fit = all_fit && results.back().estimate.fits;
    }
    if (c.json) {
        std::cout << results_json(results).dump(2) << "\n";
    } else {
        if (!scenario.title.empty()) std::cout << scenario.title << "\n\n";
        if (side_by_side && results.size() > 1) std::cout << format_comparison(results) << "\n";
        for (const auto& r : results) std::cout << format_plan(*r.plan, r.estimate) << "\n";
    }
    return all_fit ? kExitOk : kExitDoesNotFit;
}

int print_keys(bool markdown) {
    const auto& keys = model::scenario_keys();
    if (markdown) {
        std::cout << "| key | type | unit | default | description |\n|---|---|---|---|---|\n";
        for (const auto& k : keys)
            std::cout << fmt::format("| `{}` | {} | {} | {} | {} |\n", k.path, k.type, k.unit, k.default_value,
                                     k.description);
        return kExitOk;
    }
    std::size_t w = 0;
    for (const auto& k : keys) w = std::max(w, k.path.size());
    for (const auto& k : keys) {
        std::cout << fmt::format("{:<{}}  {:<9} {:<8} default {:<10} {}\n", k.path, w, k.type, k.unit,
                                 k.default_value.empty() ? "-" : k.default_value, k.description);
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
            if (p.kind == model::OpKind::gemm)
                std::cout << fmt::format(" m={} n={} k={} {}", p.m, p.n, p.k, model::to_string(p.precision));
            else if (p.kind == model::OpKind::collective)
                std::cout << fmt::format(" {} over {} {}", model::to_string(p.collective), model::to_string(p.group),
                                         model::format_bytes(p.bytes));
            else
                std::cout << fmt::format(" {}", model::format_bytes(p.bytes));
            std::cout << "\n";
        }
    }
    return kExitOk;
}

} // namespace

int run_cli(int argc, char** argv) {
    CLI::App app{"trainsim: discrete-event simulation of LLM training steps -> days, GPU-hours, money"};
    app.require_subcommand(1);
    Common sim_args, cmp_args, exp_args;
    auto* simulate = app.add_subcommand("simulate", "simulate every plan of a scenario and report each in detail");
    add_common(simulate, sim_args);
    auto* compare = app.add_subcommand("compare", "simulate a scenario's plans and show them side by side");
    add_common(compare, cmp_args);
    auto* keys = app.add_subcommand("keys", "list every scenario key with its type, unit, default and description");
    bool markdown = false;
    keys->add_flag("--markdown", markdown, "as a Markdown table (docs/scenario-keys.md)");
    auto* expl = app.add_subcommand("explain", "show the workload (op shapes and collectives) a scenario builds");
    add_common(expl, exp_args);

    auto* val = app.add_subcommand("validate", "simulate every row of a published-measurements CSV and report the error");
    std::string val_file, val_data, val_kind;
    bool val_json = false, val_verbose = false;
    val->add_option("FILE", val_file, "CSV in the schema of shared/validation/README.md")->required();
    val->add_option("--data-dir", val_data, "folder with models/ and hardware/");
    val->add_option("--kind", val_kind, "only rows of this kind (step | end_to_end)");
    val->add_flag("--json", val_json, "print machine-readable JSON");
    val->add_flag("--verbose,-v", val_verbose, "list what was chosen for blank cells, per row");
    std::vector<std::string> val_rows;
    val->add_option("--row", val_rows, "print the full simulation report of these row ids instead");

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int rc = app.exit(e);
        return rc == 0 ? kExitOk : kExitBadInput;
    }
    if (*simulate) return run_plans(sim_args, false);
    if (*compare) return run_plans(cmp_args, true);
    if (*keys) return print_keys(markdown);
    if (*expl) return explain(exp_args);
    if (*val) {
        const auto rows = model::load_validation_csv(val_file, data_dir(val_data));
        if (!val_rows.empty()) {
            for (const auto& row : rows) {
                if (std::find(val_rows.begin(), val_rows.end(), row.id) == val_rows.end()) continue;
                if (!row.skip_reason.empty()) {
                    std::cout << "row " << row.id << ": skipped: " << row.skip_reason << "\n";
                    continue;
                }
                std::cout << format_plan(row.plan, estimate_plan(row.plan, {}, true));
                std::cout << fmt::format("  measured {:.0f} tokens/s per GPU ({})\n", row.measured_tokens_per_s_per_gpu,
                                         row.source);
                for (const auto& c : row.choices) std::cout << "  chose " << c << "\n";
                std::cout << "\n";
            }
            return kExitOk;
        }
        const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
        const auto rep = validate_rows(rows, val_kind, threads);
        if (val_json) std::cout << report_json(rep).dump(2) << "\n";
        else std::cout << report_text(rep, val_verbose);
        return kExitOk;
    }
    return kExitBadInput;
}

} // namespace trainsim::sim
