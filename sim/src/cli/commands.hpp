// The trainsim commands behind run_cli (cli.cpp): their arguments and entry points, one file per
// group: scenario_commands.cpp (simulate, compare, report, keys, explain), network_commands.cpp
// (topology, collective), plan_command.cpp (plan). Internal to sim/src/cli.
#pragma once

#include "trainsim/sim/cli/cli.hpp"

#include "trainsim/model/accounting/flops.hpp"
#include "trainsim/model/accounting/layout.hpp"
#include "trainsim/model/accounting/memory_model.hpp"
#include "trainsim/model/input/loader.hpp"
#include "trainsim/model/input/validation_set.hpp"
#include "trainsim/model/workload/workload.hpp"
#include "trainsim/sim/network/network.hpp"
#include "trainsim/sim/network/topology.hpp"
#include "trainsim/sim/report/html_report.hpp"
#include "trainsim/sim/report/output_file.hpp"
#include "trainsim/sim/report/report.hpp"
#include "trainsim/sim/report/trace.hpp"
#include "trainsim/sim/run/estimate.hpp"
#include "trainsim/sim/search/constraint_miss.hpp"
#include "trainsim/sim/search/fit_advice.hpp"
#include "trainsim/sim/search/plan_search.hpp"
#include "trainsim/sim/search/scaling.hpp"
#include "trainsim/sim/trust/trust.hpp"
#include "trainsim/sim/validate/accumulation_split.hpp"
#include "trainsim/sim/validate/validate.hpp"
#include "trainsim/sim/stack/stack_report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <functional>
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


