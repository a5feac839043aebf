// `import run`: the trainer log as a whole. Lines are read one by one with a cap on their length;
// launcher prefixes (mpirun --tag-output, srun --label, torchrun's "[rank0]:" / "[default0]:") and
// ANSI colour codes are removed before a format's reader sees them; then the records are checked
// as a sequence: one rank's records only, the step counter strictly increasing and one total
// (else two runs share the file), and a last line that is not cut mid-record.
#include "trainsim/calibrate/core/calibrate_error.hpp"
#include "trainsim/calibrate/import/run_import.hpp"
#include "trainsim/model/core/file_io.hpp"

#include "import_text.hpp"
#include "run_log_formats.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <optional>
#include <set>

namespace trainsim::calibrate {

namespace detail {

bool parse_number(std::string_view t, double& v) {
    std::string digits;
    digits.reserve(t.size());
    for (std::size_t i = 0; i < t.size(); ++i) {
        // A thousands separator sits between digits ("1,234"): torchtitan's f"{round(tps):,}".
        if (t[i] == ',' && i > 0 && i + 1 < t.size() && std::isdigit(static_cast<unsigned char>(t[i - 1])) != 0 &&
            std::isdigit(static_cast<unsigned char>(t[i + 1])) != 0)
            continue;
        digits.push_back(t[i]);
    }
    return parse_real(digits, v);
}

std::string_view value_after(std::string_view line, std::string_view key, std::string_view stops) {
    const auto at = line.find(key);
    if (at == std::string_view::npos) return {};
    std::string_view rest = line.substr(at + key.size());
    const auto end = rest.find_first_of(stops);
    return trim(rest.substr(0, end));
}

void add_problem(RunLog& log, RunRefusal reason, int line, int col, const std::string& message,
                 const std::string& key) {
    log.problems.push_back(
        RunProblem{reason, model::Diagnostic{log.file, line, line > 0 ? std::max(col, 1) : 0, key, message}});
}

} // namespace detail

using namespace detail;

const char* to_string(TrainerFormat f) {
    switch (f) {
        case TrainerFormat::megatron:
            return "megatron";
        case TrainerFormat::torchtitan:
            return "torchtitan";
        case TrainerFormat::hf_trainer:
            return "hf-trainer";
        case TrainerFormat::deepspeed:
            return "deepspeed";
    }
    return "?";
}

std::optional<TrainerFormat> trainer_format_of(std::string_view name) {
    for (auto f :
         {TrainerFormat::megatron, TrainerFormat::torchtitan, TrainerFormat::hf_trainer, TrainerFormat::deepspeed})
        if (name == to_string(f)) return f;
    return std::nullopt;
}

const char* to_string(RunRefusal r) {
    switch (r) {
        case RunRefusal::unreadable:
            return "unreadable";
        case RunRefusal::line_too_long:
            return "line_too_long";
        case RunRefusal::no_records:
            return "no_records";
        case RunRefusal::truncated:
            return "truncated";
        case RunRefusal::malformed:
            return "malformed";
        case RunRefusal::mixed:
            return "mixed";
        case RunRefusal::warmup_only:
            return "warmup_only";
        case RunRefusal::bad_value:
            return "bad_value";
        case RunRefusal::batch_mismatch:
            return "batch_mismatch";
        case RunRefusal::whole_run_only:
            return "whole_run_only";
    }
    return "?";
}

namespace {

// ANSI escape sequences (CSI "ESC [ params final", e.g. torchtitan's Color: "\033[31m",
// "\033[38;2;180;60;0m") removed; other bytes kept.
std::string strip_ansi(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\x1b' && i + 1 < s.size() && s[i + 1] == '[') {
            std::size_t j = i + 2;
            while (j < s.size() && static_cast<unsigned char>(s[j]) >= 0x20 && static_cast<unsigned char>(s[j]) < 0x40)
                ++j;                             // parameter and intermediate bytes
            i = j < s.size() ? j : s.size() - 1; // the final byte (0x40-0x7E) goes too
            continue;
        }
        out.push_back(s[i]);
    }
    return out;
}

// torchrun's per-rank prefix: "[rank3]:" (torch >= 2.2, --local-ranks-filter / --tee) or
// "[default3]:" (older torchrun --tee). Returns the rank and removes it, else -1.
int strip_rank_prefix(std::string_view& s) {
    for (std::string_view tag : {std::string_view("[rank"), std::string_view("[default")}) {
        if (!s.starts_with(tag)) continue;
        std::size_t i = tag.size();
        int rank = 0;
        const auto r = std::from_chars(s.data() + i, s.data() + s.size(), rank);
        if (r.ec != std::errc() || r.ptr == s.data() + i) return -1;
        i = static_cast<std::size_t>(r.ptr - s.data());
        if (s.substr(i).starts_with("]:")) {
            s.remove_prefix(i + 2);
            return rank;
        }
    }
    return -1;
}

struct ReadLine {
    LineRead read;
    int line = 0;
    int rank = -1;
    bool last_without_eol = false;
};

std::string step_name(TrainerFormat f) {
    return f == TrainerFormat::megatron ? "iteration" : f == TrainerFormat::deepspeed ? "global step" : "step";
}

void read_text_log(std::string_view text, RunLog& log) {
    LineRead (*reader)(std::string_view) = log.format == TrainerFormat::torchtitan  ? read_torchtitan_line
                                           : log.format == TrainerFormat::deepspeed ? read_deepspeed_line
                                                                                    : read_megatron_line;
    std::vector<ReadLine> lines; // records and partial records
    int line_no = 0;
    std::size_t pos = 0;
    while (pos < text.size()) {
        ++line_no;
        const std::size_t nl = text.find('\n', pos);
        const std::size_t end = nl == std::string_view::npos ? text.size() : nl;
        if (end - pos > kMaxRunLogLine) {
            add_problem(log, RunRefusal::line_too_long, line_no, 1,
                        fmt::format("a line of {} bytes (more than {} MiB): not a trainer's log line", end - pos,
                                    kMaxRunLogLine >> 20));
            return;
        }
        std::string_view line = text.substr(pos, end - pos);
        pos = nl == std::string_view::npos ? text.size() : nl + 1;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        line.remove_prefix(prefix_length(line));
        const int rank = strip_rank_prefix(line);
        const std::string clean = strip_ansi(line);
        if (trim(clean).empty()) continue;
        ReadLine r{reader(clean), line_no, rank, nl == std::string_view::npos};
        if (r.read.kind == LineRead::Kind::other) {
            ++log.skipped[r.read.other_kind];
            continue;
        }
        lines.push_back(std::move(r));
    }

    // One rank's lines: the lowest rank that printed records (torchrun prefixes every rank's lines).
    std::set<int> ranks;
    for (const auto& r : lines) ranks.insert(r.rank);
    const int keep = ranks.empty() ? -1 : *ranks.begin();
    if (ranks.size() > 1) {
        const auto others = std::count_if(lines.begin(), lines.end(), [&](const auto& r) { return r.rank != keep; });
        log.skipped[fmt::format("records of ranks other than [rank{}]", keep)] += static_cast<int>(others);
        std::erase_if(lines, [&](const auto& r) { return r.rank != keep; });
    }
    log.rank = keep;

    for (const auto& r : lines) {
        const LineRead& x = r.read;
        if (x.kind == LineRead::Kind::partial || (r.last_without_eol && !x.closed)) {
            if (r.last_without_eol)
                add_problem(log, RunRefusal::truncated, r.line, x.kind == LineRead::Kind::partial ? x.col : 1,
                            "the last line is cut mid-record (no end of line" +
                                (x.kind == LineRead::Kind::partial ? ", " + x.why : std::string()) +
                                "): the run was still writing or was killed; import a log that ends "
                                "with a complete line");
            else
                add_problem(log, RunRefusal::malformed, r.line, x.col, x.why);
            continue;
        }
        // One print statement's records (DeepSpeed's pipeline engine and its ThroughputTimer can both
        // print a step): the first one found; the other's lines are counted, not read.
        if (log.printer.empty()) log.printer = x.printer;
        if (x.printer != log.printer) {
            ++log.skipped["records of another print statement (" + x.printer + ")"];
            continue;
        }
        StepRecord rec = x.record;
        rec.line = r.line;
        // What a training step can be: 1 us to 100 days per step, rates up to 1e10 per second (the
        // formats print rounded values, so a parsed 1e-300 is not a measurement).
        const auto within = [](double v, double lo, double hi) { return v == 0 || (v >= lo && v <= hi); };
        if (!within(rec.step_s, 1e-6, 8.64e6) || !within(rec.tokens_per_s_per_gpu, 1e-3, 1e10) ||
            !within(rec.samples_per_s, 1e-6, 1e10)) {
            add_problem(log, RunRefusal::bad_value, r.line, 1,
                        fmt::format("{} {}: a step time of {:g} s or a rate of {:g} / s is no training step's",
                                    step_name(log.format), rec.step, rec.step_s,
                                    std::max(rec.tokens_per_s_per_gpu, rec.samples_per_s)));
            continue;
        }
        if (!log.records.empty()) {
            const StepRecord& p = log.records.back();
            if (rec.step <= p.step) {
                add_problem(log, RunRefusal::mixed, r.line, 1,
                            fmt::format("{} {} follows {} {} (line {}): the counter restarts, so two runs (or "
                                        "several ranks without a [rankN]: prefix) are in one file; import one run, "
                                        "one rank's lines",
                                        step_name(log.format), rec.step, step_name(log.format), p.step, p.line));
                return;
            }
        }
        if (rec.total) {
            if (log.total_steps && *log.total_steps != *rec.total) {
                add_problem(
                    log, RunRefusal::mixed, r.line, 1,
                    fmt::format("{} {}/{} after lines of a run of {} {}s: two runs are in one file; import "
                                "one run",
                                step_name(log.format), rec.step, *rec.total, *log.total_steps, step_name(log.format)));
                return;
            }
            log.total_steps = rec.total;
        }
        if (rec.steps == 0) rec.steps = rec.step - (log.records.empty() ? 0 : log.records.back().step);
        log.records.push_back(rec);
    }
}

} // namespace

