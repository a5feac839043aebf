// --format torchtitan: the line torchtitan's MetricsProcessor.log prints at step 1 and every
// metrics.log_freq steps (pytorch/torchtitan@b5bcd76c torchtitan/components/metrics.py, lines
// 475-536):
//     tps = self.ntokens_since_last_log / (time_delta * self.parallel_dims.non_data_parallel_size)
//     logger.info(f"{color.red}step: {step:2}  {color.green}loss: {global_avg_loss:8.5f}  "
//                 f"{color.orange}grad_norm: {grad_norm:7.4f}  "
//                 f"{color.turquoise}memory: {...max_reserved_gib:5.2f}GiB({...max_reserved_pct:.2f}%)  "
//                 f"{color.blue}tps: {round(tps):,}  {color.cyan}tflops: {tflops:,.2f}  "
//                 f"{color.magenta}mfu: {mfu_str}{color.reset}")
// with Color's ANSI codes (torchtitan/tools/utils.py: "\033[31m" ... "\033[38;2;180;60;0m",
// reset "\033[39m"; NoColor when colours are off). tps is tokens per second per GPU over the
// steps since the last log line: the schema's tokens_per_s_per_gpu, read directly. Before
// pytorch/torchtitan pull request #697 (commit 4d182a13, 2024-11-23) the same value was printed
// as "wps: ...", and older releases print no grad_norm; the fields are read by name.
// A real line, as pasted without its colour codes (pytorch/torchtitan pull request #1287):
//     [rank0]:[titan] 2025-06-16 22:30:50,322 - root - INFO - step: 200  loss:  6.1384  memory:
//     49.66GiB(52.28%)  tps: 5,856  tflops: 339.16  mfu: 34.29%
// "validate step: N ..." lines (log_validation) are validation, not training steps.
#include "import_text.hpp"
#include "run_log_formats.hpp"

#include <fmt/format.h>

namespace trainsim::calibrate::detail {

LineRead read_torchtitan_line(std::string_view line) {
    LineRead r;
    std::size_t at = 0;
    while ((at = line.find("step:", at)) != std::string_view::npos) {
        if (at == 0 || line[at - 1] == ' ' || line[at - 1] == '\t') break;
        at += 5;
    }
    if (at == std::string_view::npos) return r;
    if (line.substr(0, at).ends_with("validate ")) {
        r.other_kind = "validation lines";
        return r;
    }
    const auto step_tokens = tokenize(line.substr(at + 5), 1);
    std::int64_t step = 0;
    // A record names its loss right after the step; other messages that say "step: N" are not one.
    if (step_tokens.empty() || !parse_int(step_tokens.front().text, step) || step < 0 ||
        !contains(line.substr(at), "loss:"))
        return r;
    r.printer = "torchtitan metrics (tps: tokens per second per GPU)";
    const std::string_view rest = trim(line);
    r.closed = rest.ends_with('%') || rest.ends_with("N/A"); // the mfu field closes the line
    std::string_view key = "tps:";
    auto key_at = line.find(key, at);
    if (key_at == std::string_view::npos) {
        key = "wps:";
        key_at = line.find(key, at);
    }
    if (key_at == std::string_view::npos) {
        r.kind = LineRead::Kind::partial;
        r.col = static_cast<int>(at) + 1;
        r.why = fmt::format("step {} has no 'tps:' field", step);
        return r;
    }
    const auto value = tokenize(line.substr(key_at + key.size()), 1);
    double tps = 0;
    if (value.empty() || !parse_number(value.front().text, tps) || !(tps > 0)) {
        r.kind = LineRead::Kind::partial;
        r.col = static_cast<int>(key_at + key.size()) + 1;
        r.why = fmt::format("'{}' is not a positive number of tokens per second",
                            value.empty() ? std::string() : utf8(value.front().text));
        return r;
    }
    r.kind = LineRead::Kind::record;
    r.record.step = step;
    r.record.steps = 0; // the interval since the last log line
    r.record.tokens_per_s_per_gpu = tps;
    return r;
}

} // namespace trainsim::calibrate::detail