namespace trainsim::sim::cli {

namespace fs = std::filesystem;

struct Common {
    std::string file;
    // The scenario as YAML text held in memory (the Python module's dict); `file` names it in messages.
    std::optional<std::string> text;
    // With json: the JSON goes here instead of standard output (the Python module returns it).
    nlohmann::json* json_out = nullptr;
    std::string data_dir;
    std::string profile;
    std::string stack;  // --stack: a stack profile for every plan
    bool json = false;
    bool csv = false;
    bool all_ranks = false;
    std::string trace;  // simulate --trace
    std::string lang = "en"; // --lang: the language of the text tables and the HTML (lang.hpp), checked by CLI11
};

struct ReportArgs {
    std::string html;
    std::vector<int> scaling_gpus = default_scaling_gpu_counts();
    bool no_scaling = false;
};

// Fabric flags; for `topology` they override the scenario's cluster.oversubscription and
// cluster.nodes_per_leaf only when given.
struct FabricArgs {
    std::optional<double> oversubscription;
    std::optional<int> nodes_per_leaf;
};

struct CollectiveArgs {
    std::string gpu;
    std::string op = "all_reduce";
    std::string size = "4GiB";
    int gpus = 8;
    std::optional<int> gpus_per_node;  // absent: the profile's node
    std::optional<int> nics_per_node;  // absent: the profile's node
    std::string nic_rate;    // empty: the profile's node
    std::string intra;  // empty: the profile's typical node (nvswitch, or nvlink-bridge pairs)
    std::string algo;        // empty: the fastest, as NCCL's tuner picks
    std::string data_dir;
    FabricArgs fabric;
    bool json = false;
};

// `plan --gpus`: at most 65,536 GPUs: the largest clusters built are ~100k GPUs, the largest
// published run used 16,384 (Llama 3); beyond, the search's per-GPU topology and groups exhaust the
// memory.
inline constexpr int kMaxPlanGpus = 65536;

struct PlanArgs {
    std::string file;
    std::optional<std::string> text;   // as Common::text
    nlohmann::json* json_out = nullptr; // as Common::json_out
    std::string memory_headroom; // a fraction ("5%"); empty: kMemoryHeadroomFraction
    std::string data_dir;
    std::string profile;
    std::string stack;  // --stack
    std::string model;
    std::string gpu;
    std::vector<int> gpus;
    std::optional<std::string> tokens; // absent: the compute-optimal budget (kComputeOptimalTokensPerParam)
    int seq_len = 4096;
    int global_batch = 1024;
    std::string precision = "bf16";
    std::string method = "pretrain"; // training.method of the flag form (pretrain | full | lora | qlora)
    std::optional<double> price; // absent: the scenario's price, or none
    std::string currency = "USD";
    long long top = 10;  // signed: "--top -1" must be an error, not 2^64 - 1
    std::string rank;  // days | cost; empty: cost with a deadline, else days
    std::optional<double> deadline_days;
    std::optional<double> budget;
    int max_micro_batch = 8;
    bool try_without_sp = false;
    // Pipeline schedules to search (parallel.pp_schedule names; auto: 1f1b and interleaved);
    // empty: those the base plan's framework offers (FrameworkProfile::pp_schedules).
    std::vector<std::string> pp_schedules;
    bool no_prune = false;
    unsigned threads = 0;
    bool json = false;
    bool csv = false;
    bool frontier_csv = false; // with --csv: one row per GPU count (its best plan) instead
    bool quiet = false;
    bool no_offload = false;
    // steady | expected: the days and the bill ranked and held to --deadline-days / --budget.
    // Expected by default: the wall clock with failures and restarts, and the bill for it in whole
    // billing units, is what a budget holder pays (issue #45).
    std::string days = "expected";
    // Override the scenario's run.* settings (the key table's defaults without a scenario).
    std::optional<std::string> checkpoint_bandwidth;
    std::optional<double> gpu_mtbf_hours;
    std::optional<double> restart_minutes;
    // --max-tokens: the most tokens within --budget / --deadline-days, per GPU count; with
    // --models, the largest of these models that reaches its compute-optimal tokens.
    bool max_tokens = false;
    std::vector<std::string> models;
    std::string lang = "en"; // --lang (lang.hpp)
};

fs::path data_dir(const std::string& flag);
std::optional<ErrorModel> load_error_model(const fs::path& dir);

void attach_band(RunEstimate& e, const model::Plan& plan, const std::optional<ErrorModel>& em);
void add_csv(CLI::App* cmd, Common& c);

void add_common(CLI::App* cmd, Common& c);
// --lang: the language of a command's text tables and HTML (JSON and CSV stay as they are); an
// unknown tag is a usage error listing the languages there are.
void add_lang(CLI::App* cmd, std::string& lang);
// A CLI11 check: an option whose value names a file may not be empty.
std::string non_empty_path(const std::string& v);
void note_profile_override(const std::string& profile, std::size_t plans);

model::Scenario load(const Common& c);

void print_results(const Common& c, const model::Scenario& scenario, const std::vector<PlanResult>& results,
                   bool side_by_side);
fs::path trace_path(const fs::path& base, std::size_t index, std::size_t count);

void write_trace(const Common& c, const model::Plan& plan, RunEstimate& e, const fs::path& path);

// `record_passes`: keep each plan's pipeline passes (ExecOptions::record_passes) for the HTML timeline.
std::vector<PlanResult> simulate_plans(const Common& c, const model::Scenario& scenario, bool& all_fit,
                                       bool record_passes = false);

int run_plans(const Common& c, bool side_by_side);


int run_report(const Common& c, const ReportArgs& a);
std::string accepted_values(const model::KeySpec& k);

int print_keys(bool markdown);

int explain(const Common& c);


void add_fabric(CLI::App* cmd, FabricArgs& f);

int print_topology(const Common& c, const FabricArgs& f, const std::string& dot);


int run_collective(const CollectiveArgs& a);
[[noreturn]] void plan_arg_error(const std::string& key, const std::string& msg);
// The flag form's token budget when --tokens is not given: Chinchilla's compute-optimal ~20
// tokens per parameter (Hoffmann et al. 2022, Table 3: 67B -> 1.5T, 10B -> 205B).
inline constexpr double kComputeOptimalTokensPerParam = 20.0;
model::Plan plan_base(const PlanArgs& a);
nlohmann::json frontier_json(const std::vector<CountBest>& frontier);

// `miss`: why counts without a plan have none (explain_constraint_miss), when it was asked. `tr`:
// the table's language (--lang).
void print_frontier_text(const std::vector<CountBest>& frontier, bool expected, const std::string& currency,
                         const std::optional<ConstraintMiss>& miss, const Translator& tr);

int run_plan_search(const PlanArgs& a);
// plan --max-tokens (max_tokens_command.cpp), on the base plan and the options run_plan_search
// checked and built.
int run_max_tokens(const PlanArgs& a, const model::Plan& base, const SearchOptions& o);

// The node the measured runs of a file were made on, where the command line states it (validate,
// fit-stack): --gpus-per-node, --nics-per-node, --nic-rate, each checked as its scenario key.
struct ClusterFlags {
    int gpus_per_node = 0;
    int nics_per_node = -1;
    std::string nic_rate;
    CLI::Option* gpus_per_node_opt = nullptr;
    CLI::Option* nics_per_node_opt = nullptr;
};
void add_cluster_flags(CLI::App* cmd, ClusterFlags& f, const std::string& what = "the file's runs were measured on");
// The flags given, checked; nullopt after printing each problem (prefixed with `command`).
std::optional<model::ValidationCluster> checked_cluster(const ClusterFlags& f, const std::string& command);

// trainsim sweep (sweep_command.cpp)
struct SweepArgs {
    std::string grid;
    // The grid as YAML text held in memory (the Python module's dict; its relative paths are read
    // from the current directory); `grid` names it in messages.
    std::optional<std::string> grid_text;
    // With json and no out: the rows go here (an array) instead of standard output.
    nlohmann::json* json_out = nullptr;
    std::string out; // .csv or .jsonl; empty: a table (or --csv / --json lines) on standard output
    std::string data_dir;
    std::string html; // the market table page; empty: none
    bool resume = false;
    bool force = false;
    bool json = false;
    bool csv = false;
    bool quiet = false;
    bool progress = false; // the progress line even when standard error is not a terminal
    unsigned threads = 0;  // per search; 0: the cores left to each of the `jobs`
    unsigned jobs = 0;     // searches at once in this process; 0: one per core (up to the searches)
};
int run_sweep(const SweepArgs& a);
std::string layout_words(const nlohmann::json& row);

// trainsim fit-stack
struct FitStackArgs {
    std::vector<std::string> files;
    std::string out;
    std::string name;
    std::string data_dir;
    bool force = false;
    bool json = false;
    ClusterFlags cluster;
};
std::string command_line(int argc, char** argv);
// Fits a stack on the rows of `files` (validation schema); a file with no usable run is an input error.
// `cluster`: the node the runs were measured on, where the command line states it (validate's
// --gpus-per-node / --nics-per-node / --nic-rate apply to the runs as to the rows).
StackFitResult fit_on_files(const std::vector<std::string>& files, const std::string& data, const std::string& name,
                            const std::string& fitted_with, const model::ValidationCluster& cluster = {});
int run_fit_stack(const FitStackArgs& a, const std::string& fitted_with);

// A progress bar on standard error for `what` ("plans", "rows"), shown from kProgressFrom items.
[[nodiscard]] std::function<void(std::size_t, std::size_t)> progress_bar(std::string what);
inline constexpr std::size_t kProgressFrom = 50;

} // namespace trainsim::sim::cli
