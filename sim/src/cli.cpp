#include "trainsim/sim/cli.hpp"

#include "trainsim/model/loader.hpp"
#include "trainsim/model/workload.hpp"
#include "trainsim/sim/estimate.hpp"
#include "trainsim/sim/network.hpp"
#include "trainsim/sim/topology.hpp"
#include "trainsim/sim/report.hpp"
#include "trainsim/sim/validate.hpp"
#include "trainsim/model/validation_set.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <algorithm>
#include <map>
#include <optional>
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

// ---- trainsim topology / trainsim collective (docs/network.md) ----

struct FabricArgs {
    double oversubscription = 1.0;
    int nodes_per_leaf = TopologyOptions{}.nodes_per_leaf;
};

void add_fabric(CLI::App* cmd, FabricArgs& f) {
    cmd->add_option("--oversubscription", f.oversubscription,
                    "leaf down:up bandwidth ratio of the fat tree (1 = non-blocking)");
    cmd->add_option("--nodes-per-leaf", f.nodes_per_leaf, "nodes per scalable unit (one leaf switch per rail)");
}

TopologyOptions topology_options(const FabricArgs& f) {
    TopologyOptions o;
    o.oversubscription = f.oversubscription;
    o.nodes_per_leaf = f.nodes_per_leaf;
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
            Topology(plan.hardware, plan.cluster, topology_options(f)).write_dot(*os, plan.name);
        return kExitOk;
    }
    for (const auto& plan : scenario.plans) {
        const Topology topo(plan.hardware, plan.cluster, topology_options(f));
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
    if (!op) problem("--op", fmt::format("unknown collective '{}' (all_reduce, all_gather, reduce_scatter, "
                                         "all_to_all, send_recv)", a.op));
    Bytes bytes;
    try {
        bytes = model::parse_bytes(a.size);
        if (!(bytes.value() > 0)) problem("--size", "must be positive");
    } catch (const model::UnitError& e) {
        problem("--size", e.what());
    }
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
    else problem("--intra", fmt::format("unknown fabric '{}' (nvswitch, nvlink-bridge, pcie)", a.intra));
    std::optional<Algorithm> algo;
    if (!a.algo.empty()) {
        algo = parse_algorithm(a.algo);
        if (!algo) problem("--algo", fmt::format("unknown algorithm '{}' (ring, tree, nvls, nvls_tree, direct)", a.algo));
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
    if (*topo) return print_topology(topo_args, topo_fabric, topo_dot);
    if (*coll) return run_collective(coll_args);
    if (*val) {
        const auto rows = model::load_validation_csv(val_file, data_dir(val_data));
        if (!val_rows.empty()) {
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
        const auto rep = validate_rows(rows, val_kind, threads);
        if (val_json) std::cout << report_json(rep).dump(2) << "\n";
        else std::cout << report_text(rep, val_verbose);
        return kExitOk;
    }
    return kExitBadInput;
}

} // namespace trainsim::sim
