// --format megatron: the lines Megatron-LM / Megatron-Core and NeMo 2 print per logged iteration.
//
// Megatron-LM megatron/training/training.py, training_log() (NVIDIA/Megatron-LM@d98e8a64, lines
// 3567-3640), every --log-interval iterations and after the first:
//     log_string = f" [{datetime.now().strftime('%Y-%m-%d %H:%M:%S.%f')}]"
//     log_string += ' iteration {:8d}/{:8d} |'.format(iteration, args.train_iters)
//     log_string += ' consumed samples: {:12d} |'.format(args.consumed_train_samples)
//     log_string += ' elapsed time per iteration (ms): {:.1f} |'.format(elapsed_time_per_iteration * 1000.0)
//     ... ' global batch size: {batch_size:5d} |' ... ' number of nan iterations: {:3d} |'
// elapsed_time_per_iteration = timers('interval-time').elapsed(...) / total_iterations: the mean
// over the iterations since the last log line. Releases before 2024 print no timestamp, and
// Megatron-DeepSpeed adds fields ("consumed tokens: ..."); the fields are read by name.
// A real line (NVIDIA/Megatron-LM issue #756, Mixtral 8x7B on 16 H100):
//     [2024-04-06 03:02:12] iteration       71/     100 | consumed samples:         9088 | elapsed time
//     per iteration (ms): 5361.6 | throughput per GPU (TFLOP/s/GPU): 243.6 | ... | global batch size:   128 | ...
//
// NeMo 2's text progress printer writes the logged metrics of an iteration as "name: value"
// fields, the step time of NeMo's timing callback as "train_step_timing in s" (the time of that
// step). A real line (NVIDIA-BioNeMo/bionemo-recipes pull request #740):
//     Training epoch 0, iteration 120/149 | lr: 3e-05 | consumed_samples: 121 | global_batch_size: 1 |
//     global_step: 120 | reduced_train_loss: 1.233 | train_step_timing in s: 0.03146 | val_loss: 4.106
// NeMo 1.x prints the same metric inside PyTorch Lightning's tqdm progress bar, redrawn with
// carriage returns ("Epoch 0: 10%| ... train_step_timing in s=5.14]"); that form is not read.
#include "import_text.hpp"
#include "run_log_formats.hpp"

#include <fmt/format.h>

#include <cmath>

namespace trainsim::calibrate::detail {

namespace {

// "iteration <i>/<N>" (any spaces around the numbers); false when the line has no such counter.
bool find_counter(std::string_view line, std::int64_t& i, std::int64_t& n, std::size_t& after) {
    std::size_t at = 0;
    while ((at = line.find("iteration", at)) != std::string_view::npos) {
        std::size_t p = at + 9;
        const auto skip = [&] {
            while (p < line.size() && (line[p] == ' ' || line[p] == '\t')) ++p;
        };
        const auto number = [&](std::int64_t& v) {
            const std::size_t b = p;
            while (p < line.size() && line[p] >= '0' && line[p] <= '9') ++p;
            return p > b && p - b <= 15 && parse_int(line.substr(b, p - b), v);
        };
        skip();
        if (number(i)) {
            skip();
            if (p < line.size() && line[p] == '/') {
                ++p;
                skip();
                if (number(n)) {
                    after = p;
                    return true;
                }
            }
        }
        at += 9;
    }
    return false;
}

} // namespace

LineRead read_megatron_line(std::string_view line) {
    LineRead r;
    std::int64_t iteration = 0, total = 0;
    std::size_t after = 0;
    if (!find_counter(line, iteration, total, after)) {
        if (contains(line, "validation loss at iteration")) r.other_kind = "validation lines";
        return r;
    }
    const std::string_view fields = line.substr(after);
    // Both printers follow the counter with " |" and their fields; other text naming an iteration
    // count is not a record.
    if (!trim(fields).starts_with('|')) return r;
    const bool nemo = contains(line, "Training epoch");
    const std::string_view time_key = nemo ? "train_step_timing in s:" : "elapsed time per iteration (ms):";
    r.printer = nemo ? "NeMo 2 progress printer (train_step_timing in s)"
                     : "Megatron training_log (elapsed time per iteration (ms))";
    // Megatron closes every field with " |"; NeMo's last field has no closing mark.
    r.closed = nemo || trim(line).ends_with('|');
    const auto time_at = fields.find(time_key);
    if (time_at == std::string_view::npos) {
        r.kind = LineRead::Kind::partial;
        r.col = static_cast<int>(after) + 1;
        r.why = fmt::format("iteration {} has no '{}' field", iteration, time_key);
        return r;
    }
    const std::string_view time_text = value_after(fields, time_key, "|");
    double t = 0;
    if (!parse_number(time_text, t) || !(t > 0)) {
        r.kind = LineRead::Kind::partial;
        r.col = static_cast<int>(after + time_at + time_key.size()) + 1;
        r.why = fmt::format("'{}' is not a positive number of {}", utf8(time_text), nemo ? "seconds" : "milliseconds");
        return r;
    }
    r.kind = LineRead::Kind::record;
    r.record.step = iteration;
    r.record.total = total;
    r.record.steps = nemo ? 1 : 0; // NeMo: the timing of that step; Megatron: the mean since the last line
    r.record.step_s = nemo ? t : t / 1000.0;
    for (std::string_view key : {std::string_view("global batch size:"), std::string_view("global_batch_size:")}) {
        double b = 0;
        if (const auto v = value_after(fields, key, "|");
            !v.empty() && parse_number(v, b) && b >= 1 && b < 1e12 && b == std::floor(b))
            r.record.global_batch = static_cast<std::int64_t>(b);
    }
    return r;
}

} // namespace trainsim::calibrate::detail
