#include "trainsim/sim/cli.hpp"

#include "trainsim/model/layout.hpp"
#include "trainsim/model/loader.hpp"
#include "trainsim/model/memory_model.hpp"
#include "trainsim/model/validation_set.hpp"
#include "trainsim/model/workload.hpp"
#include "trainsim/sim/estimate.hpp"
#include "trainsim/sim/fit_advice.hpp"
#include "trainsim/sim/html_report.hpp"
#include "trainsim/sim/network.hpp"
#include "trainsim/sim/output_file.hpp"
#include "trainsim/sim/plan_search.hpp"
#include "trainsim/sim/report.hpp"
#include "trainsim/sim/scaling.hpp"
#include "trainsim/sim/topology.hpp"
#include "trainsim/sim/trace.hpp"
#include "trainsim/sim/trust.hpp"
#include "trainsim/sim/validate.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <thread>
#include <tuple>

#include <unistd.h>

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

// The checked-in error model (docs/trust.md) of a data folder: absent -> no bands (said once on
// stderr); malformed -> an input error naming the file.
std::optional<ErrorModel> load_error_model(const fs::path& dir) {
    const fs::path file = dir / "trust" / "error-model.json";
    std::ifstream in(file);
    if (!in) {
        std::cerr << fmt::format("trainsim: no error model at {}: figures are printed without error bands\n",
                                 file.string());
        return std::nullopt;
    }
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
        throw model::InputError("error model", {model::Diagnostic{file.string(), 0, 0, "", e.what()}});
    }
    return error_model_from_json(j, file.string());
}

void attach_band(RunEstimate& e, const model::Plan& plan, const std::optional<ErrorModel>& em) {
    if (em && e.fits && e.step) e.band = band_for(*em, plan, &e.step->breakdown);
}

struct Common {
    std::string file;
    std::string data_dir;
    std::string profile;
    bool json = false;
    bool csv = false;
    bool all_ranks = false;
    std::string trace;  // simulate --trace
};

// simulate / compare / report: the plans as CSV too.
void add_csv(CLI::App* cmd, Common& c) {
    cmd->add_flag("--csv", c.csv, "print the plans as CSV (one row per plan, the JSON fields as columns)")
        ->excludes("--json");
}

void add_common(CLI::App* cmd, Common& c) {
    cmd->add_option("FILE", c.file, "scenario YAML file")->required();
    cmd->add_option("--data-dir", c.data_dir, "folder with models/ and hardware/ (default: $TRAINSIM_DATA_DIR or the "
                                              "shipped scenarios/)");
    cmd->add_option("--profile", c.profile, "hardware profile YAML used for every plan (e.g. a calibrated one)");
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
constexpr std::size_t kProgressFrom = 50;

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
    auto sc = model::load_scenario(c.file, opts);
    for (const auto& w : sc.warnings) std::cerr << "trainsim: warning: " << w << "\n";
    if (!c.profile.empty()) note_profile_override(c.profile, sc.plans.size());
    return sc;
}

