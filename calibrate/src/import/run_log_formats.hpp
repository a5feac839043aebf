// The trainer-log formats of `import run`, internal to calibrate/src/import/: one reader of one
// line per text format (run_log_megatron.cpp, run_log_torchtitan.cpp, run_log_deepspeed.cpp), the
// HF Trainer's JSON files (run_log_hf_trainer.cpp), and the driver that walks the lines, strips
// launcher prefixes and colour codes, and checks the records as a whole (run_log.cpp).
#pragma once

#include "trainsim/calibrate/import/run_import.hpp"

#include <string>
#include <string_view>

namespace trainsim::calibrate::detail {

// What one line (launcher prefixes and ANSI colour codes removed) holds for a text format.
struct LineRead {
    enum class Kind {
        other,   // not a record: counted under `skipped` as `other_kind`
        record,  // a complete record
        partial, // starts a record but does not read as one (`why`, at column `col`)
    } kind = Kind::other;
    StepRecord record;   // kind == record; record.steps == 0: "since the previous record"
    bool closed = true;  // the line ends with the text that closes a record of its format
    std::string printer; // which print statement (kind == record)
    std::string why;     // kind == partial
    int col = 1;         // kind == partial: 1-based column in the line as passed
    std::string other_kind = "other text";
};

LineRead read_megatron_line(std::string_view line);
LineRead read_torchtitan_line(std::string_view line);
LineRead read_deepspeed_line(std::string_view line);
// trainer_state.json, all_results.json or train_results.json: fills log.whole_run or problems.
void read_hf_trainer_json(std::string_view text, RunLog& log);

// A number printed with thousands separators or not ("1,234", "5361.6", "1.42E-05"); false unless
// the whole token is a finite number.
bool parse_number(std::string_view t, double& v);
// The value after `key` in `line` up to the next `stop` character (or the end), trimmed; empty
// when the key is absent.
std::string_view value_after(std::string_view line, std::string_view key, std::string_view stops);

void add_problem(RunLog& log, RunRefusal reason, int line, int col, const std::string& message,
                 const std::string& key = {});

} // namespace trainsim::calibrate::detail