RunLog parse_run_log(std::string_view text, const std::string& file, TrainerFormat format) {
    RunLog log;
    log.file = file;
    log.format = format;
    if (text.size() > kMaxRunLogBytes) {
        add_problem(log, RunRefusal::unreadable, 0, 0,
                    fmt::format("{} bytes: more than the {} MiB a run's log is read up to", text.size(),
                                kMaxRunLogBytes >> 20));
        return log;
    }
    if (format == TrainerFormat::hf_trainer)
        read_hf_trainer_json(text, log);
    else
        read_text_log(text, log);
    if (log.problems.empty() && log.records.empty() && !log.whole_run)
        add_problem(log, RunRefusal::no_records, 0, 0,
                    fmt::format("no line that {} prints with a step time (looked for {}); is --format right?",
                                to_string(format),
                                format == TrainerFormat::megatron
                                    ? "Megatron's 'iteration i/N | ... | elapsed time per iteration (ms): ...' and "
                                      "NeMo's '... iteration i/N | ... | train_step_timing in s: ...'"
                                : format == TrainerFormat::torchtitan ? "torchtitan's 'step: N  loss: ...  tps: ...'"
                                : format == TrainerFormat::deepspeed
                                    ? "DeepSpeed's 'epoch=E/micro_step=M/global_step=G, ... CurrSamplesPerSec=' "
                                      "and 'steps: N ... iter time (s): ...'"
                                    : "train_runtime in the HF Trainer's JSON"));
    return log;
}

std::string read_run_file(const std::filesystem::path& file) {
    try {
        return model::read_regular_file(file, kMaxRunLogBytes);
    } catch (const model::FileReadError& e) {
        throw CalibrationInputError(file.string(), e.reason());
    }
}

} // namespace trainsim::calibrate
