// Published training measurements (../shared/validation/README.md schema) turned into plans.
// Blank cells are filled with what the row's framework would use, and every such choice is
// recorded so `trainsim validate` can say what it chose.
#pragma once

#include "trainsim/model/core/scenario.hpp"
#include "trainsim/model/framework/framework_profile.hpp"

#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trainsim::model {

struct ValidationRow {
    std::string id;
    int line = 0;  // in the CSV file
    std::string source_group;
    std::string source;
    std::string gpu;
    std::string framework;
    std::string kind;  // step | end_to_end
    double measured_tokens_per_s_per_gpu = 0;
    Plan plan;                         // valid only when skip_reason is empty
    std::vector<std::string> choices;  // "micro_batch=1 (blank; Megatron default)"...
    // Blank cells the simulator may tune as the source's benchmark would have been tuned.
    bool micro_batch_blank = false;
    bool recompute_blank = false;
    bool vp_blank = false;  // pp > 1 and the source does not say whether it interleaved
    // Blank tp / pp that could not follow from the GPU count and took the frameworks' default 1:
    // the source's layout is unknown, so a plan that does not fit says so rather than blaming
    // the memory model.
    std::vector<std::string> defaulted_degrees;
    bool dp_blank = false;                // dp followed from the GPU count
    bool sequence_parallel_blank = false; // taken from the framework (tp > 1)
    bool vp_cell_blank = false;           // the vp cell itself (vp_blank also needs pp > 1)
    bool sharding_blank = false;          // taken from the framework
    std::string skip_reason;           // why the row cannot be simulated
    // Of what kind that reason is (a short phrase, the same for every row skipped the same way, that
    // a run's summary counts rows by) and the column it is about (its header name; empty where no
    // one column is to blame).
    std::string skip_kind;
    std::string skip_column;
    // The file's header, shared by its rows: each column's 1-based number by name (null for a row
    // made elsewhere than load_validation_csv).
    std::shared_ptr<const std::map<std::string, int>> columns;
    // The cells the plan follows from, joined: rows of one file with the same key have the same
    // plan, choices and skip reason (validate simulates them once). Empty: no key (a row made
    // elsewhere than load_validation_csv), simulated on its own.
    std::string plan_key;
    // `name`'s 1-based column number in the row's file; 0 when unknown.
    [[nodiscard]] int column_number(const std::string& name) const;
    // Where each of the cluster's node fields came from: kFromCommandLine, the source's entry in
    // a clusters file ("file:line") or kFromProfile (the GPU profile's typical node).
    struct ClusterOrigin {
        std::string gpus_per_node, nics_per_node, nic_rate;
    } cluster_origin;
};

inline constexpr std::string_view kFromCommandLine = "command line";
inline constexpr std::string_view kFromProfile = "profile";

// The cluster the file's runs were measured on, where its source states one and the schema has no
// column for it (`trainsim validate --gpus-per-node / --nics-per-node / --nic-rate`). Applies to
// every row of the file; unset fields take the row's source's entry in the clusters file, if any,
// else the GPU profile's typical node.
struct ValidationCluster {
    int gpus_per_node = 0;              // 0: the profile's
    int nics_per_node = -1;             // -1: the profile's
    std::optional<Bandwidth> nic_rate;  // per NIC; empty: the profile's
    [[nodiscard]] bool stated() const { return gpus_per_node > 0 || nics_per_node >= 0 || nic_rate.has_value(); }
};

// What one published source states about the cluster its runs were measured on, where the
// validation schema has no column for it: an entry of scenarios/validation/clusters.yaml. It
// applies to every row whose `source` cell begins with one of `sources` (the longest prefix wins);
// fields the command line states (the ValidationCluster passed to load_validation_csv) win over it.
// Only facts the source states, each with where it states them; never an efficiency or anything
// read off the rows.
struct SourceCluster {
    std::vector<std::string> sources;  // prefixes of a row's `source` cell
    ValidationCluster cluster;
    std::string stated;       // where the source states it
    std::string assumed;      // what the entry adds to the statement (e.g. how a total splits into NICs)
    std::string file;         // where the entry is written, for the choice shown per row
    int line = 0;
};

// Where a data folder keeps its clusters file (validation/clusters.yaml).
[[nodiscard]] std::filesystem::path source_clusters_file(const std::filesystem::path& data_dir);

// The entries of a clusters file (source_clusters_file of a data folder). A file that does not
// exist has none; a malformed one throws ScenarioError naming the file, line and key.
[[nodiscard]] std::vector<SourceCluster> load_source_clusters(const std::filesystem::path& file);

// Reads the CSV (RFC 4180 quoting). A malformed file (missing or repeated column, unparsable
// number) throws ScenarioError naming file:line and column; a row that is well-formed but cannot be
// simulated (unknown GPU profile, a model shape or layout that breaks a rule, a cell that is none
// of its column's words) is returned with skip_reason set, so that one bad row of a published file
// never hides the others. What is read but deserves a word (a column the schema does not have, an
// id two rows share) goes to `warnings` when given.
[[nodiscard]] std::vector<ValidationRow> load_validation_csv(const std::filesystem::path& file,
                                                             const std::filesystem::path& data_dir,
                                                             const ValidationCluster& cluster = {},
                                                             std::vector<Diagnostic>* warnings = nullptr);

} // namespace trainsim::model
