// libFuzzer target: `import run`'s parsers (calibrate/src/import/run_log*.cpp), which take text,
// not a path: the same bytes read as each trainer's format (megatron, torchtitan, deepspeed, and
// the HF Trainer's JSON). They report bad input as problems and never throw: every exception is a
// finding. What they accept must be usable: records with a step counter that strictly increases,
// each with a positive finite time or rate; measure_run on a fixed plan, the row and its CSV line
// and the JSON summary never throw, and an accepted run gives a positive finite tokens/s/GPU.
#include "fuzz_support.hpp"

#include "trainsim/calibrate/import/run_import.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace {

using namespace trainsim;

// 8 GPUs, global batch 8 of 1024 tokens: enough of a plan for the arithmetic (no file is read).
const model::Plan& fixed_plan() {
    static const model::Plan p = [] {
        model::Plan plan;
        plan.name = "fuzz";
        plan.training.global_batch = 8;
        plan.training.seq_len = 1024;
        plan.cluster.nodes = 1;
        plan.cluster.gpus_per_node = 8;
        plan.parallel.dp = 8;
        return plan;
    }();
    return p;
}

bool positive(double x) {
    return x > 0 && std::isfinite(x);
}

void check(const calibrate::RunLog& log, const char* format) {
    const std::string what = std::string("parse_run_log --format ") + format;
    for (std::size_t i = 0; i < log.records.size(); ++i) {
        const auto& r = log.records[i];
        if (i > 0 && r.step <= log.records[i - 1].step) fuzz::finding(what + ": the step counter does not increase");
        if (!positive(r.step_s) && !positive(r.tokens_per_s_per_gpu) && !positive(r.samples_per_s))
            fuzz::finding(what + ": a record without a positive time or rate");
        if (r.line < 1) fuzz::finding(what + ": a record without its line");
    }
    calibrate::RunMeasurement m;
    fuzz::read_or_reject<fuzz::NeverExpected>("measure_run", [&] {
        m = calibrate::measure_run(log, fixed_plan(), std::nullopt);
        const auto row = calibrate::validation_row(fixed_plan(), log, m, "fuzz");
        (void)calibrate::csv_line(row);
        (void)calibrate::to_json(log, m).dump();
    });
    if (log.problems.empty() && m.problems.empty() && !positive(m.tokens_per_s_per_gpu))
        fuzz::finding(what + ": an accepted run without a positive tokens/s/GPU");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    for (auto format : {calibrate::TrainerFormat::megatron, calibrate::TrainerFormat::torchtitan,
                        calibrate::TrainerFormat::deepspeed, calibrate::TrainerFormat::hf_trainer}) {
        calibrate::RunLog log;
        fuzz::read_or_reject<fuzz::NeverExpected>("parse_run_log",
                                                  [&] { log = calibrate::parse_run_log(text, "fuzz.log", format); });
        check(log, calibrate::to_string(format));
    }
    return 0;
}
