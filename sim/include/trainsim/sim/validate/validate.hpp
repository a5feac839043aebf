// `trainsim validate`: every row of a published-measurements file simulated and compared.
#pragma once

#include "trainsim/model/input/validation_set.hpp"
#include "trainsim/sim/run/estimate.hpp"
#include "trainsim/sim/step/executor.hpp"
#include "trainsim/sim/trust/trust.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace trainsim::sim {

struct RowResult {
    std::string id;
    int line = 0;        // in the CSV file
    std::string status;  // ok | skipped | does_not_fit
    // A skipped row: the kind of its reason (a short phrase shared by every row skipped the same
    // way) and the column the reason is about (name and 1-based number; empty / 0: none).
    std::string skip_kind;
    std::string column;
    int column_number = 0;
    // The row is also one of the runs a stack was fitted on (validate --fit-on): compared and
    // reported, but left out of every summary (it would judge the fit on its own data).
    bool in_fit = false;
    double predicted = 0;  // tokens/s/GPU
    double measured = 0;
    double error_pct = 0;  // (predicted - measured) / measured * 100
    std::string reason;
    std::string gpu, precision, source_group, kind;
    std::vector<std::string> choices;
    // Where the node's GPUs, NICs and NIC rate came from (command line, a clusters file's entry,
    // the profile).
    model::ValidationRow::ClusterOrigin cluster_origin;
    // The simulated plan's regime and features (error model), and its band when one was given.
    Regime regime;
    PlanFeatures features;
    bool has_band = false;
    double predicted_p10 = 0, predicted_p90 = 0; // tokens/s/GPU
    std::vector<std::string> out_of_domain;
    // The simulated step behind `predicted` (rows that were simulated): its time, where it went,
    // and the host thread's busy time, so a row's error can be read against its causes.
    bool has_step = false;
    double step_time_s = 0, host_busy_s = 0;
    StepBreakdown breakdown;
    // The simulated plan's layout (blank cells as chosen), for grouping errors (validate --by).
    struct Layout {
        int tp = 0, pp = 0, vp = 0, cp = 0, dp = 0, micro_batch = 0, grad_accum = 0, gpus = 0, seq_len = 0;
        double tokens_per_gpu = 0; // global batch x sequence length / GPUs: tokens per GPU per step
        std::string sharding, recompute, framework;
    } layout;
};

struct ErrorStats {
    int n = 0;
    double mape = 0, median = 0, p90 = 0, max = 0;  // of |error| in percent
    double bias = 0;                                // mean signed error in percent
    double median_signed = 0;                       // median signed error in percent
};
[[nodiscard]] ErrorStats error_stats(const std::vector<double>& signed_errors_pct);

struct ValidationReport {
    std::vector<RowResult> rows;
    ErrorStats overall;
    std::map<std::string, ErrorStats> by_gpu_precision, by_source_group, by_kind;
    int skipped = 0, does_not_fit = 0;
    int in_fit = 0; // compared rows left out of the summary: runs the stack was fitted on
    // With an error model: the share of compared rows whose measurement lies in their band, and
    // the band's median width (p90 / p10 of the predicted throughput, minus 1).
    bool has_bands = false;
    double coverage = 0, median_width = 0;
};

// The row's plan with blank micro_batch / recompute cells tuned as the source's benchmark was:
// the best-throughput choice that fits (recorded in `choices`).
// `defaulted` (when given) receives the blank degrees still at the frameworks' default 1 (none
// when blank tp / pp were chosen as the least model parallelism that fits).
[[nodiscard]] model::Plan tune_blank_cells(const model::ValidationRow& row, std::vector<std::string>& choices,
                                           std::vector<std::string>* defaulted = nullptr);

