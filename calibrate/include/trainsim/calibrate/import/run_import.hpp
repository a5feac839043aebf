// `trainsim-calibrate import run`: a short run of the team's own trainer made into one row of the
// published-measurements schema (../shared/validation/README.md), so that `trainsim validate` and
// the stack fit (issue #41) see it beside the published runs. A run = a scenario's plan (model,
// GPUs, layout, framework) + the step time its trainer printed.
//
// Three steps, each testable alone:
//  1. parse_run_log: the trainer's own output, as its code prints it (one parser per format,
//     calibrate/src/import/run_log_*.cpp), into timed records. Text in, never a file: the CLI reads
//     the file (read_run_file, capped) and the fuzz target feeds bytes.
//  2. measure_run: warm-up dropped, the median of the steady window, tokens/s/GPU by the schema's
//     definition (design.md: global_batch x seq_len / (step_time x num_gpus)), and the words that
//     say how (derivation) and how spread (notes).
//  3. validation_row / append_validation_row: the row, written whole through a temporary file
//     renamed over the CSV.
// Every refusal is a RunProblem: a reason a program can test, at file:line:col.
#pragma once

#include "trainsim/model/core/errors.hpp"
#include "trainsim/model/core/scenario.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trainsim::calibrate {

// Which trainer printed the log (--format).
enum class TrainerFormat {
    megatron,   // Megatron-LM / Megatron-Core training_log, NeMo 2's progress printer
    torchtitan, // torchtitan's MetricsProcessor.log
    hf_trainer, // Hugging Face Trainer's trainer_state.json, all_results.json, train_results.json
    deepspeed,  // DeepSpeed's ThroughputTimer and PipelineEngine lines
};
[[nodiscard]] const char* to_string(TrainerFormat f); // megatron | torchtitan | hf-trainer | deepspeed
[[nodiscard]] std::optional<TrainerFormat> trainer_format_of(std::string_view name);

// Why a run is refused. Tests assert on these, never on message text.
enum class RunRefusal {
    unreadable,     // missing, a folder, a FIFO or device, unreadable, over the size cap
    line_too_long,  // a line over kMaxRunLogLine
    no_records,     // not one line (or JSON entry) the format prints
    truncated,      // the last line is cut mid-record (no end of line, record incomplete)
    malformed,      // a line that starts a record but does not read as one
    mixed,          // the step counter goes back, or another run's total appears: two runs in one file
    warmup_only,    // nothing left after dropping the warm-up
    bad_value,      // a time or rate that is not a positive finite number
    batch_mismatch, // the log's global batch is not the scenario's
    whole_run_only, // --warmup asked of whole-run averages (HF Trainer), or no train_runtime in them
};
[[nodiscard]] const char* to_string(RunRefusal r);

struct RunProblem {
    RunRefusal reason = RunRefusal::no_records;
    model::Diagnostic where; // file, 1-based line (0: the whole file or a JSON path in key), message
};

// Caps on what is read: a trainer log of a short run is kilobytes to megabytes.
inline constexpr std::size_t kMaxRunLogBytes = std::size_t{256} << 20; // 256 MiB
inline constexpr std::size_t kMaxRunLogLine = std::size_t{1} << 20;    // 1 MiB

// One timed record as the trainer printed it.
struct StepRecord {
    int line = 0;                      // 1-based line in the file (0 in a JSON file)
    std::int64_t step = 0;             // the iteration / step counter printed
    std::optional<std::int64_t> total; // the N of "iteration i/N" (Megatron, NeMo)
    std::int64_t steps = 1;            // steps its time covers: since the previous record (the log interval)
    double step_s = 0;                 // seconds per step as printed or derived from a printed rate; 0: not printed
    double tokens_per_s_per_gpu = 0;   // torchtitan's tps; 0: not printed
    double samples_per_s = 0;          // DeepSpeed's CurrSamplesPerSec (global batch / step); 0: not printed
    std::optional<std::int64_t> global_batch; // as printed (Megatron, NeMo)
};

