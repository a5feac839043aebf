// --format hf-trainer: the files the Hugging Face Trainer writes at the end of train() (what
// LLaMA-Factory, Axolotl and TRL leave in their output folder).
//
// transformers src/transformers/trainer_utils.py speed_metrics(split, start_time, num_samples,
// num_steps, ...): runtime = time.time() - start_time; result[f"{split}_runtime"] =
// round(runtime, 4); f"{split}_samples_per_second" = round(num_samples / runtime, 3);
// f"{split}_steps_per_second" = round(num_steps / runtime, 3). Trainer._inner_training_loop calls it
// once, after the loop, with start_time taken before the first step: the figures are whole-run
// averages that include the first (slow) steps, every evaluation run during training and every
// checkpoint save. They go to trainer_state.json as the last entry of log_history and to
// all_results.json / train_results.json (save_metrics) as train_runtime,
// train_samples_per_second, train_steps_per_second.
//
// log_history's per-step entries hold loss, learning rate, grad norm and step, no time, so no
// steady window can be told apart; but its evaluation entries hold eval_runtime, which
// measure_run takes out of train_runtime. A real end of trainer_state.json (Silver-8ce/llamaTest,
// a TRL DPO run, 3 epochs, 2907 steps):
//     {"epoch": 2.99, "eval_loss": 0.514..., "eval_runtime": 93.5443, "eval_samples_per_second": 21.38,
//      "eval_steps_per_second": 0.673, "step": 2900},
//     {"epoch": 3.0, "step": 2907, "total_flos": 0.0, "train_loss": 0.452..., "train_runtime": 21062.2956,
//      "train_samples_per_second": 8.826, "train_steps_per_second": 0.138}
// A checkpoint's trainer_state.json (written during training) has no such entry and is refused.
#include "import_text.hpp"
#include "run_log_formats.hpp"

#include "trainsim/model/core/errors.hpp"

#include <fmt/format.h>

#include <cmath>

namespace trainsim::calibrate::detail {

namespace {

using nlohmann::json;

std::optional<double> number(const json& o, const char* key) {
    const auto it = o.find(key);
    if (it == o.end() || !it->is_number()) return std::nullopt;
    return it->get<double>();
}

} // namespace

void read_hf_trainer_json(std::string_view text, RunLog& log) {
    json doc;
    try {
        doc = json::parse(text);
    } catch (const json::parse_error& e) {
        const std::size_t byte = e.byte > 0 ? std::min<std::size_t>(e.byte - 1, text.size()) : 0;
        const auto [line, col] = model::line_col(text, byte);
        const bool cut = e.byte >= text.size() || trim(text.substr(byte)).empty();
        if (cut && !trim(text).empty())
            add_problem(log, RunRefusal::truncated, line, col,
                        "the JSON ends before it is complete: the file was cut (copied while written, or a disk "
                        "full); import the whole file");
        else
            add_problem(log, RunRefusal::malformed, line, col, fmt::format("not valid JSON: {}", e.what()));
        return;
    } catch (const json::exception& e) { // a number out of range ("1e999")
        add_problem(log, RunRefusal::malformed, 0, 0, fmt::format("not valid JSON: {}", e.what()));
        return;
    }
    if (!doc.is_object()) {
        add_problem(log, RunRefusal::malformed, 1, 1, "not a JSON object: the HF Trainer writes one");
        return;
    }
    const json* totals = &doc;
    std::string key_prefix;
    WholeRunAverages w;
    if (const auto history = doc.find("log_history"); history != doc.end()) {
        if (!history->is_array()) {
            add_problem(log, RunRefusal::malformed, 0, 0, "log_history is not a list", "log_history");
            return;
        }
        log.printer = "HF Trainer trainer_state.json (train_runtime, log_history)";
        totals = nullptr;
        for (std::size_t i = 0; i < history->size(); ++i) {
            const json& e = (*history)[i];
            if (!e.is_object()) continue;
            if (e.contains("train_runtime")) {
                totals = &e;
                key_prefix = fmt::format("log_history[{}].", i);
            } else if (const auto ev = number(e, "eval_runtime"); ev && totals == nullptr) {
                if (!(*ev >= 0) || !std::isfinite(*ev)) {
                    add_problem(log, RunRefusal::bad_value, 0, 0, "eval_runtime is not a time",
                                fmt::format("log_history[{}].eval_runtime", i));
                    return;
                }
                w.eval_s += *ev;
                ++w.evals;
            }
        }
        if (const auto gs = number(doc, "global_step"); gs && *gs >= 0 && *gs < 1e15)
            w.global_step = static_cast<std::int64_t>(*gs);
        if (totals == nullptr) {
            add_problem(log, RunRefusal::whole_run_only, 0, 0,
                        "log_history has no entry with train_runtime: a checkpoint's trainer_state.json, written "
                        "before training ended; import the output folder's trainer_state.json or all_results.json",
                        "log_history");
            return;
        }
    } else {
        log.printer = "HF Trainer all_results.json / train_results.json (train_runtime)";
    }
    const auto runtime = number(*totals, "train_runtime");
    const auto samples = number(*totals, "train_samples_per_second");
    const auto steps = number(*totals, "train_steps_per_second");
    for (const auto& [name, v] : {std::pair{"train_runtime", runtime}, std::pair{"train_samples_per_second", samples},
                                  std::pair{"train_steps_per_second", steps}}) {
        if (!v) {
            add_problem(log, RunRefusal::whole_run_only, 0, 0,
                        fmt::format("no {} (the Trainer's speed_metrics write it at the end of train())", name),
                        key_prefix + name);
            return;
        }
        // Seconds or rates between 1e-6 and 1e10: beyond that no run of a trainer.
        if (!(*v >= 1e-6 && *v <= 1e10)) {
            add_problem(log, RunRefusal::bad_value, 0, 0,
                        fmt::format("{} is not a positive number a run can "
                                    "have",
                                    name),
                        key_prefix + name);
            return;
        }
    }
    w.runtime_s = *runtime;
    w.samples_per_s = *samples;
    w.steps_per_s = *steps;
    if (w.eval_s >= w.runtime_s) {
        add_problem(log, RunRefusal::bad_value, 0, 0,
                    fmt::format("the evaluations during training took {:.1f} s of a {:.1f} s train_runtime", w.eval_s,
                                w.runtime_s),
                    "log_history");
        return;
    }
    log.whole_run = w;
}

} // namespace trainsim::calibrate::detail
