// --format deepspeed: the throughput lines DeepSpeed's engine prints every steps_per_print steps.
//
// ThroughputTimer.stop (microsoft/DeepSpeed@38327e07 deepspeed/utils/timer.py, lines 263-274),
// built by the engine with batch_size=self.train_batch_size(), the global batch
// (deepspeed/runtime/engine.py line 285):
//     "epoch={}/micro_step={}/global_step={}, RunningAvgSamplesPerSec={}, CurrSamplesPerSec={}, "
//     "MemAllocated={}GB, MaxMemAllocated={}GB".format(..., self.avg_samples_per_sec(),
//         self.batch_size / self.step_elapsed_time, ...)
// step_elapsed_time is the time of the last global step only (reset after every step), so
// CurrSamplesPerSec = global batch / that step's time; RunningAvgSamplesPerSec averages every
// step since start_step and is not used. A real line (SeekPoint/DeepSpeedExamples
// yknote-training-train_bert_ds.py, a HelloDeepSpeed BERT run, 2023-08-02):
//     [2023-08-02 00:41:18,677] [INFO] [timer.py:215:stop] epoch=0/micro_step=20/global_step=20,
//     RunningAvgSamplesPerSec=202.965811549343, CurrSamplesPerSec=139.10360295001638,
//     MemAllocated=0.07GB, MaxMemAllocated=1.36GB
//
// PipelineEngine.train_batch (deepspeed/runtime/pipe/engine.py lines 396-406), rank 0 only:
//     log_str = f'steps: {self.global_steps} loss: {self.agg_train_loss:0.4f} '
//     log_str += f'iter time (s): {iter_time:0.3f} samples/sec: {tput:0.3f}'
// iter_time = the steps_per_print steps' elapsed time / steps_per_print: a mean over the interval.
#include "import_text.hpp"
#include "run_log_formats.hpp"

#include <fmt/format.h>

namespace trainsim::calibrate::detail {

namespace {

LineRead partial(int col, std::string why) {
    LineRead r;
    r.kind = LineRead::Kind::partial;
    r.col = col;
    r.why = std::move(why);
    return r;
}

} // namespace

LineRead read_deepspeed_line(std::string_view line) {
    if (const auto at = line.find("global_step="); at != std::string_view::npos && contains(line, "micro_step=")) {
        const auto step_text = value_after(line, "global_step=", ", ");
        std::int64_t step = 0;
        if (!parse_int(step_text, step) || step < 0)
            return partial(static_cast<int>(at) + 13, fmt::format("global_step '{}' is not a count", utf8(step_text)));
        const auto rate_at = line.find("CurrSamplesPerSec=");
        if (rate_at == std::string_view::npos)
            return partial(static_cast<int>(at) + 1, fmt::format("global step {} has no CurrSamplesPerSec", step));
        const auto rate_text = value_after(line, "CurrSamplesPerSec=", ", ");
        double rate = 0;
        if (!parse_number(rate_text, rate) || !(rate > 0))
            return partial(static_cast<int>(rate_at) + 19,
                           fmt::format("CurrSamplesPerSec '{}' is not a positive rate", utf8(rate_text)));
        LineRead r;
        r.kind = LineRead::Kind::record;
        r.printer = "DeepSpeed ThroughputTimer (CurrSamplesPerSec: global batch / the step's time)";
        r.closed = trim(line).ends_with("GB"); // MaxMemAllocated=...GB closes the line
        r.record.step = step;
        r.record.steps = 1; // the last step only
        r.record.samples_per_s = rate;
        return r;
    }
    if (const auto at = line.find("iter time (s):"); at != std::string_view::npos) {
        const auto s_at = line.find("steps:");
        std::int64_t step = 0;
        const auto step_tokens =
            s_at == std::string_view::npos ? std::vector<Token>{} : tokenize(line.substr(s_at + 6), 1);
        if (step_tokens.empty() || !parse_int(step_tokens.front().text, step) || step < 0)
            return partial(1, "an 'iter time (s):' line without 'steps: N'");
        const auto value = tokenize(line.substr(at + 14), 1);
        double t = 0;
        if (value.empty() || !parse_number(value.front().text, t) || !(t > 0))
            return partial(static_cast<int>(at) + 15, "'iter time (s):' is not a positive number of seconds");
        LineRead r;
        r.kind = LineRead::Kind::record;
        r.printer = "DeepSpeed PipelineEngine (iter time (s): mean over steps_per_print steps)";
        r.closed = false; // ends with a number: a cut line cannot be told from a whole one
        r.record.step = step;
        r.record.steps = 0;
        r.record.step_s = t;
        return r;
    }
    return LineRead{};
}

} // namespace trainsim::calibrate::detail