// The whole-run averages the Hugging Face Trainer writes at the end of train() (speed_metrics in
// transformers/trainer_utils.py): runtime from the start of the training loop to its end, so they
// include the first steps, evaluations during training and checkpoint saves.
struct WholeRunAverages {
    double runtime_s = 0;         // train_runtime
    double samples_per_s = 0;     // train_samples_per_second = samples / runtime
    double steps_per_s = 0;       // train_steps_per_second = steps / runtime
    std::int64_t global_step = 0; // trainer_state.json; 0 when not stated
    double eval_s = 0;            // sum of eval_runtime logged during training (trainer_state.json)
    int evals = 0;
};

struct RunLog {
    std::string file;
    TrainerFormat format = TrainerFormat::megatron;
    std::string printer; // which print statement the records came from
    std::vector<StepRecord> records;
    std::optional<std::int64_t> total_steps; // the N of "iteration i/N"
    std::optional<WholeRunAverages> whole_run;
    int rank = -1;                      // the "[rankN]:" prefix kept (-1: none)
    std::map<std::string, int> skipped; // lines that are not records, by kind
    std::vector<RunProblem> problems;   // any problem refuses the run
};

// Parses the text of one log (or HF JSON file) as `format` prints it. Never throws on bad text.
[[nodiscard]] RunLog parse_run_log(std::string_view text, const std::string& file, TrainerFormat format);

// The file's text for parse_run_log, read with caps: a missing file, a folder, a FIFO, a device
// (/dev/zero) or more than kMaxRunLogBytes is refused (CalibrationInputError) without blocking.
[[nodiscard]] std::string read_run_file(const std::filesystem::path& file);

// Warm-up steps dropped by default: the first max(2, ceil(10%)) of the logged records
// (run_measure.cpp says why).
[[nodiscard]] std::size_t default_warmup(std::size_t logged);

// What a run measured, ready for the row.
struct RunMeasurement {
    double tokens_per_s_per_gpu = 0;
    double median_step_s = 0; // the step time tokens/s/GPU stands for
    double p10_step_s = 0, p90_step_s = 0;
    std::size_t logged = 0, dropped = 0, steady = 0; // records
    std::int64_t steady_steps = 0;                   // steps the steady records cover
    std::string derivation;                          // exactly how tokens/s/GPU was obtained
    std::string notes;                               // log file name, spread, what the format cannot tell apart
    std::vector<RunProblem> problems;                // warm-up only, batch mismatch, --warmup on whole-run averages
};
// warmup: records to drop (nullopt: default_warmup). The plan gives global batch, sequence length
// and GPU count.
[[nodiscard]] RunMeasurement measure_run(const RunLog& log, const model::Plan& plan, std::optional<int> warmup);

// The plan a run is measured against: the only plan, or the one named (CalibrationInputError
// otherwise, listing the plans).
[[nodiscard]] const model::Plan& pick_plan(const model::Scenario& scenario, const std::string& name);

// One row of the published-measurements CSV, by column (validation_columns() order).
using ValidationRowCells = std::map<std::string, std::string>;
[[nodiscard]] const std::vector<std::string>& validation_columns(); // the README's header
[[nodiscard]] ValidationRowCells validation_row(const model::Plan& plan, const RunLog& log, const RunMeasurement& m,
                                                const std::string& id);
// The row as a CSV line (RFC 4180 quoting where a cell needs it), without the newline.
[[nodiscard]] std::string csv_line(const ValidationRowCells& row);

// Appends the row to `csv` (created with the header when absent) while holding an exclusive flock
// on its folder: the existing text and the new line are written to a temporary file in the same
// folder, flushed and renamed over `csv`, so a reader sees the old file or the new one, never a
// half row. Refused (CalibrationInputError, the file untouched): another header, a row id already
// there, a file that ends without an end of line (a cut row), or one that is not a regular file.
void append_validation_row(const std::filesystem::path& csv, const ValidationRowCells& row);

[[nodiscard]] nlohmann::json to_json(const RunLog& log, const RunMeasurement& m);

} // namespace trainsim::calibrate