// Simulates every row (kind filter: empty = all). Rows run on `threads` workers.
// With `bands`, each compared row also gets its band (predicted_p10 / _p90) and the report its
// coverage.
// `progress` (when set) is called serialised as rows finish: (done, total).
// `row_hook` (when set) is called for every simulated row with its tuned plan and estimate, after
// the row's band was set, and may replace the band (a fitted stack's band: stack/stack_fit.hpp).
// Rows whose id is in `in_fit` are compared but left out of the summary.
using RowHook = std::function<void(const model::Plan&, const RunEstimate&, RowResult&)>;
[[nodiscard]] ValidationReport validate_rows(const std::vector<model::ValidationRow>& rows, const std::string& kind,
                                             unsigned threads, const ErrorModel* bands = nullptr,
                                             const std::function<void(std::size_t, std::size_t)>& progress = {},
                                             const RowHook& row_hook = {},
                                             const std::vector<std::string>& in_fit = {});
// The step rows of one published file as error-model samples (trust.hpp): every compared row's
// signed error with its regime and features.
[[nodiscard]] std::vector<ErrorSample> error_samples(const std::vector<model::ValidationRow>& rows,
                                                     const std::string& file_name, bool held_out, unsigned threads);
// The 80% bands of some compared rows: how many had one, the share whose measurement lies inside
// it, and its median width (p90 / p10 of the predicted throughput, minus 1).
struct BandStats {
    int rows = 0;
    double coverage = 0, median_width = 0;
};
[[nodiscard]] BandStats band_stats(const std::vector<const RowResult*>& rows);

// One published-measurements file, as the error model reads it.
struct PublishedFile {
    std::string name; // the file's name (samples are tagged with it)
    std::vector<model::ValidationRow> rows;
    bool held_out = false; // its rows guided no constant
};
// How one file's step rows sit in their 80% bands, in sample (the table built from every file,
// this one included, as shipped) and leave-file-out (built from the other files only: the file
// read as a source nobody tuned to, which is a new user's situation; docs/trust.md).
struct FileCoverage {
    std::string file;
    int rows = 0;             // compared step rows of the file
    int left_out_basis = 0;   // rows behind the leave-file-out table (every other file's)
    BandStats in_sample, left_out; // left_out.rows 0: under kMinRegimeRows other rows, no table
};
// Runs validate on every file, builds the table from all of them and, per file, from the others.
[[nodiscard]] std::vector<FileCoverage> cross_validate_bands(const std::vector<PublishedFile>& files,
                                                             unsigned threads);

struct ErrorGroup {
    struct KeyValue {
        std::string key, value; // "tp", "2"; "tokens_per_gpu", "2k-8k"
        bool count = false;     // the value is a count (a number in JSON)
    };
    std::string label; // "tp=2 micro_batch=1", "tokens_per_gpu=2k-8k"
    std::vector<KeyValue> values;
    ErrorStats stats;
    BandStats bands; // rows 0 without an error-band table
};
[[nodiscard]] const std::vector<std::string>& group_keys();
// The keys of a --by spec: one key of group_keys() or several different ones joined by ':' (a
// cross table, e.g. "tp:micro_batch"). Throws std::invalid_argument naming an unknown or
// repeated key.
[[nodiscard]] std::vector<std::string> parse_group_spec(const std::string& spec);
// Where a skipped row's reason is: "line 5, column 15 (tp)" (the column where one is to blame).
[[nodiscard]] std::string skipped_where(const RowResult& r);
// Why a report compared nothing, for `file`: its rows, skipped and in-fit counts, then each kind
// of reason with its count and its first few rows (id, line, column, reason). Lines end in '\n'.
[[nodiscard]] std::string nothing_compared_text(const ValidationReport& r, const std::string& file);
// The compared rows' signed errors grouped by properties of their simulated plans (validate
// --by), in the keys' natural order (numbers ascending). Throws as parse_group_spec.
[[nodiscard]] std::vector<ErrorGroup> group_errors(const ValidationReport& r, const std::string& spec);

// One summary line of error statistics, and a group table as `validate --by` prints it.
[[nodiscard]] std::string stats_line(const std::string& name, const ErrorStats& st, std::size_t width = 34);
[[nodiscard]] std::string groups_text(const std::string& spec, const std::vector<ErrorGroup>& groups);
[[nodiscard]] nlohmann::json groups_json(const std::vector<ErrorGroup>& groups);
[[nodiscard]] nlohmann::json report_json(const ValidationReport& r);
[[nodiscard]] std::string report_text(const ValidationReport& r, bool verbose);

} // namespace trainsim::sim
