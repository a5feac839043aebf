// `trainsim-calibrate import`: measurements taken by other tools turned into our samples
// (docs/calibration.md "Importing nccl-tests logs and GEMM sweeps"), so that `fit` and `show`
// work on them as on a `measure` run.
//  - nccl-tests text logs (all_reduce_perf, all_gather_perf, reduce_scatter_perf, alltoall_perf,
//    sendrecv_perf; releases 2.x, old and current table layouts, launcher prefixes, interleaved
//    NCCL log lines, the -I per-iteration columns): one collective sample per table row, time =
//    the out-of-place time.
//  - nccl-tests -J JSON (the layout src/util.cu writes, versions 1-3: config, devices, results[]
//    with out_of_place / in_place and the -I per-iteration block): the same samples, problems
//    named by the JSON path of the value ("results[3].out_of_place.bus_bw").
//  - GEMM sweeps as CSV (m,n,k,dtype,time): one GEMM sample per row.
// The parsers work on text and never touch the file system (tests and the fuzz target call them
// directly); write_imported_samples is the only part that writes.
#pragma once

#include "trainsim/calibrate/samples/sample.hpp"
#include "trainsim/model/core/errors.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trainsim::calibrate {

// What the caller knows that a log may not say (the command line's --op, --group-size, --nodes).
struct NcclTestsOptions {
    std::string op;                 // empty: inferred; else all_reduce | all_gather | reduce_scatter |
                                    // all_to_all | send_recv (nccl-tests' allreduce, alltoall, ... too)
    std::optional<int> group_size;  // ranks of the collective (default: the log's Rank lines)
    std::optional<int> nodes;       // hosts the ranks span (default: distinct hosts of the Rank lines)
};

// nccl-tests -I: statistics of the per-iteration times (CUDA events around each iteration; the
// slowest process's time per iteration), microseconds per call. Text logs print min, max, p99 and
// cv%; -J JSON adds p50 and every iteration's time.
struct NcclTestsIterStats {
    double min_us = 0, max_us = 0, p99_us = 0, cv_pct = 0;
    std::optional<double> p50_us;   // JSON only
    std::vector<double> times_us;   // JSON only: per call, the summary's skipped iterations left out
};

// One table row as printed (out-of-place columns), or one element of a JSON results list.
struct NcclTestsRow {
    int line = 0;             // 1-based line in the file (0 in JSON)
    std::string key;          // JSON: "results[3].out_of_place" (empty in text)
    double bytes = 0;         // the "size" column
    std::string type;         // element type as printed ("float", "bfloat16", ...)
    double time_us = 0;       // out-of-place time, microseconds
    double algbw_gbps = 0;    // as printed, GB/s (1e9 B/s)
    double busbw_gbps = 0;    // as printed
    std::optional<NcclTestsIterStats> per_iter;  // -I
};

// What one nccl-tests log holds, and what was made of it.
struct NcclTestsLog {
    std::string file;
    std::string format;            // "text" | "JSON v3" (nccl-tests -J, its version field)
    std::string op;                // all_reduce | ... (empty when it could not be told)
    std::string op_source;         // "--op", "binary name on line 3", "file name", "busbw / algbw ..."
    int group_size = 0;
    std::string group_size_source; // "--group-size", "16 Rank lines", "header: nThread 1 x nGpus 8"
    int nodes = 0;
    std::string nodes_source;      // "--nodes", "hosts of the Rank lines"
    std::vector<std::string> hosts;  // distinct, in rank order
    std::string scope;             // intra_node | inter_node
    std::string gpu;               // device name of the first Rank line, as printed
    std::string tests_version;     // "# nccl-tests version 2.18.3 ..."
    std::string nccl_version;      // "NCCL version 2.23.4+cuda12.5", or decoded from nccl-library=
    std::optional<int> iters, warmup_iters, agg_iters;  // from the "# nThread" header
    std::vector<NcclTestsRow> rows;      // imported rows, in file order
    std::vector<Sample> samples;         // one per imported row
    std::map<std::string, int> skipped;  // reason -> lines (rows of size 0, NCCL INFO lines, ...)
    std::vector<model::Diagnostic> problems;  // file:line:col and reason; any problem fails the import
};

// Parses the text of one log, or of one nccl-tests -J JSON file (told apart by the first
// character). `file` names it in problems and in the samples' labels, and its name is one of the
// ways the op is inferred. Never throws on bad text (the problems say why).
[[nodiscard]] NcclTestsLog parse_nccl_tests_log(std::string_view text, const std::string& file,
                                                const NcclTestsOptions& opts);

// A GEMM sweep as CSV: a header naming the columns m, n, k, dtype, time (any order; optional
// fast_accum), then one GEMM per row. time: a number with a unit ("1.25 ms", "830 us") or a plain
// number of seconds. dtype: bf16 | fp16 | fp32 | fp8_e4m3 | fp8_e5m2xfp8_e4m3 | fp8_e4m3xfp8_e5m2
// (the element types `measure` labels GEMMs with). Blank lines and lines starting with '#' are
// skipped.
struct GemmCsv {
    std::string file;
    std::vector<Sample> samples;
    std::vector<int> lines;                   // 1-based line of each sample
    std::map<std::string, int> skipped;       // reason -> lines
    std::vector<model::Diagnostic> problems;  // file:line:col and reason
};
[[nodiscard]] GemmCsv parse_gemm_csv(std::string_view text, const std::string& file);

// Reads a file for the parsers: CalibrationInputError when it cannot be read.
[[nodiscard]] std::string read_import_file(const std::filesystem::path& file);

// Samples of several files in one list. A key seen again in a later file replaces the earlier
// sample in place: the later file wins (two runs of the same op, group, scope, element type and
// size have the same key, which `fit` accepts once). replaced[i]: how many samples of file i
// replaced those of earlier files.
[[nodiscard]] std::vector<Sample> merge_imported(const std::vector<std::vector<Sample>>& per_file,
                                                 std::vector<std::size_t>* replaced = nullptr);

enum class ImportMode {
    create,  // DIR/samples.jsonl must not hold samples yet
    append,  // add to it; a key already there is refused (an import never replaces a sample)
    force,   // replace it
};

struct ImportWrite {
    std::filesystem::path samples;   // DIR/samples.jsonl
    std::size_t kept = 0;            // samples of the existing file kept (append)
    std::size_t written = 0;         // imported samples
    std::filesystem::path run_info;  // the run*.json written
};

// Writes `samples` (unique keys) to DIR/samples.jsonl while holding DIR's exclusive lock (the one
// `measure` takes: flock on DIR/.lock), through a temporary file renamed over the old one, so the
// file is either as it was or complete. Then records the import in DIR/run.json (or the first
// free run-N.json), with run_info's fields. Throws CalibrationInputError (samples already there
// without append or force, a key already there, the directory locked) or SampleError (append to
// a samples file that does not read back strictly); DIR/samples.jsonl is then unchanged.
ImportWrite write_imported_samples(const std::filesystem::path& dir, const std::vector<Sample>& samples,
                                   ImportMode mode, nlohmann::json run_info);

// Summaries for people (one paragraph per file) and for scripts.
[[nodiscard]] std::string format_summary(const NcclTestsLog& log);
[[nodiscard]] std::string format_summary(const GemmCsv& csv);
[[nodiscard]] nlohmann::json to_json(const NcclTestsLog& log);
[[nodiscard]] nlohmann::json to_json(const GemmCsv& csv);

} // namespace trainsim::calibrate
