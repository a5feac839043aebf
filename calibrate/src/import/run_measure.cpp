// `import run`: from a trainer's records to the one number the schema holds, tokens per second per
// GPU (design.md: global_batch x seq_len / (step_time x num_gpus)), with the words that say how.
#include "trainsim/calibrate/core/calibrate_error.hpp"
#include "trainsim/calibrate/import/run_import.hpp"
#include "trainsim/calibrate/samples/sample.hpp"

#include "import_text.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

namespace trainsim::calibrate {

using namespace detail;

// The first logged records of a run are not its steady state: the first step carries the
// one-time costs (CUDA context and NCCL communicator setup, cuDNN / cuBLAS autotuning,
// torch.compile, the caching allocator growing, the data loader's first fetch), and a trainer logs
// it alone on purpose (Megatron logs iteration 1 "to document initialization overhead",
// training.py; torchtitan logs step 1, metrics.py should_log; DeepSpeed's ThroughputTimer starts
// timing at step 2). Two records cover that at any log interval: the first record, and the one
// whose interval still holds the second step's settling (clocks ramping, the allocator's last
// growth). In a longer log 10% more (rounded up) keep slow settling out (a power-capped GPU's
// clock, a file system warming up) while leaving 90% of the records to the median, which itself
// shrugs off the spikes of the steady part (garbage collection, checkpoint saves).
std::size_t default_warmup(std::size_t logged) {
    return std::max<std::size_t>(2, (logged + 9) / 10);
}

const model::Plan& pick_plan(const model::Scenario& scenario, const std::string& name) {
    std::vector<std::string> names;
    for (const auto& p : scenario.plans) names.push_back(p.name);
    if (name.empty()) {
        if (scenario.plans.size() == 1) return scenario.plans.front();
        throw CalibrationInputError(scenario.file,
                                    fmt::format("{} plans ({}): say which one the run used with --plan NAME",
                                                scenario.plans.size(), fmt::join(names, ", ")));
    }
    for (const auto& p : scenario.plans)
        if (p.name == name) return p;
    throw CalibrationInputError(scenario.file,
                                fmt::format("no plan named '{}' (plans: {})", name, fmt::join(names, ", ")));
}

namespace {

void problem(RunMeasurement& m, const RunLog& log, RunRefusal reason, int line, const std::string& msg,
             const std::string& key = {}) {
    m.problems.push_back(RunProblem{reason, model::Diagnostic{log.file, line, line > 0 ? 1 : 0, key, msg}});
}

// Five significant digits: enough to recompute tokens/s/GPU from the derivation to its printed 0.01.
std::string seconds(double s) {
    return s >= 1 ? fmt::format("{:.5g} s", s) : fmt::format("{:.5g} ms", s * 1e3);
}

// HF Trainer: one whole-run figure, the evaluations logged during training taken out.
void measure_whole_run(const RunLog& log, const model::Plan& plan, std::optional<int> warmup, RunMeasurement& m) {
    const WholeRunAverages& w = *log.whole_run;
    if (warmup) {
        problem(m, log, RunRefusal::whole_run_only, 0,
                "--warmup: the HF Trainer's files hold whole-run averages (train_runtime), no step times to drop");
        return;
    }
    const double gb = plan.training.global_batch;
    // Both rates are printed to 3 decimals (round(x, 3)): their ratio, samples per step, is known to
    // within those roundings. A scenario whose global batch is 2% off (more than a last short batch
    // per epoch makes) describes another run.
    const double per_step = w.samples_per_s / w.steps_per_s;
    const double tol = per_step * (0.0005 / w.samples_per_s + 0.0005 / w.steps_per_s) + 0.02 * gb;
    if (std::abs(per_step - gb) > tol) {
        problem(m, log, RunRefusal::batch_mismatch, 0,
                fmt::format("train_samples_per_second / train_steps_per_second = {:.2f} samples per step, but the "
                            "scenario's global batch is {}: the scenario does not describe this run",
                            per_step, plan.training.global_batch));
        return;
    }
    const double samples = w.samples_per_s * w.runtime_s;
    const double train_s = w.runtime_s - w.eval_s;
    const double samples_per_s = samples / train_s;
    m.logged = m.steady = 1;
    m.tokens_per_s_per_gpu = samples_per_s * plan.training.seq_len / plan.num_gpus();
    m.median_step_s = m.p10_step_s = m.p90_step_s = gb / samples_per_s;
    m.steady_steps = w.global_step > 0 ? w.global_step
                                       : static_cast<std::int64_t>(std::min(w.steps_per_s * w.runtime_s + 0.5, 9e18));
    m.derivation = fmt::format(
        "whole-run average of the HF Trainer (speed_metrics): train_samples_per_second {} x train_runtime {} s = "
        "{:.0f} samples in {:.1f} s of training ({}); tokens/s/GPU = {:.4g} samples/s x seq_len {} / {} GPUs; "
        "includes the warm-up steps and checkpoint saves, which the file cannot tell apart",
        w.samples_per_s, w.runtime_s, samples, train_s,
        w.evals > 0 ? fmt::format("less {} evaluations logged during training, {:.1f} s", w.evals, w.eval_s)
                    : std::string("no evaluation logged during training"),
        samples_per_s, plan.training.seq_len, plan.num_gpus());
    m.notes = fmt::format("log {} ({}); whole-run average: no step-time spread (the HF Trainer logs no step times)",
                          base_name(log.file), log.printer);
}

} // namespace

RunMeasurement measure_run(const RunLog& log, const model::Plan& plan, std::optional<int> warmup) {
    RunMeasurement m;
    if (!log.problems.empty()) return m;
    if (log.whole_run) {
        measure_whole_run(log, plan, warmup, m);
        return m;
    }
    m.logged = log.records.size();
    if (warmup && *warmup < 0) {
        problem(m, log, RunRefusal::warmup_only, 0, "--warmup must be a count of logged steps, 0 or more");
        return m;
    }
    m.dropped = warmup ? static_cast<std::size_t>(*warmup) : default_warmup(m.logged);
    const std::string rule =
        warmup ? fmt::format("--warmup {}", *warmup) : fmt::format("default max(2, 10%) of {} logged", m.logged);
    if (m.dropped >= m.logged) {
        problem(m, log, RunRefusal::warmup_only, log.records.empty() ? 0 : log.records.back().line,
                fmt::format("{} logged step record{}, all of them warm-up ({}): no steady window; log a longer run "
                            "or pass a smaller --warmup",
                            m.logged, m.logged == 1 ? "" : "s", rule));
        m.dropped = std::min(m.dropped, m.logged);
        return m;
    }
    const double gb = plan.training.global_batch;
    const double tokens_per_step = gb * plan.training.seq_len;
    const int gpus = plan.num_gpus();
    std::vector<double> step_s, tps;
    const std::vector<StepRecord> steady(log.records.begin() + static_cast<std::ptrdiff_t>(m.dropped),
                                         log.records.end());
    for (const StepRecord& r : steady) {
        if (r.global_batch && *r.global_batch != plan.training.global_batch) {
            problem(m, log, RunRefusal::batch_mismatch, r.line,
                    fmt::format("the log's global batch size is {} at step {}, the scenario's {}: the scenario does "
                                "not describe this run",
                                *r.global_batch, r.step, plan.training.global_batch));
            return m;
        }
        double s = r.step_s;
        if (r.samples_per_s > 0) s = gb / r.samples_per_s;
        if (r.tokens_per_s_per_gpu > 0) {
            s = tokens_per_step / (r.tokens_per_s_per_gpu * gpus);
            tps.push_back(r.tokens_per_s_per_gpu);
        }
        step_s.push_back(s);
        m.steady_steps += r.steps;
    }
    m.steady = steady.size();
    const TimeStats st = summarize(step_s, 1);
    m.median_step_s = st.median;
    m.p10_step_s = st.p10;
    m.p90_step_s = st.p90;
    const StepRecord& first = steady.front();
    const StepRecord& last = steady.back();
    const std::string window =
        fmt::format("{} steady records of {} logged (steps {}-{}, lines {}-{}; the first {} dropped as warm-up: {})",
                    m.steady, m.logged, first.step, last.step, first.line, last.line, m.dropped, rule);
    if (!tps.empty()) {
        // torchtitan prints tokens/s/GPU itself: its median is the value, no batch or GPU count needed.
        m.tokens_per_s_per_gpu = summarize(tps, 1).median;
        m.derivation =
            fmt::format("median tps (torchtitan: tokens per second per GPU over each log interval) of {}", window);
    } else {
        m.tokens_per_s_per_gpu = tokens_per_step / (m.median_step_s * gpus);
        const std::string what =
            log.format == TrainerFormat::deepspeed && first.samples_per_s > 0
                ? "step time = global batch / CurrSamplesPerSec (DeepSpeed ThroughputTimer: that step alone)"
            : log.format == TrainerFormat::deepspeed
                ? "'iter time (s)' (DeepSpeed pipeline engine: mean per log interval)"
            : contains(log.printer, "NeMo") ? "'train_step_timing in s' (NeMo: that step)"
                                            : "'elapsed time per iteration (ms)' (Megatron: mean per log interval)";
        m.derivation = fmt::format(
            "median step time {} from {} of {}; tokens/s/GPU = global_batch {} x seq_len {} / "
            "({} x {} GPUs)",
            seconds(m.median_step_s), what, window, plan.training.global_batch, plan.training.seq_len,
            seconds(m.median_step_s), gpus);
    }
    m.notes =
        fmt::format("log {} ({}{}); steady step time p10 {}, median {}, p90 {} (spread {:.1f}%)", base_name(log.file),
                    log.printer, log.rank >= 0 ? fmt::format(", [rank{}] lines", log.rank) : "", seconds(m.p10_step_s),
                    seconds(m.median_step_s), seconds(m.p90_step_s), 100.0 * st.spread());
    return m;
}

} // namespace trainsim::calibrate