void print_results(const Common& c, const model::Scenario& scenario, const std::vector<PlanResult>& results,
                   bool side_by_side) {
    if (c.trace == "-") return; // stdout carries the trace
    if (c.json) {
        std::cout << results_json(results).dump(2) << "\n"; // with the same advice
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
    if (!scenario.title.empty()) std::cout << scenario.title << "\n\n";
    if (side_by_side && results.size() > 1) std::cout << format_comparison(results) << "\n";
    for (std::size_t i = 0; i < results.size(); ++i) {
        std::cout << format_plan(*results[i].plan, results[i].estimate);
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

void write_trace(const Common& c, const model::Plan& plan, RunEstimate& e, const fs::path& path) {
    if (!e.step) {
        std::cerr << fmt::format("trainsim: '{}' does not fit in memory: no trace written to {}\n", plan.name,
                                 path.string());
        return;
    }
    const auto graph = model::build_workload(plan);
    const std::string note = write_file_atomically(
        path, "--trace", [&](std::ostream& os) { write_chrome_trace(os, plan, graph, *e.step, c.file); });
    if (!note.empty()) std::cerr << "trainsim: " << note << "\n";
    std::cerr << fmt::format("trainsim: trace of '{}' ({} ops on {} ranks) written to {}\n", plan.name,
                             e.step->trace.size(), e.step->simulated_ranks, path.string());
    e.step->trace = {};  // a large plan's trace need not stay in memory
}

std::vector<PlanResult> simulate_plans(const Common& c, const model::Scenario& scenario, bool& all_fit) {
    ExecOptions opt;
    opt.all_ranks = c.all_ranks;
    opt.record_trace = !c.trace.empty();
    if (c.trace == "-" && scenario.plans.size() > 1)
        throw model::InputError("--trace", {model::Diagnostic{c.file, 0, 0, "--trace",
                                                              fmt::format("'-' (stdout) takes one trace, and the scenario "
                                                                          "has {} plans: give a file name",
                                                                          scenario.plans.size())}});
    std::vector<PlanResult> results;
    all_fit = true;
    const auto em = load_error_model(data_dir(c.data_dir));
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
            write_trace(c, plan, results.back().estimate, trace_path(c.trace, i, scenario.plans.size()));
    }
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

struct ReportArgs {
    std::string html;
    std::vector<int> scaling_gpus = default_scaling_gpu_counts();
    bool no_scaling = false;
};

int run_report(const Common& c, const ReportArgs& a) {
    const auto scenario = load(c);
    bool all_fit = true;
    const auto results = simulate_plans(c, scenario, all_fit);
    std::vector<ScalingSeries> scaling;
    if (!a.no_scaling) {
        std::vector<const model::Plan*> plans;
        for (const auto& p : scenario.plans) plans.push_back(&p);
        scaling = data_parallel_scaling(plans, a.scaling_gpus);
    }
    const std::string page = html_report(scenario.title, c.file, results, scaling);
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

// ---- trainsim topology / trainsim collective (docs/network.md) ----

// Fabric flags; for `topology` they override the scenario's cluster.oversubscription and
// cluster.nodes_per_leaf only when given.
struct FabricArgs {
    std::optional<double> oversubscription;
    std::optional<int> nodes_per_leaf;
};

void add_fabric(CLI::App* cmd, FabricArgs& f) {
    cmd->add_option("--oversubscription", f.oversubscription,
                    "leaf down:up bandwidth ratio of the fat tree (1 = non-blocking)");
    cmd->add_option("--nodes-per-leaf", f.nodes_per_leaf, "nodes per scalable unit (one leaf switch per rail)");
}

TopologyOptions topology_options(const FabricArgs& f, const model::Cluster& cluster = {}) {
    TopologyOptions o;
    o.oversubscription = f.oversubscription.value_or(cluster.oversubscription);
    o.nodes_per_leaf = f.nodes_per_leaf.value_or(cluster.nodes_per_leaf);
    return o;
}

int print_topology(const Common& c, const FabricArgs& f, const std::string& dot) {
    const auto scenario = load(c);
    if (!dot.empty()) {
        std::ofstream file;
        std::ostream* os = &std::cout;
        if (dot != "-") {
            file.open(dot);
            if (!file) {
                model::Diagnostic d;
                d.file = dot;
                d.key = "--dot";
                d.message = "cannot open the file for writing";
                throw NetworkError({d});
            }
            os = &file;
        }
        for (const auto& plan : scenario.plans)
            Topology(plan.hardware, plan.cluster, topology_options(f, plan.cluster)).write_dot(*os, plan.name);
        return kExitOk;
    }
    for (const auto& plan : scenario.plans) {
        const Topology topo(plan.hardware, plan.cluster, topology_options(f, plan.cluster));
        std::cout << fmt::format("== {} ({}) ==\n", plan.name, plan.hardware.name) << topo.summary() << "\n";
    }
    return kExitOk;
}

struct CollectiveArgs {
    std::string gpu;
    std::string op = "all_reduce";
    std::string size = "4GiB";
    int gpus = 8;
    int gpus_per_node = 0;   // 0: the profile's node
    int nics_per_node = -1;  // -1: the profile's node
    std::string nic_rate;    // empty: the profile's node
    std::string intra = "nvswitch";
    std::string algo;        // empty: the fastest, as NCCL's tuner picks
    std::string data_dir;
    FabricArgs fabric;
    bool json = false;
};

int run_collective(const CollectiveArgs& a) {
    std::vector<model::Diagnostic> bad;
    auto problem = [&](const std::string& key, const std::string& msg) {
        model::Diagnostic d;
        d.file = "trainsim collective";
        d.key = key;
        d.message = msg;
        bad.push_back(d);
    };
    const auto hw = model::resolve_profile(a.gpu, fs::current_path(), data_dir(a.data_dir));
    std::optional<model::CollectiveOp> op;
    for (int i = 0; i < 5; ++i)
        if (model::to_string(static_cast<model::CollectiveOp>(i)) == a.op) op = static_cast<model::CollectiveOp>(i);
    if (!op)
        problem("--op", fmt::format("unknown collective '{}'{} (all_reduce, all_gather, reduce_scatter, all_to_all, "
                                    "send_recv)",
                                    a.op,
                                    model::did_you_mean(a.op, {"all_reduce", "all_gather", "reduce_scatter",
                                                               "all_to_all", "send_recv"})));
    Bytes bytes;
    // The largest buffer one GPU can hold is its memory (at most 288 GB today): 1 TiB bounds it.
    constexpr double kMaxCollectiveBytes = model::kTiB;
    try {
        bytes = model::parse_bytes(a.size);
        if (!(bytes.value() > 0)) problem("--size", "must be positive");
        if (bytes.value() > kMaxCollectiveBytes)
            problem("--size", fmt::format("'{}' is more than a GPU holds (at most 1 TiB)", a.size));
    } catch (const model::UnitError& e) {
        problem("--size", e.what());
    }
    // Options that stand for scenario keys get the keys' checks (type, unit, physical range).
    auto check_as_key = [&](const std::string& option, const std::string& key, const std::string& value) {
        for (const auto& m : model::check_key_value(key, value)) problem(option, m);
    };
    if (!a.nic_rate.empty()) check_as_key("--nic-rate", "cluster.nic_rate", a.nic_rate);
    if (a.gpus_per_node > 0) check_as_key("--gpus-per-node", "cluster.gpus_per_node", std::to_string(a.gpus_per_node));
    if (a.nics_per_node >= 0) check_as_key("--nics-per-node", "cluster.nics_per_node", std::to_string(a.nics_per_node));
    if (!bad.empty()) throw NetworkError(std::move(bad));
    model::Cluster cluster;
    cluster.gpu = a.gpu;
    cluster.gpus_per_node = a.gpus_per_node > 0 ? a.gpus_per_node : hw.default_gpus_per_node;
    cluster.nics_per_node = a.nics_per_node >= 0 ? a.nics_per_node : hw.default_nics_per_node;
    cluster.nic_rate = hw.default_nic_rate;
    if (!a.nic_rate.empty()) {
        try {
            cluster.nic_rate = model::parse_bandwidth(a.nic_rate);
        } catch (const model::UnitError& e) {
            problem("--nic-rate", e.what());
        }
    }
    if (a.intra == "nvswitch") cluster.intra = model::IntraFabric::nvswitch;
    else if (a.intra == "nvlink-bridge" || a.intra == "nvlink_bridge") cluster.intra = model::IntraFabric::nvlink_bridge;
    else if (a.intra == "pcie") cluster.intra = model::IntraFabric::pcie;
    else
        problem("--intra", fmt::format("unknown fabric '{}'{} (nvswitch, nvlink-bridge, pcie)", a.intra,
                                       model::did_you_mean(a.intra, {"nvswitch", "nvlink-bridge", "pcie"})));
    std::optional<Algorithm> algo;
    if (!a.algo.empty()) {
        algo = parse_algorithm(a.algo);
        if (!algo)
            problem("--algo",
                    fmt::format("unknown algorithm '{}'{} (ring, tree, nvls, nvls_tree, direct)", a.algo,
                                model::did_you_mean(a.algo, {"ring", "tree", "nvls", "nvls_tree", "direct"})));
    }
    if (a.gpus < 2) problem("--gpus", fmt::format("a collective needs at least 2 GPUs, got {}", a.gpus));
    if (cluster.gpus_per_node < 1) problem("--gpus-per-node", "must be at least 1");
    if (a.gpus >= 2 && cluster.gpus_per_node >= 1) {
        if (a.gpus < cluster.gpus_per_node) cluster.gpus_per_node = a.gpus;  // one node with just these GPUs
        if (a.gpus % cluster.gpus_per_node != 0)
            problem("--gpus", fmt::format("{} GPUs do not fill whole nodes of {}", a.gpus, cluster.gpus_per_node));
        cluster.nodes = a.gpus / cluster.gpus_per_node;
    }
    if (!bad.empty()) throw NetworkError(std::move(bad));

    const AnalyticNetwork net(hw, cluster, topology_options(a.fabric));
    const auto g = place_group(1, a.gpus, cluster.gpus_per_node);
    Time t;
    std::string algorithm, protocol;
    if (algo) {
        const auto c = net.collectives().cost(*op, g, bytes, algo);
        t = c.time;
        algorithm = to_string(c.algorithm);
        protocol = to_string(c.protocol);
    } else {
        const auto c = net.collective(*op, g, bytes);
        t = c.time;
        algorithm = c.algorithm;
        protocol = c.protocol;
    }
    // nccl-tests definitions: algbw = buffer bytes / time; busbw = algbw x the op's bus factor.
    const double algbw = bytes.value() / t.seconds();
    const double busbw = algbw * bus_factor(*op, a.gpus);
    if (a.json) {
        nlohmann::ordered_json j;
        j["time_s"] = t.seconds();
        j["algbw_gbps"] = algbw / 1e9;
        j["busbw_gbps"] = busbw / 1e9;
        j["algorithm"] = algorithm;
        std::cout << j.dump(2) << "\n";
        return kExitOk;
    }
    std::cout << fmt::format("{} of {} over {} GPU{} ({} node{} x {}, {}) on {}\n", model::to_string(*op),
                             model::format_bytes(bytes), a.gpus, a.gpus == 1 ? "" : "s", cluster.nodes,
                             cluster.nodes == 1 ? "" : "s", cluster.gpus_per_node, model::to_string(cluster.intra),
                             hw.name);
    if (cluster.nodes > 1)
        std::cout << fmt::format("  network    {} NIC{} x {} per node\n", cluster.nics_per_node,
                                 cluster.nics_per_node == 1 ? "" : "s", model::format_bandwidth(cluster.nic_rate));
    std::cout << fmt::format("  algorithm  {}{}\n", algorithm, protocol.empty() ? "" : " / " + protocol);
    std::cout << fmt::format("  time       {}\n", model::format_time(t));
    std::cout << fmt::format("  algbw      {:.1f} GB/s\n", algbw / 1e9);
    std::cout << fmt::format("  busbw      {:.1f} GB/s\n", busbw / 1e9);
    return kExitOk;
}


// ---- trainsim plan (docs/plan-search.md) ----

struct PlanArgs {
    std::string file;
    std::string memory_headroom; // a fraction ("5%"); empty: kMemoryHeadroomFraction
    std::string data_dir;
    std::string profile;
    std::string model;
    std::string gpu;
    std::vector<int> gpus;
    std::string tokens;
    int seq_len = 4096;
    int global_batch = 1024;
    std::string precision = "bf16";
    std::optional<double> price; // absent: the scenario's price, or none
    std::string currency = "USD";
    long long top = 10;  // signed: "--top -1" must be an error, not 2^64 - 1
    std::string rank;  // days | cost; empty: cost with a deadline, else days
    std::optional<double> deadline_days;
    std::optional<double> budget;
    int max_micro_batch = 8;
    bool try_without_sp = false;
    bool no_prune = false;
    unsigned threads = 0;
    bool json = false;
    bool csv = false;
    bool frontier_csv = false; // with --csv: one row per GPU count (its best plan) instead
    bool quiet = false;
    bool no_offload = false;
    std::string days = "steady";  // steady | expected: the days (and cost) ranked and filtered
    // Override the scenario's run.* settings (the key table's defaults without a scenario).
    std::optional<std::string> checkpoint_bandwidth;
    std::optional<double> gpu_mtbf_hours;
    std::optional<double> restart_minutes;
};

[[noreturn]] void plan_arg_error(const std::string& key, const std::string& msg) {
    model::Diagnostic d;
    d.file = "trainsim plan";
    d.key = key;
    d.message = msg;
    throw SearchError({d});
}

// The base plan: the scenario's first plan, or one written from the flags (loaded through the
// one loader so that every default and check is the scenario file's).
model::Plan plan_base(const PlanArgs& a) {
    model::LoadOptions opts;
    opts.data_dir = data_dir(a.data_dir);
    if (!a.profile.empty()) opts.profile_override = fs::path(a.profile);
    if (!a.file.empty()) {
        if (!a.model.empty() || !a.gpu.empty() || !a.tokens.empty())
            plan_arg_error("FILE", "give either a scenario FILE or --model/--gpu/--tokens, not both");
        if (a.price)
            plan_arg_error("--price",
                           "belongs to the flag form; with a scenario FILE the price is its pricing section");
        auto sc = model::load_scenario(a.file, opts);
        for (const auto& w : sc.warnings) std::cerr << "trainsim: warning: " << w << "\n";
        if (!a.profile.empty()) note_profile_override(a.profile, sc.plans.size());
        if (sc.plans.size() > 1)
            std::cerr << fmt::format("trainsim: note: {} has {} plans; plan searches around the first, '{}' (its "
                                     "model, training, precision, cluster and pricing)\n",
                                     a.file, sc.plans.size(), sc.plans.front().name);
        return sc.plans.front();
    }
    if (a.model.empty() || a.gpu.empty() || a.tokens.empty() || a.gpus.empty())
        plan_arg_error("--model", "without a scenario FILE, --model, --gpu, --gpus and --tokens are required");
    // gpus_per_node from the profile's node; the GPU count (nodes) is set by the search.
    const auto hw = model::resolve_profile(a.gpu, fs::current_path(), opts.data_dir);
    const std::string yaml = fmt::format(
        "model: {}\ntraining: {{tokens: \"{}\", seq_len: {}, global_batch: {}, micro_batch: 1}}\n"
        "parallel: {{tp: 1, pp: 1, dp: auto}}\nprecision: {}\n"
        "cluster: {{gpu: \"{}\", nodes: 1, gpus_per_node: {}}}\n"
        "pricing: {{basis: gpu_hour{}, currency: \"{}\"}}\nplans:\n  - name: search\n",
        a.model, a.tokens, a.seq_len, a.global_batch, a.precision, a.gpu, hw.default_gpus_per_node,
        a.price ? fmt::format(", rate: {}", *a.price) : std::string(), a.currency);
    return model::load_scenario_text(yaml, "trainsim plan flags", opts).plans.front();
}

// plan with several GPU counts: each count's best plan and whether it is on the days-vs-cost
// Pareto front ("8 or 64 GPUs?" as one table). JSON: one object per count, `best` null where
// nothing of that count fits and meets the deadline / budget.
nlohmann::json frontier_json(const std::vector<CountBest>& frontier) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& f : frontier) {
        nlohmann::json j{{"num_gpus", f.gpus}, {"pareto", f.pareto}};
        j["best"] = f.best ? plan_json(f.best->plan, f.best->estimate) : nlohmann::json(nullptr);
        arr.push_back(std::move(j));
    }
    return arr;
}

void print_frontier_text(const std::vector<CountBest>& frontier, bool expected) {
    std::cout << "\nbest plan per GPU count ('*': on the days-vs-cost Pareto front, no count is both faster and "
                 "cheaper):\n";
    std::cout << fmt::format("  {:>5}  {:<40} {:>8} {:>12} {:>9} {:>6}\n", "GPUs", "best layout",
                             expected ? "exp.days" : "days", expected ? "exp.cost" : "cost", "tok/s/GPU", "MFU");
    for (const auto& f : frontier) {
        if (!f.best) {
            std::cout << fmt::format("  {:>5}  {}\n", f.gpus, "no layout fits and meets the constraints");
            continue;
        }
        const auto& e = f.best->estimate;
        std::cout << fmt::format("{} {:>5}  {:<40} {:>8.1f} {:>12.0f} {:>9.0f} {:>5.1f}%\n", f.pareto ? " *" : "  ",
                                 f.gpus, layout_label(f.best->plan), expected ? e.expected_days : e.days_to_train,
                                 expected ? e.expected_cost : e.cost, e.tokens_per_s_per_gpu, 100 * e.mfu);
    }
}

int run_plan_search(const PlanArgs& a) {
    if (a.json && a.csv) plan_arg_error("--csv", "--json and --csv are exclusive");
    if (a.frontier_csv && !a.csv) plan_arg_error("--frontier", "prints the per-count table as CSV: use it with --csv");
    if (a.top < 1) plan_arg_error("--top", "must be at least 1");
    if (a.max_micro_batch < 1) plan_arg_error("--max-micro-batch", "must be at least 1");
    double memory_headroom = kMemoryHeadroomFraction;
    if (!a.memory_headroom.empty()) {
        try {
            memory_headroom = model::parse_fraction(a.memory_headroom);
        } catch (const model::UnitError& e) {
            plan_arg_error("--memory-headroom", e.what());
        }
        if (memory_headroom >= 0.5) plan_arg_error("--memory-headroom", "must be below 50% of the HBM");
    }
    model::Plan base = plan_base(a);
    SearchOptions o;
    o.space.gpu_counts = a.gpus;
    o.space.max_micro_batch = a.max_micro_batch;
    o.memory_headroom = memory_headroom;
    o.space.try_without_sp = a.try_without_sp;
    o.top = static_cast<std::size_t>(a.top);
    o.threads = a.threads;
    o.prune = !a.no_prune;
    o.deadline_days = a.deadline_days;
    o.budget = a.budget;
    // p90: rank by the pessimistic end of each plan's error band (docs/trust.md): days, or cost
    // with a deadline. Within one GPU count every plan shares its band, so this reorders counts.
    const bool rank_p90 = a.rank == "p90" || a.rank == "days-p90" || a.rank == "cost-p90";
    if (a.rank.empty() || a.rank == "p90")
        o.rank = a.deadline_days && !a.budget ? RankBy::cost : RankBy::days;
    else if (a.rank == "days" || a.rank == "days-p90")
        o.rank = RankBy::days;
    else if (a.rank == "cost" || a.rank == "cost-p90")
        o.rank = RankBy::cost;
    else
        plan_arg_error("--rank",
                       fmt::format("unknown ranking '{}'{} (days, cost, p90, days-p90, cost-p90)", a.rank,
                                   model::did_you_mean(a.rank, {"days", "cost", "p90", "days-p90", "cost-p90"})));
    if (a.deadline_days && !(*a.deadline_days > 0)) plan_arg_error("--deadline-days", "must be positive");
    if (a.budget && !(*a.budget > 0)) plan_arg_error("--budget", "must be positive");
    // Money without a price is unknown, not 0: a budget would let every plan pass and a cost
    // ranking would rank zeros (and, with nothing to prune against, simulate every plan).
    if (!has_price(base.pricing)) {
        const std::string how = a.file.empty() ? "--price (per GPU-hour)" : fmt::format("pricing.rate in {}", a.file);
        if (a.budget) plan_arg_error("--budget", fmt::format("needs a price: give {}", how));
        if (o.rank == RankBy::cost)
            plan_arg_error(a.rank == "cost" || a.rank == "cost-p90" ? "--rank" : "--deadline-days",
                           a.rank == "cost" || a.rank == "cost-p90"
                               ? fmt::format("ranking by cost needs a price: give {}", how)
                               : fmt::format("ranks the plans that meet it by cost, which needs a price: give {} "
                                             "or --rank days",
                                             how));
    }
    if (a.days == "steady") o.basis = DaysBasis::steady;
    else if (a.days == "expected") o.basis = DaysBasis::expected;
    else
        plan_arg_error("--days", fmt::format("unknown days '{}'{} (steady, expected)", a.days,
                                             model::did_you_mean(a.days, {"steady", "expected"})));
    auto& run = base.run;  // every searched plan copies the base plan's run settings
    // The run options stand for scenario keys and get their checks (unit, finite, physical range).
    auto check_as_key = [](const std::string& option, const std::string& key, const std::string& value) {
        for (const auto& m : model::check_key_value(key, value)) plan_arg_error(option, m);
    };
    if (a.checkpoint_bandwidth) {
        check_as_key("--checkpoint-bandwidth", "run.checkpoint_bandwidth", *a.checkpoint_bandwidth);
        run.checkpoint_bandwidth_per_node = model::parse_bandwidth(*a.checkpoint_bandwidth);
    }
    if (a.gpu_mtbf_hours) {
        check_as_key("--gpu-mtbf-hours", "run.gpu_mtbf", fmt::format("{} h", *a.gpu_mtbf_hours));
        if (!(*a.gpu_mtbf_hours > 0)) plan_arg_error("--gpu-mtbf-hours", "must be positive");
        run.gpu_mtbf_hours = *a.gpu_mtbf_hours;
    }
    if (a.restart_minutes) {
        check_as_key("--restart-minutes", "run.restart", fmt::format("{} min", *a.restart_minutes));
        run.restart_s = *a.restart_minutes * 60.0;
    }

    const bool bar = !a.quiet && isatty(STDERR_FILENO) != 0;
    if (bar) o.progress = progress_bar("plans");
    auto res = search_plans(base, o);
    const auto folded = fold_equivalent_plans(res.plans);
    std::size_t folded_count = 0;
    for (const auto& f : folded) folded_count += f.size();
    // Nothing to rank because no layout exists (not because none fits): a request error.
    if (res.plans.empty() && res.stats.enumerated == res.stats.invalid)
        plan_arg_error("--gpus",
                       fmt::format("no valid layout of {} GPU(s) exists for {}: tensor parallelism must divide the GPUs of "
                                   "a node ({}) and the {} heads, pipeline stages the {} layers, and data parallelism the "
                                   "global batch of {}; try a GPU count that fills whole {}-GPU nodes",
                                   fmt::join(a.gpus, ","), base.model.name, base.cluster.gpus_per_node,
                                   base.model.heads, base.model.layers, base.training.global_batch,
                                   base.hardware.default_gpus_per_node));
    const auto em = load_error_model(data_dir(a.data_dir));
    // Where no GPU-only layout of a GPU count fits, CPU offload may (docs/plan-search.md "When
    // nothing fits"): those counts are searched again with the optimizer, or the parameters too,
    // in host memory. Its best plan is shown beside the best GPU-only one, and when no GPU-only plan
    // fits at all, it is the answer, with what the fewest GPUs that fit without offload would give.
    const auto counts = a.gpus.empty() ? std::vector<int>{base.num_gpus()} : a.gpus;
    std::vector<int> no_fit_counts;
    for (int g : counts) {
        SearchSpace one = o.space;
        one.gpu_counts = {g};
        bool fits = false;
        for (const auto& p : enumerate_layouts(base, one))
            if (model::check_layout(p).empty() &&
                model::fits_in_memory(p, model::peak_memory(p), p.hardware.hbm_capacity * (1.0 - o.memory_headroom))) {
                fits = true;
                break;
            }
        if (!fits) no_fit_counts.push_back(g);
    }
    std::optional<SearchResult> offload_res;
    if (!a.no_offload && !no_fit_counts.empty() && base.hardware.host_memory_bandwidth.value() > 0 &&
        base.hardware.cpu_adam_efficiency > 0) {
        SearchOptions oo = o;
        oo.progress = nullptr;
        oo.space.gpu_counts = no_fit_counts;
        oo.space.offloads = {model::Offload::optimizer, model::Offload::params};
        oo.space.shardings = {model::Sharding::zero1, model::Sharding::zero2, model::Sharding::zero3,
                              model::Sharding::fsdp, model::Sharding::dist_opt};
        oo.top = std::min<std::size_t>(o.top, 5);
        offload_res = search_plans(base, oo);
        (void)fold_equivalent_plans(offload_res->plans);
        for (auto& r : offload_res->plans) attach_band(r.estimate, r.plan, em);
        if (offload_res->plans.empty()) offload_res.reset();
    }
    // No plan at all: how close the nearest layout comes and what makes one fit.
    std::optional<FitAdvice> advice;
    if (res.plans.empty() && !offload_res && res.stats.does_not_fit > 0) {
        SearchSpace all_counts = o.space;
        all_counts.gpu_counts = counts;
        advice = fit_advice(enumerate_layouts(base, all_counts), o.memory_headroom);
    }
    // The offload plan is the answer: what the fewest GPUs without offload would give instead.
    std::optional<RankedPlan> gpu_only_alternative;
    if (res.plans.empty() && offload_res) {
        SearchSpace all_counts = o.space;
        all_counts.gpu_counts = {*std::max_element(counts.begin(), counts.end())};
        const auto more = fit_advice(enumerate_layouts(base, all_counts), o.memory_headroom, false).more_gpus;
        if (more) {
            SearchOptions go = o;
            go.progress = nullptr;
            go.space.gpu_counts = {more->plan.num_gpus()};
            go.top = 1;
            go.deadline_days.reset();
            go.budget.reset();
            auto g = search_plans(base, go);
            if (!g.plans.empty()) {
                gpu_only_alternative = std::move(g.plans.front());
                attach_band(gpu_only_alternative->estimate, gpu_only_alternative->plan, em);
            }
        }
    }
    for (auto& r : res.plans) attach_band(r.estimate, r.plan, em);
    for (auto& f : res.frontier)
        if (f.best) attach_band(f.best->estimate, f.best->plan, em);
    const bool expected_basis = o.basis == DaysBasis::expected;
    auto figure = [&](const RunEstimate& e) {
        return o.rank == RankBy::days ? (expected_basis ? e.expected_days : e.days_to_train)
                                      : (expected_basis ? e.expected_cost : e.cost);
    };
    auto p10 = [&](const RunEstimate& e) { return figure(e) * (e.band ? e.band->time_p10 : 1.0); };
    auto p90 = [&](const RunEstimate& e) { return figure(e) * (e.band ? e.band->time_p90 : 1.0); };
    if (rank_p90)
        std::stable_sort(res.plans.begin(), res.plans.end(),
                         [&](const auto& x, const auto& y) { return p90(x.estimate) < p90(y.estimate); });
    // Plans whose band overlaps the best one's are tied with it: the error model cannot tell them
    // apart. Among them the robust plan is recommended: no TP across nodes, fewer nodes, more
    // memory headroom, a simpler schedule (docs/trust.md).
    std::vector<bool> tied(res.plans.size(), false);
    std::size_t recommended = 0;
    std::string why_recommended;
    if (!res.plans.empty()) {
        const double best_hi = p90(res.plans.front().estimate);
        for (std::size_t i = 0; i < res.plans.size(); ++i) tied[i] = p10(res.plans[i].estimate) <= best_hi;
        auto headroom = [](const RunEstimate& e) { return model::to_gib(e.capacity) - model::to_gib(e.memory.total()); };
        auto tp_cross = [](const model::Plan& p) { return features_of(p).tp_across_nodes; };
        auto robustness = [&](const model::Plan& p, const RunEstimate& e) {
            const int complexity = (p.parallel.vp > 1) + (p.parallel.cp > 1) + (p.parallel.pp > 1);
            return std::make_tuple(tp_cross(p), p.cluster.nodes, -std::floor(headroom(e)), complexity);
        };
        for (std::size_t i = 1; i < res.plans.size(); ++i) {
            if (!tied[i]) continue;
            const auto& x = res.plans[i];
            const auto& b = res.plans[recommended];
            if (robustness(x.plan, x.estimate) < robustness(b.plan, b.estimate)) recommended = i;
        }
        if (recommended != 0) {
            const auto& x = res.plans[recommended];
            const auto& b = res.plans.front();
            std::vector<std::string> why;
            if (x.plan.cluster.nodes < b.plan.cluster.nodes) why.push_back("fewer nodes");
            const double hx = headroom(x.estimate), hb = headroom(b.estimate);
            if (hx > hb + 1) why.push_back(fmt::format("{:.0f} GiB more memory headroom", hx - hb));
            if (x.plan.parallel.vp < b.plan.parallel.vp || x.plan.parallel.cp < b.plan.parallel.cp ||
                x.plan.parallel.pp < b.plan.parallel.pp)
                why.push_back("a simpler schedule");
            if (tp_cross(b.plan) && !tp_cross(x.plan))
                why.push_back("no TP across nodes");
            why_recommended =
                fmt::format("#{} is tied with #1 within the error bands and more robust: {}", recommended + 1,
                            why.empty() ? "simpler" : fmt::format("{}", fmt::join(why, ", ")));
        }
    }

    if (a.json || a.csv) {
        nlohmann::json arr = nlohmann::json::array();
        for (std::size_t i = 0; i < res.plans.size(); ++i) {
            auto pj = plan_json(res.plans[i].plan, res.plans[i].estimate);
            pj["rank"] = i + 1;
            pj["tied_with_best"] = static_cast<bool>(tied[i]);
            pj["recommended"] = i == recommended;
            pj["equivalent_plans"] = folded[i];
            arr.push_back(std::move(pj));
        }
        if (a.json) {
            const auto& s = res.stats;
            nlohmann::json j{{"plans", arr},
                             {"search",
                              {{"enumerated", s.enumerated},
                               {"invalid", s.invalid},
                               {"does_not_fit", s.does_not_fit},
                               {"pruned_dominated", s.pruned_dominated},
                               {"pruned_bound", s.pruned_bound},
                               {"pruned_critical_path", s.pruned_critical_path},
                               {"simulated", s.simulated},
                               {"filtered", s.filtered},
                               {"folded_equivalent", folded_count},
                               {"seconds", s.seconds},
                               {"rank", o.rank == RankBy::days ? "days" : "cost"},
                               {"rank_p90", rank_p90},
                               {"recommended", recommended + 1},
                               {"recommended_why", why_recommended},
                               {"days", a.days}}}};
            if (!res.frontier.empty()) j["frontier"] = frontier_json(res.frontier);
            if (offload_res) {
                nlohmann::json off = nlohmann::json::array();
                for (const auto& r : offload_res->plans) off.push_back(plan_json(r.plan, r.estimate));
                j["offload_plans"] = off;
                j["search"]["offload_gpu_counts"] = no_fit_counts;
            }
            if (gpu_only_alternative) {
                auto gj = plan_json(gpu_only_alternative->plan, gpu_only_alternative->estimate);
                gj["speedup_vs_best_offload_plan"] =
                    offload_res->plans.front().estimate.days_to_train / gpu_only_alternative->estimate.days_to_train;
                j["gpu_only_alternative"] = gj;
            }
            if (advice) j["fit_advice"] = fit_advice_json(*advice);
            std::cout << j.dump(2) << "\n";
        } else if (a.frontier_csv) {
            // One row per GPU count: its best plan's columns, and whether it is on the Pareto front
            // (only num_gpus and pareto where no layout of that count qualifies).
            nlohmann::json rows = nlohmann::json::array();
            for (const auto& f : res.frontier) {
                nlohmann::json row = f.best ? plan_json(f.best->plan, f.best->estimate) : nlohmann::json::object();
                row["num_gpus"] = f.gpus;
                row["pareto"] = f.pareto;
                rows.push_back(std::move(row));
            }
            std::cout << plans_csv(rows);
        } else if (res.plans.empty() && offload_res) {
            nlohmann::json off = nlohmann::json::array();
            for (const auto& r : offload_res->plans) off.push_back(plan_json(r.plan, r.estimate));
            std::cout << plans_csv(off);
        } else {
            std::cout << plans_csv(arr);
        }
        return res.plans.empty() && !offload_res ? kExitDoesNotFit : kExitOk;
    }

    const auto& s = res.stats;
    std::cout << fmt::format("{} on {} ({}), {:.3g} tokens, global batch {} x {} tokens\n", base.model.name,
                             base.hardware.name, model::to_string(base.precision), base.training.tokens,
                             base.training.global_batch, base.training.seq_len);
    std::cout << fmt::format("searched {} layouts in {:.1f} s: {} invalid, {} do not fit (leaving {:.0f}% of HBM free), "
                             "{} dominated recompute, {} pruned by the stream bound, {} by the critical path, {} "
                             "simulated{}\n",
                             s.enumerated, s.seconds, s.invalid, s.does_not_fit, 100 * o.memory_headroom,
                             s.pruned_dominated, s.pruned_bound,
                             s.pruned_critical_path, s.simulated,
                             s.filtered ? fmt::format(", {} over the deadline/budget", s.filtered) : "");
    const bool expected = o.basis == DaysBasis::expected;
    const char* basis = expected ? "expected: checkpoints, failures, restarts" : "steady state";
    if (a.deadline_days) std::cout << fmt::format("deadline: {:g} days ({})\n", *a.deadline_days, basis);
    if (a.budget) std::cout << fmt::format("budget: {:g} {} total ({})\n", *a.budget, base.pricing.currency, basis);
    std::cout << fmt::format("ranked by {} ({})\n\n", o.rank == RankBy::days ? "days to train" : "total cost", basis);
    auto offload_table = [&]() {
        for (std::size_t i = 0; i < offload_res->plans.size(); ++i) {
            const auto& r = offload_res->plans[i];
            const auto& e = r.estimate;
            std::cout << fmt::format("{:>3}  {:>5}  {:<56} {:>8.1f} {:>12} {:>9.0f} {:>5.1f}% {:>6.1f} {:>6.0f}\n",
                                     i + 1, r.plan.num_gpus(), layout_label(r.plan), e.days_to_train,
                                     e.priced ? fmt::format("{:.0f}", e.cost) : "no price", e.tokens_per_s_per_gpu,
                                     100 * e.mfu, model::to_gib(e.memory.total()), model::to_gib(e.host_needed));
        }
    };
    auto offload_header = [&]() {
        std::cout << fmt::format("{:>3}  {:>5}  {:<56} {:>8} {:>12} {:>9} {:>6} {:>6} {:>6}\n", "#", "GPUs", "layout",
                                 "days", "cost", "tok/s/GPU", "MFU", "HBM", "host");
    };
    if (res.plans.empty()) {
        if (offload_res) {
            std::cout << fmt::format(
                "no GPU-only layout fits on {} GPU(s); with CPU offload (parallel.offload; memory "
                "in GiB per GPU and per node):\n",
                fmt::join(no_fit_counts, ","));
            offload_header();
            offload_table();
            const auto& best = offload_res->plans.front();
            std::cout << "\nbest plan:\n" << format_plan(best.plan, best.estimate);
            if (gpu_only_alternative) {
                const auto& g = *gpu_only_alternative;
                std::cout << fmt::format(
                    "\nwithout offload: {} GPUs is the fewest at which a GPU-only layout fits; its best, {}, trains in "
                    "{:.1f} days, {:.1f}x faster than the best offload plan ({:.1f} days){}\n",
                    g.plan.num_gpus(), layout_label(g.plan), g.estimate.days_to_train,
                    best.estimate.days_to_train / g.estimate.days_to_train, best.estimate.days_to_train,
                    g.estimate.priced && best.estimate.priced
                        ? fmt::format(", for {:.0f} {} instead of {:.0f}", g.estimate.cost, g.estimate.currency,
                                      best.estimate.cost)
                        : std::string());
            }
            return kExitOk;
        }
        std::cout << "no plan fits in memory and meets the constraints\n";
        if (advice) std::cout << "\n" << format_fit_advice(*advice);
        return kExitDoesNotFit;
    }
    std::cout << fmt::format("{:>3}  {:>5}  {:<40} {:>8} {:>9} {:>12} {:>9} {:>6} {:>8}\n", "#", "GPUs", "layout",
                             "days", "exp.days", expected ? "exp.cost" : "cost", "tok/s/GPU", "MFU", "mem GiB");
    for (std::size_t i = 0; i < res.plans.size(); ++i) {
        const auto& r = res.plans[i];
        const auto& e = r.estimate;
        std::cout << fmt::format("{:>3}{} {:>5}  {:<40} {:>8.1f} {:>9.1f} {:>12} {:>9.0f} {:>5.1f}% {:>8.1f}\n", i + 1,
                                 tied[i] ? "=" : " ", r.plan.num_gpus(), layout_label(r.plan), e.days_to_train,
                                 e.expected_days,
                                 e.priced ? fmt::format("{:.0f}", expected ? e.expected_cost : e.cost) : "no price",
                                 e.tokens_per_s_per_gpu, 100 * e.mfu, model::to_gib(e.memory.total()));
    }
    std::cout << "\n'=': tied with #1 (their 80% error bands overlap, docs/trust.md)\n";
    if (folded_count > 0) {
        std::cout << fmt::format("{} equivalent plan(s) folded into their simplest twin (same layout but for the sharding, "
                                 "same step time, memory and cost):\n",
                                 folded_count);
        for (std::size_t i = 0; i < folded.size(); ++i)
            if (!folded[i].empty())
                std::cout << fmt::format("  #{} stands for {}\n", i + 1, fmt::join(folded[i], "; "));
    }
    if (!why_recommended.empty()) std::cout << "recommended: " << why_recommended << "\n";
    std::cout << "\nbest plan:\n" << format_plan(res.plans.front().plan, res.plans.front().estimate);
    const auto& rt = res.plans.front().estimate.run;
    std::cout << fmt::format(
        "  whole run: {:.1f} days expected (x{:.4f}: x{:.3f} slowdowns, checkpoint {:.0f} GB written "
        "in {:.0f} s every {:.1f} h, cluster MTBF {:.1f} h, ~{:.0f} failures and ~{:.0f} planned "
        "stops at {:.0f} min each)\n",
        res.plans.front().estimate.expected_days, rt.overhead_factor, rt.stretch, rt.checkpoint_bytes / 1e9,
        rt.checkpoint_write_s, rt.checkpoint_interval_s / 3600, rt.cluster_mtbf_s / 3600, rt.expected_failures,
        rt.expected_planned, rt.restart_s / 60);
    if (res.plans.size() > 1) std::cout << "\n" << explain_winner(res.plans[0], res.plans[1]);
    if (!res.frontier.empty()) print_frontier_text(res.frontier, expected);
    if (offload_res) {
        std::cout << fmt::format("\nno GPU-only layout fits on {} GPU(s); with CPU offload there:\n",
                                 fmt::join(no_fit_counts, ","));
        offload_header();
        offload_table();
    }
    return kExitOk;
}

} // namespace

int run_cli(int argc, char** argv) {
    CLI::App app{"trainsim: discrete-event simulation of LLM training steps -> days, GPU-hours, money"};
    app.set_version_flag("--version", std::string("trainsim ") + TRAINSIM_VERSION);
    app.require_subcommand(1);
    Common sim_args, cmp_args, exp_args;
    auto* simulate = app.add_subcommand("simulate", "simulate every plan of a scenario and report each in detail");
    add_common(simulate, sim_args);
    add_csv(simulate, sim_args);
    simulate->add_option("--trace", sim_args.trace,
                         "write the simulated step as a Chrome/Perfetto trace (several plans: FILE.1.json, "
                         "FILE.2.json ...)");
    auto* compare = app.add_subcommand("compare", "simulate a scenario's plans and show them side by side");
    add_common(compare, cmp_args);
    add_csv(compare, cmp_args);
    Common rep_args;
    ReportArgs rep_opts;
    auto* report_cmd = app.add_subcommand("report", "write a self-contained HTML report of a scenario (and print what "
                                                "compare prints)");
    add_common(report_cmd, rep_args);
    add_csv(report_cmd, rep_args);
    report_cmd->add_option("--html", rep_opts.html, "the HTML file to write")->required();
    report_cmd->add_option("--scaling-gpus", rep_opts.scaling_gpus,
                           "GPU counts of the scaling chart (default 8,16,...,1024)")
        ->delimiter(',')
        ->check(CLI::Range(1, 1 << 20));
    report_cmd->add_flag("--no-scaling", rep_opts.no_scaling, "leave the scaling chart out");
    auto* keys = app.add_subcommand("keys", "list every scenario key with its type, unit, default and description");
    bool markdown = false;
    keys->add_flag("--markdown", markdown, "as a Markdown table (docs/scenario-keys.md)");
    auto* expl = app.add_subcommand("explain", "show the workload (op shapes and collectives) a scenario builds");
    add_common(expl, exp_args);

    Common topo_args;
    FabricArgs topo_fabric;
    std::string topo_dot;
    auto* topo = app.add_subcommand("topology", "print the cluster topology a scenario builds (or write it as GraphViz)");
    add_common(topo, topo_args);
    add_fabric(topo, topo_fabric);
    topo->add_option("--dot", topo_dot, "write GraphViz to this file ('-' for stdout) instead of the summary");

    CollectiveArgs coll_args;
    auto* coll = app.add_subcommand("collective", "time one NCCL collective on a cluster (nccl-tests algbw / busbw)");
    coll->add_option("--gpu", coll_args.gpu, "hardware profile id or YAML path")->required();
    coll->add_option("--op", coll_args.op, "all_reduce | all_gather | reduce_scatter | all_to_all | send_recv");
    coll->add_option("--gpus", coll_args.gpus, "GPUs in the collective (whole nodes when more than one node)");
    coll->add_option("--gpus-per-node", coll_args.gpus_per_node, "GPUs per node (default: the profile's node)");
    coll->add_option("--nics-per-node", coll_args.nics_per_node, "NICs per node (default: the profile's node)");
    coll->add_option("--nic-rate", coll_args.nic_rate, "line rate per NIC, e.g. 400Gbit/s (default: the profile's)");
    coll->add_option("--intra", coll_args.intra, "fabric inside a node: nvswitch | nvlink-bridge | pcie");
    coll->add_option("--size", coll_args.size, "buffer size (nccl-tests -b/-e), e.g. 4GiB");
    coll->add_option("--algo", coll_args.algo, "force an algorithm: ring | tree | nvls | nvls_tree | direct");
    coll->add_option("--data-dir", coll_args.data_dir, "folder with hardware/ (default: $TRAINSIM_DATA_DIR or the "
                                                      "shipped scenarios/)");
    add_fabric(coll, coll_args.fabric);
    coll->add_flag("--json", coll_args.json, "print time_s, algbw_gbps, busbw_gbps, algorithm as JSON");

    auto* val = app.add_subcommand("validate", "simulate every row of a published-measurements CSV and report the error");
    std::string val_file, val_data, val_kind;
    bool val_json = false, val_verbose = false;
    val->add_option("FILE", val_file, "CSV in the schema of shared/validation/README.md")->required();
    val->add_option("--data-dir", val_data, "folder with models/ and hardware/");
    val->add_option("--kind", val_kind, "only rows of this kind (step | end_to_end)");
    val->add_flag("--json", val_json, "print machine-readable JSON");
    val->add_flag("--verbose,-v", val_verbose, "list what was chosen for blank cells, per row");
    std::vector<std::string> val_rows;
    val->add_option("--row", val_rows,
                    "print the full simulation report of these row ids instead (with --json: their JSON report)");

    auto* emc = app.add_subcommand("error-model",
                                   "run validate on published-measurement files and write the error-band table "
                                   "(docs/trust.md)");
    std::vector<std::string> em_files, em_held_out;
    std::string em_out, em_data;
    emc->add_option("FILES", em_files, "published-measurement CSVs (rows that guided a constant: seen)")->required();
    emc->add_option("--held-out", em_held_out, "CSVs whose rows guided no constant (held out)");
    emc->add_option("--out", em_out, "write the table here (atomically) instead of stdout");
    emc->add_option("--data-dir", em_data, "folder with models/ and hardware/");

    PlanArgs plan_args;
    auto* plan_cmd = app.add_subcommand("plan", "search every valid parallel layout, simulate those that fit, rank them");
    plan_cmd->add_option("FILE", plan_args.file, "scenario YAML (its first plan gives model, training, GPU, pricing)");
    plan_cmd->add_option("--data-dir", plan_args.data_dir, "folder with models/ and hardware/");
    plan_cmd->add_option("--profile", plan_args.profile, "hardware profile YAML used instead of the scenario's");
    plan_cmd->add_option("--model", plan_args.model, "model preset id (e.g. llama2-70b)");
    plan_cmd->add_option("--gpu", plan_args.gpu, "hardware profile id (e.g. h100-sxm)");
    plan_cmd->add_option("--gpus", plan_args.gpus, "GPU count(s) to search, e.g. 64 or 32,64")->delimiter(',');
    plan_cmd->add_option("--tokens", plan_args.tokens, "tokens to train on, e.g. 1T");
    plan_cmd->add_option("--seq-len", plan_args.seq_len, "sequence length (default 4096)");
    plan_cmd->add_option("--global-batch", plan_args.global_batch, "sequences per step (default 1024)");
    plan_cmd->add_option("--precision", plan_args.precision, "bf16 | fp16 | fp8 (default bf16)");
    plan_cmd->add_option("--price", plan_args.price,
                         "price per GPU-hour (flag form; default: none, and money is reported as 'no price')");
    plan_cmd->add_option("--currency", plan_args.currency, "currency of --price (default USD)");
    plan_cmd->add_option("--top", plan_args.top, "plans to show (default 10)");
    plan_cmd->add_option("--rank", plan_args.rank, "days | cost (default: cost with --deadline-days, else days)");
    plan_cmd->add_option("--deadline-days", plan_args.deadline_days, "cheapest plan that trains in at most this many days");
    plan_cmd->add_option("--budget", plan_args.budget, "fastest plan that costs at most this much");
    plan_cmd->add_option("--max-micro-batch", plan_args.max_micro_batch, "largest micro-batch tried (default 8)");
    plan_cmd->add_option("--memory-headroom", plan_args.memory_headroom,
                         "HBM a plan must leave free against allocator fragmentation, e.g. 5% (default 5%)");
    plan_cmd->add_flag("--try-without-sp", plan_args.try_without_sp, "also try tp > 1 without sequence parallelism");
    plan_cmd->add_flag("--no-prune", plan_args.no_prune, "simulate every plan that fits (no dominance / bound pruning)");
    plan_cmd->add_option("--threads", plan_args.threads, "worker threads (default: all cores)");
    plan_cmd->add_option("--days", plan_args.days,
                         "steady | expected: days (and cost) ranked and held to --deadline-days / --budget, "
                         "steady state or with checkpoints, failures and restarts (default steady)");
    plan_cmd->add_option("--checkpoint-bandwidth", plan_args.checkpoint_bandwidth,
                         "checkpoint write bandwidth per node (default: the scenario's run.checkpoint_bandwidth, "
                         "5 GB/s)");
    plan_cmd->add_option(
        "--gpu-mtbf-hours", plan_args.gpu_mtbf_hours,
        "mean time between interruptions blamed on one GPU (default: run.gpu_mtbf, Llama 3's 64,149 h)");
    plan_cmd->add_option("--restart-minutes", plan_args.restart_minutes,
                         "time lost per restart besides lost work (default: run.restart, 17 min from Llama 3)");
    plan_cmd->add_flag("--json", plan_args.json, "print {\"plans\": [...]} as JSON");
    plan_cmd->add_flag("--csv", plan_args.csv, "print the plans as CSV");
    plan_cmd->add_flag("--frontier", plan_args.frontier_csv,
                       "with --csv and several --gpus: one row per GPU count, its best plan and whether it is on the "
                       "days-vs-cost Pareto front");
    plan_cmd->add_flag("--quiet,-q", plan_args.quiet, "no progress bar");
    plan_cmd->add_flag("--no-offload", plan_args.no_offload,
                       "do not try CPU offload where no GPU-only layout fits (parallel.offload)");

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        // A first word that is not an option and names no command: say so, with the closest one
        // (CLI11 alone says "A subcommand is required").
        if (argc > 1 && argv[1][0] != '-') {
            std::vector<std::string> names;
            for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; }))
                names.push_back(sub->get_name());
            if (std::find(names.begin(), names.end(), argv[1]) == names.end()) {
                std::cerr << fmt::format("trainsim: unknown command '{}'{} (one of: {}); see trainsim --help\n",
                                         argv[1], model::did_you_mean(argv[1], names), fmt::join(names, ", "));
                return kExitBadInput;
            }
        }
        const int rc = app.exit(e);
        return rc == 0 ? kExitOk : kExitBadInput;
    }
    if (*simulate) return run_plans(sim_args, false);
    if (*compare) return run_plans(cmp_args, true);
    if (*report_cmd) return run_report(rep_args, rep_opts);
    if (*keys) return print_keys(markdown);
    if (*expl) return explain(exp_args);
    if (*topo) return print_topology(topo_args, topo_fabric, topo_dot);
    if (*coll) return run_collective(coll_args);
    if (*plan_cmd) return run_plan_search(plan_args);
    if (*emc) {
        std::vector<ErrorSample> samples;
        std::vector<std::pair<std::string, bool>> files;
        for (const auto& f : em_files) files.emplace_back(f, false);
        for (const auto& f : em_held_out) files.emplace_back(f, true);
        const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
        for (const auto& [file, held_out] : files) {
            const auto rows = model::load_validation_csv(file, data_dir(em_data));
            const auto s = error_samples(rows, fs::path(file).filename().string(), held_out, threads);
            samples.insert(samples.end(), s.begin(), s.end());
        }
        const auto table = error_model_json(build_error_model(samples)).dump(1) + "\n";
        if (em_out.empty())
            std::cout << table;
        else
            if (const auto note = write_file_atomically(em_out, "--out", [&](std::ostream& os) { os << table; });
                !note.empty())
                std::cerr << "trainsim: " << note << "\n";
        return kExitOk;
    }
    if (*val) {
        if (!val_kind.empty() && val_kind != "step" && val_kind != "end_to_end") {
            std::cerr << fmt::format("trainsim: validate: --kind: unknown kind '{}'{} (step, end_to_end)\n", val_kind,
                                     model::did_you_mean(val_kind, {"step", "end_to_end"}));
            return kExitBadInput;
        }
        auto rows = model::load_validation_csv(val_file, data_dir(val_data));
        for (const auto& id : val_rows) {
            if (std::none_of(rows.begin(), rows.end(), [&](const model::ValidationRow& r) { return r.id == id; })) {
                std::cerr << fmt::format("trainsim: {}: --row {}: no row with this id\n", val_file, id);
                return kExitBadInput;
            }
        }
        if (!val_rows.empty() && val_json) {
            // --json with --row: the JSON report of just those rows.
            std::erase_if(rows, [&](const model::ValidationRow& r) {
                return std::find(val_rows.begin(), val_rows.end(), r.id) == val_rows.end();
            });
        } else if (!val_rows.empty()) {
            for (const auto& row : rows) {
                if (std::find(val_rows.begin(), val_rows.end(), row.id) == val_rows.end()) continue;
                if (!row.skip_reason.empty()) {
                    std::cout << "row " << row.id << ": skipped: " << row.skip_reason << "\n";
                    continue;
                }
                auto choices = row.choices;
                const auto plan = tune_blank_cells(row, choices);
                const auto e = estimate_plan(plan, {}, true);
                std::cout << format_plan(plan, e);
                if (e.step) {
                    std::cout << "  compute-stream time by kernel:";
                    for (const auto& [name, t] : e.step->kernel_time)
                        std::cout << fmt::format(" {} {:.1f}%,", name, 100.0 * t.seconds() / e.step_time_s);
                    std::cout << "\n";
                }
                std::cout << fmt::format("  measured {:.0f} tokens/s per GPU ({})\n", row.measured_tokens_per_s_per_gpu,
                                         row.source);
                for (const auto& c : choices) std::cout << "  chose " << c << "\n";
                std::cout << "\n";
            }
            return kExitOk;
        }
        const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
        const auto em = load_error_model(data_dir(val_data));
        const bool bar = rows.size() >= kProgressFrom && isatty(STDERR_FILENO) != 0;
        const auto rep =
            validate_rows(rows, val_kind, threads, em ? &*em : nullptr, bar ? progress_bar("rows") : nullptr);
        if (val_json) std::cout << report_json(rep).dump(2) << "\n";
        else std::cout << report_text(rep, val_verbose);
        if (rep.overall.n == 0) {
            // A file with no row, or none that could be compared, measured nothing: not a 0% error.
            std::cerr << fmt::format("trainsim: {}: no row was compared ({} rows, {} skipped)\n", val_file,
                                     rep.rows.size(), rep.skipped);
            return kExitBadInput;
        }
        return kExitOk;
    }
    return kExitBadInput;
}

} // namespace trainsim::sim
