// `trainsim-calibrate import run` (issue #41, "Runs in"): a run of a team's own trainer, its log
// parsed as the trainer prints it, warm-up dropped, the median of the steady window turned into
// one row of the published-measurements CSV that model::load_validation_csv reads back.
// Every log line below is a real one, pasted in the public issue or repository cited beside it;
// the scenarios are stand-ins with the run's global batch, sequence length and GPU count (the only
// plan values the arithmetic uses), written here.
#include "test_calibrate_support.hpp"

#include "trainsim/calibrate/core/calibrate_error.hpp"
#include "trainsim/calibrate/import/run_import.hpp"
#include "trainsim/model/input/loader.hpp"
#include "trainsim/model/input/validation_set.hpp"

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <string>

using namespace trainsim;
using namespace trainsim::calibrate;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

const std::string kExe = TRAINSIM_CALIBRATE_EXE;
const std::string kData = TRAINSIM_TEST_DATA_DIR;

// NVIDIA/Megatron-LM issue #756 (Mixtral 8x7B on 16 H100, log interval 1): the issue pastes
// iterations 29-31 and 71-73; kept in that order (the counter still increases).
const std::string kMegatron29 =
    " [2024-04-06 02:58:18] iteration       29/     100 | consumed samples:         3712 | elapsed time per "
    "iteration (ms): 5912.1 | throughput per GPU (TFLOP/s/GPU): 220.9 | learning rate: 5.800000E-06 | global batch "
    "size:   128 | lm loss: 1.867856E+00 | load_balancing_loss: 1.023825E+00 | loss scale: 1.0 | grad norm: 1.769 | "
    "num zeros: 0.0 | number of skipped iterations:   0 | number of nan iterations:   0 |\n";
const std::string kMegatron30 =
    " [2024-04-06 02:58:23] iteration       30/     100 | consumed samples:         3840 | elapsed time per "
    "iteration (ms): 5571.1 | throughput per GPU (TFLOP/s/GPU): 234.4 | learning rate: 6.000000E-06 | global batch "
    "size:   128 | lm loss: 1.924535E+00 | load_balancing_loss: 1.025294E+00 | loss scale: 1.0 | grad norm: 1.572 | "
    "num zeros: 0.0 | number of skipped iterations:   0 | number of nan iterations:   0 |\n";
const std::string kMegatron31 =
    " [2024-04-06 02:58:29] iteration       31/     100 | consumed samples:         3968 | elapsed time per "
    "iteration (ms): 5718.9 | throughput per GPU (TFLOP/s/GPU): 228.3 | learning rate: 6.200000E-06 | global batch "
    "size:   128 | lm loss: 1.830754E+00 | load_balancing_loss: 1.028048E+00 | loss scale: 1.0 | grad norm: 1.555 | "
    "num zeros: 0.0 | number of skipped iterations:   0 | number of nan iterations:   0 |\n";
const std::string kMegatron71 =
    " [2024-04-06 03:02:12] iteration       71/     100 | consumed samples:         9088 | elapsed time per "
    "iteration (ms): 5361.6 | throughput per GPU (TFLOP/s/GPU): 243.6 | learning rate: 1.420000E-05 | global batch "
    "size:   128 | lm loss: 1.818812E+00 | load_balancing_loss: 1.013377E+00 | loss scale: 1.0 | grad norm: 1.300 | "
    "num zeros: 0.0 | number of skipped iterations:   0 | number of nan iterations:   0 |\n";
const std::string kMegatron72 =
    " [2024-04-06 03:02:18] iteration       72/     100 | consumed samples:         9216 | elapsed time per "
    "iteration (ms): 5470.7 | throughput per GPU (TFLOP/s/GPU): 238.7 | learning rate: 1.440000E-05 | global batch "
    "size:   128 | lm loss: 1.820313E+00 | load_balancing_loss: 1.019612E+00 | loss scale: 1.0 | grad norm: 1.305 | "
    "num zeros: 0.0 | number of skipped iterations:   0 | number of nan iterations:   0 |\n";
const std::string kMegatron73 =
    " [2024-04-06 03:02:24] iteration       73/     100 | consumed samples:         9344 | elapsed time per "
    "iteration (ms): 5829.9 | throughput per GPU (TFLOP/s/GPU): 224.0 | learning rate: 1.460000E-05 | global batch "
    "size:   128 | lm loss: 1.798953E+00 | load_balancing_loss: 1.010977E+00 | loss scale: 1.0 | grad norm: 1.539 | "
    "num zeros: 0.0 | number of skipped iterations:   0 | number of nan iterations:   0 |\n";
// Same issue: the paste of iteration 32 as the search excerpt cut it, a line cut mid-record.
const std::string kMegatron32Cut =
    " [2024-04-06 02:58:35] iteration       32/     100 | consumed samples:         4096 | elapse";

std::string megatron_log() {
    return kMegatron29 + kMegatron30 + kMegatron31 + kMegatron71 + kMegatron72 + kMegatron73;
}

// A dense stand-in for the Mixtral run: 16 H100 (2 nodes of 8), global batch 128, seq_len 4096.
const std::string kScenario16 = R"(title: "stand-in for NVIDIA/Megatron-LM issue 756's run"
model: llama2-7b
training: {tokens: 1B, seq_len: 4096, global_batch: 128, micro_batch: 1}
parallel: {tp: 2, pp: 1, dp: auto, sequence_parallel: true, sharding: dist_opt, recompute: none}
precision: bf16
cluster: {gpu: h100-sxm, nodes: 2, gpus_per_node: 8}
)";

model::Plan plan_of(const std::string& yaml) {
    model::LoadOptions lo;
    lo.data_dir = kData;
    return model::load_scenario_text(yaml, "run.yaml", lo).plans.at(0);
}

// A plan with the given global batch, sequence length and GPUs (one node).
model::Plan plan(int global_batch, int seq_len, int gpus) {
    return plan_of(fmt::format(R"(model: llama2-7b
training: {{tokens: 1B, seq_len: {}, global_batch: {}, micro_batch: 1}}
parallel: {{tp: 1, pp: 1, dp: auto, sharding: dist_opt}}
precision: bf16
cluster: {{gpu: h100-sxm, nodes: 1, gpus_per_node: {}}}
)",
                               seq_len, global_batch, gpus));
}

bool has_problem(const std::vector<RunProblem>& ps, RunRefusal reason, int line) {
    for (const auto& p : ps)
        if (p.reason == reason && p.where.line == line) return true;
    return false;
}

} // namespace

TEST_CASE("megatron: training_log lines of a real run give the median of the steady iterations",
          "[calibrate][run-import]") {
    const RunLog log = parse_run_log(megatron_log(), "mixtral.log", TrainerFormat::megatron);
    REQUIRE(log.problems.empty());
    REQUIRE(log.records.size() == 6);
    CHECK(log.records[0].step == 29);
    CHECK(log.records[0].step_s == Approx(5.9121));
    CHECK(log.records[0].global_batch == 128);
    CHECK(log.total_steps == 100);
    CHECK(log.records[5].line == 6);
    CHECK_THAT(log.printer, Contains("Megatron"));

    // Default warm-up: max(2, ceil(10% of 6)) = 2 records dropped (iterations 29, 30); steady 31, 71,
    // 72, 73: 5718.9, 5361.6, 5470.7, 5829.9 ms; sorted 5361.6 5470.7 5718.9 5829.9, median
    // (5470.7 + 5718.9) / 2 = 5594.8 ms. tokens/s/GPU = 128 x 4096 / (5.5948 s x 16) = 5856.86.
    const RunMeasurement m = measure_run(log, plan_of(kScenario16), std::nullopt);
    REQUIRE(m.problems.empty());
    CHECK(m.dropped == 2);
    CHECK(m.steady == 4);
    CHECK(m.median_step_s == Approx(5.5948));
    CHECK(m.tokens_per_s_per_gpu == Approx(128.0 * 4096 / (5.5948 * 16)));
    CHECK(m.tokens_per_s_per_gpu == Approx(5856.86).margin(0.01));
    CHECK_THAT(m.derivation, Contains("4 steady records of 6 logged") && Contains("first 2 dropped"));
    CHECK_THAT(m.notes, Contains("mixtral.log") && Contains("p10") && Contains("p90"));

    // --warmup 4: steady 72, 73: median (5470.7 + 5829.9) / 2 = 5650.3 ms.
    const RunMeasurement w = measure_run(log, plan_of(kScenario16), 4);
    REQUIRE(w.problems.empty());
    CHECK(w.median_step_s == Approx(5.6503));
    CHECK_THAT(w.derivation, Contains("--warmup 4"));
}

TEST_CASE("megatron: NeMo 2's progress lines give train_step_timing's median", "[calibrate][run-import]") {
    // NVIDIA-BioNeMo/bionemo-recipes pull request #740: six consecutive iterations.
    const std::string text =
        "Training epoch 0, iteration 120/149 | lr: 3e-05 | consumed_samples: 121 | global_batch_size: 1 | "
        "global_step: 120 | reduced_train_loss: 1.233 | train_step_timing in s: 0.03146 | val_loss: 4.106\n"
        "Training epoch 0, iteration 121/149 | lr: 3e-05 | consumed_samples: 122 | global_batch_size: 1 | "
        "global_step: 121 | reduced_train_loss: 1.288 | train_step_timing in s: 0.03163 | val_loss: 4.106\n"
        "Training epoch 0, iteration 122/149 | lr: 3e-05 | consumed_samples: 123 | global_batch_size: 1 | "
        "global_step: 122 | reduced_train_loss: 1.333 | train_step_timing in s: 0.03215 | val_loss: 4.106\n"
        "Training epoch 0, iteration 123/149 | lr: 3e-05 | consumed_samples: 124 | global_batch_size: 1 | "
        "global_step: 123 | reduced_train_loss: 1.245 | train_step_timing in s: 0.03157 | val_loss: 4.106\n"
        "Training epoch 0, iteration 124/149 | lr: 3e-05 | consumed_samples: 125 | global_batch_size: 1 | "
        "global_step: 124 | reduced_train_loss: 1.375 | train_step_timing in s: 0.0317 | val_loss: 4.106\n"
        "Training epoch 0, iteration 125/149 | lr: 3e-05 | consumed_samples: 126 | global_batch_size: 1 | "
        "global_step: 125 | reduced_train_loss: 1.34 | train_step_timing in s: 0.03147 | val_loss: 4.106\n";
    const RunLog log = parse_run_log(text, "esm2.log", TrainerFormat::megatron);
    REQUIRE(log.problems.empty());
    REQUIRE(log.records.size() == 6);
    CHECK_THAT(log.printer, Contains("NeMo"));
    // Drop 120, 121; steady 0.03215 0.03157 0.0317 0.03147 s, sorted 0.03147 0.03157 0.0317 0.03215:
    // median (0.03157 + 0.0317) / 2 = 0.031635 s. One GPU, batch 1, seq 1024: 1024 / 0.031635 =
    // 32369.2 tokens/s/GPU.
    const RunMeasurement m = measure_run(log, plan(1, 1024, 1), std::nullopt);
    REQUIRE(m.problems.empty());
    CHECK(m.median_step_s == Approx(0.031635));
    CHECK(m.tokens_per_s_per_gpu == Approx(1024 / 0.031635));
    // The log says global batch 1: a scenario with another batch is not this run.
    const RunMeasurement bad = measure_run(log, plan(8, 1024, 1), std::nullopt);
    CHECK(has_problem(bad.problems, RunRefusal::batch_mismatch, 3));
}

TEST_CASE("torchtitan: tps is read as tokens/s/GPU, with rank prefixes, colour codes and other lines",
          "[calibrate][run-import]") {
    // pytorch/torchtitan pull request #1287 (log_freq 10, torchrun's [rank0]: prefix, GC and
    // profiler lines between the steps).
    const std::string text =
        "[rank0]:[titan] 2025-06-16 22:30:48,735 - root - INFO - [GC] Peforming periodical GC collection. 0.06 "
        "seconds.\n"
        "[rank0]:[titan] 2025-06-16 22:30:50,322 - root - INFO - step: 200  loss:  6.1384  memory: 49.66GiB(52.28%)  "
        "tps: 5,856  tflops: 339.16  mfu: 34.29%\n"
        "[rank0]:[titan] 2025-06-16 22:30:50,758 - root - INFO - Dumping profiler traces at step 200\n"
        "[rank0]:[titan] 2025-06-16 22:30:50,976 - root - INFO - Finished dumping profiler traces in 0.22 seconds\n"
        "[rank0]:[titan] 2025-06-16 22:31:04,970 - root - INFO - step: 210  loss:  6.0388  memory: 49.66GiB(52.28%)  "
        "tps: 5,593  tflops: 323.92  mfu: 32.75%\n"
        "[rank0]:[titan] 2025-06-16 22:31:18,934 - root - INFO - step: 220  loss:  6.0348  memory: 49.66GiB(52.28%)  "
        "tps: 5,868  tflops: 339.82  mfu: 34.36%\n"
        "[rank0]:[titan] 2025-06-16 22:31:32,895 - root - INFO - step: 230  loss:  5.9670  memory: 49.66GiB(52.28%)  "
        "tps: 5,869  tflops: 339.88  mfu: 34.37%\n"
        "[rank0]:[titan] 2025-06-16 22:31:46,869 - root - INFO - step: 240  loss:  5.8311  memory: 49.66GiB(52.28%)  "
        "tps: 5,864  tflops: 339.59  mfu: 34.34%\n"
        "[rank0]:[titan] 2025-06-16 22:31:59,261 - root - INFO - [GC] Peforming periodical GC collection. 0.06 "
        "seconds.\n"
        "[rank0]:[titan] 2025-06-16 22:32:00,846 - root - INFO - step: 250  loss:  5.8383  memory: 49.66GiB(52.28%)  "
        "tps: 5,862  tflops: 339.48  mfu: 34.33%\n";
    const RunLog log = parse_run_log(text, "titan.log", TrainerFormat::torchtitan);
    REQUIRE(log.problems.empty());
    REQUIRE(log.records.size() == 6);
    CHECK(log.rank == 0);
    CHECK(log.records[0].tokens_per_s_per_gpu == 5856);
    CHECK(log.records[1].steps == 10);
    CHECK(log.records[1].line == 5);
    CHECK(log.skipped.at("other text") == 4);
    // Drop steps 200, 210; steady tps 5868 5869 5864 5862, sorted 5862 5864 5868 5869: median
    // (5864 + 5868) / 2 = 5866 tokens/s/GPU, taken as printed (no batch or GPU count needed).
    const auto p = plan(8, 8192, 8);
    const RunMeasurement m = measure_run(log, p, std::nullopt);
    REQUIRE(m.problems.empty());
    CHECK(m.tokens_per_s_per_gpu == 5866);
    CHECK_THAT(m.derivation, Contains("median tps"));
    // The step time it stands for: 8 x 8192 / (5866 x 8) s.
    CHECK(m.median_step_s == Approx(8.0 * 8192 / (5866.0 * 8)));

    // The same values as torchtitan prints them to a terminal: MetricsProcessor.log's f-string with
    // Color's codes (pytorch/torchtitan@b5bcd76c metrics.py lines 527-536, tools/utils.py Color).
    std::string coloured;
    int step = 200;
    for (const char* tps : {"5,856", "5,593", "5,868", "5,869", "5,864", "5,862"}) {
        coloured += fmt::format(
            "[titan] 2025-06-16 22:30:50,322 - root - INFO - \033[31mstep: {:2}  \033[32mloss:  6.13840  "
            "\033[38;2;180;60;0mgrad_norm:  1.0000  \033[38;2;54;234;195mmemory: 49.66GiB(52.28%)  \033[34mtps: {}  "
            "\033[36mtflops: 339.16  \033[35mmfu: 34.29%\033[39m\n",
            step, tps);
        step += 10;
    }
    const RunLog c = parse_run_log(coloured, "titan-tty.log", TrainerFormat::torchtitan);
    REQUIRE(c.problems.empty());
    REQUIRE(c.records.size() == 6);
    CHECK(measure_run(c, p, std::nullopt).tokens_per_s_per_gpu == 5866);
}

TEST_CASE("deepspeed: CurrSamplesPerSec is the global batch over that step's time", "[calibrate][run-import]") {
    // SeekPoint/DeepSpeedExamples yknote-training-train_bert_ds.py (a HelloDeepSpeed BERT run,
    // steps_per_print 10), with the lines between them.
    const std::string text =
        "[2023-08-02 00:41:17,935] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, skipped=10, lr=[0.0001], "
        "mom=[(0.9, 0.999)]\n"
        "[2023-08-02 00:41:17,936] [INFO] [timer.py:215:stop] epoch=0/micro_step=10/global_step=10, "
        "RunningAvgSamplesPerSec=220.69530887096045, CurrSamplesPerSec=222.88787331278564, MemAllocated=0.07GB, "
        "MaxMemAllocated=1.36GB\n"
        "2023-08-02 00:41:17.936 | INFO     | __main__:log_dist:54 - [Rank 0] Loss: 10.8766\n"
        "[2023-08-02 00:41:18,677] [INFO] [timer.py:215:stop] epoch=0/micro_step=20/global_step=20, "
        "RunningAvgSamplesPerSec=202.965811549343, CurrSamplesPerSec=139.10360295001638, MemAllocated=0.07GB, "
        "MaxMemAllocated=1.36GB\n"
        "[2023-08-02 00:41:19,600] [INFO] [timer.py:215:stop] epoch=0/micro_step=30/global_step=30, "
        "RunningAvgSamplesPerSec=175.46016652134068, CurrSamplesPerSec=144.43879488095598, MemAllocated=0.07GB, "
        "MaxMemAllocated=1.36GB\n"
        "[2023-08-02 00:41:20,526] [INFO] [timer.py:215:stop] epoch=0/micro_step=40/global_step=40, "
        "RunningAvgSamplesPerSec=165.2798057710019, CurrSamplesPerSec=141.28300869902063, MemAllocated=0.07GB, "
        "MaxMemAllocated=1.55GB\n";
    const RunLog log = parse_run_log(text, "bert.log", TrainerFormat::deepspeed);
    REQUIRE(log.problems.empty());
    REQUIRE(log.records.size() == 4);
    CHECK(log.records[3].samples_per_s == Approx(141.28300869902063));
    CHECK(log.records[3].line == 6);
    const auto p = plan(32, 128, 1);
    // --warmup 1: steady steps 20, 30, 40 at 139.104, 144.439, 141.283 samples/s; step times
    // 32 / rate; the median is the middle one, 32 / 141.283 = 0.226495 s.
    const RunMeasurement m = measure_run(log, p, 1);
    REQUIRE(m.problems.empty());
    CHECK(m.median_step_s == Approx(32 / 141.28300869902063));
    CHECK(m.tokens_per_s_per_gpu == Approx(141.28300869902063 * 128));
    // Default warm-up (2 of 4): steps 30, 40; median step = (32/144.439 + 32/141.283) / 2.
    const RunMeasurement d = measure_run(log, p, std::nullopt);
    REQUIRE(d.problems.empty());
    CHECK(d.median_step_s == Approx((32 / 144.43879488095598 + 32 / 141.28300869902063) / 2));
}

TEST_CASE("hf-trainer: whole-run averages, evaluations during training taken out", "[calibrate][run-import]") {
    // Silver-8ce/llamaTest all_results.json (a TRL DPO run), whole.
    const std::string all_results = R"({
    "epoch": 3.0,
    "eval_logits/chosen": -2.707406759262085,
    "eval_logits/rejected": -2.656524419784546,
    "eval_logps/chosen": -370.1297607421875,
    "eval_logps/rejected": -296.0738525390625,
    "eval_loss": 0.513750433921814,
    "eval_rewards/accuracies": 0.738095223903656,
    "eval_rewards/chosen": -0.02744222804903984,
    "eval_rewards/margins": 1.0087225437164307,
    "eval_rewards/rejected": -1.03616464138031,
    "eval_runtime": 93.5908,
    "eval_samples": 2000,
    "eval_samples_per_second": 21.37,
    "eval_steps_per_second": 0.673,
    "train_loss": 0.45207962556766157,
    "train_runtime": 21062.2956,
    "train_samples": 61966,
    "train_samples_per_second": 8.826,
    "train_steps_per_second": 0.138
})";
    // 8.826 / 0.138 = 63.96 samples per step: a global batch of 64 (stand-in: seq 1024, 8 GPUs).
    const auto p = plan(64, 1024, 8);
    const RunLog a = parse_run_log(all_results, "all_results.json", TrainerFormat::hf_trainer);
    REQUIRE(a.problems.empty());
    REQUIRE(a.whole_run);
    const RunMeasurement ma = measure_run(a, p, std::nullopt);
    REQUIRE(ma.problems.empty());
    // No evaluation listed: 8.826 samples/s x 1024 / 8 = 1129.728 tokens/s/GPU.
    CHECK(ma.tokens_per_s_per_gpu == Approx(8.826 * 1024 / 8));
    CHECK_THAT(ma.derivation, Contains("whole-run average") && Contains("no evaluation logged"));
    // --warmup has nothing to drop in whole-run averages; a batch of 128 is not this run.
    CHECK(has_problem(measure_run(a, p, 2).problems, RunRefusal::whole_run_only, 0));
    CHECK(has_problem(measure_run(a, plan(128, 1024, 8), std::nullopt).problems, RunRefusal::batch_mismatch, 0));

    // The same run's trainer_state.json, trimmed to three of its 29 evaluation entries (steps 100,
    // 200, 2900) and the final entry, as the file has them.
    const std::string state = R"({
  "epoch": 3.0, "eval_steps": 100, "global_step": 2907,
  "log_history": [
    {"epoch": 0.1, "learning_rate": 1.718213058419244e-07, "loss": 0.6686, "step": 100},
    {"epoch": 0.1, "eval_loss": 0.6668010950088501, "eval_runtime": 94.0983, "eval_samples_per_second": 21.254,
     "eval_steps_per_second": 0.67, "step": 100},
    {"epoch": 0.21, "eval_loss": 0.5995281934738159, "eval_runtime": 93.7328, "eval_samples_per_second": 21.337,
     "eval_steps_per_second": 0.672, "step": 200},
    {"epoch": 2.99, "eval_loss": 0.5141671299934387, "eval_runtime": 93.5443, "eval_samples_per_second": 21.38,
     "eval_steps_per_second": 0.673, "step": 2900},
    {"epoch": 3.0, "step": 2907, "total_flos": 0.0, "train_loss": 0.45207962556766157, "train_runtime": 21062.2956,
     "train_samples_per_second": 8.826, "train_steps_per_second": 0.138}
  ],
  "logging_steps": 10, "max_steps": 2907, "num_train_epochs": 3, "save_steps": 500, "total_flos": 0.0
})";
    const RunLog s = parse_run_log(state, "trainer_state.json", TrainerFormat::hf_trainer);
    REQUIRE(s.problems.empty());
    REQUIRE(s.whole_run);
    CHECK(s.whole_run->evals == 3);
    CHECK(s.whole_run->eval_s == Approx(94.0983 + 93.7328 + 93.5443));
    CHECK(s.whole_run->global_step == 2907);
    // 8.826 x 21062.2956 = 185895.9 samples in 21062.2956 - 281.3754 = 20780.9202 s of training:
    // 8.94552 samples/s x 1024 / 8 = 1145.03 tokens/s/GPU.
    const RunMeasurement ms = measure_run(s, p, std::nullopt);
    REQUIRE(ms.problems.empty());
    CHECK(ms.tokens_per_s_per_gpu == Approx(8.826 * 21062.2956 / (21062.2956 - 281.3754) * 1024 / 8));
    CHECK(ms.tokens_per_s_per_gpu == Approx(1145.03).margin(0.01));
    CHECK_THAT(ms.derivation, Contains("less 3 evaluations"));

    // A checkpoint's trainer_state.json has no train_runtime (Dheena731/tinyLlama-finetune's, trimmed
    // to its last entries).
    const std::string checkpoint = R"({"global_step": 2800, "log_history": [
      {"epoch": 1.987795100222717, "grad_norm": 1.9084734916687012, "learning_rate": 1.3040663405394782e-09,
       "loss": 1.025, "step": 2790},
      {"epoch": 1.9949220489977728, "eval_loss": 1.1219322681427002, "eval_runtime": 311.3049,
       "eval_samples_per_second": 13.434, "eval_steps_per_second": 3.36, "step": 2800}],
      "max_steps": 2808, "train_batch_size": 2})";
    const RunLog c = parse_run_log(checkpoint, "checkpoint-2800/trainer_state.json", TrainerFormat::hf_trainer);
    CHECK(has_problem(c.problems, RunRefusal::whole_run_only, 0));
    // Cut mid-file: truncated, at the end.
    const RunLog cut = parse_run_log(state.substr(0, 300), "trainer_state.json", TrainerFormat::hf_trainer);
    REQUIRE(cut.problems.size() == 1);
    CHECK(cut.problems[0].reason == RunRefusal::truncated);
}

TEST_CASE("warm-up: max(2, 10%) of the logged records by default, --warmup overrides", "[calibrate][run-import]") {
    CHECK(default_warmup(1) == 2);
    CHECK(default_warmup(6) == 2);
    CHECK(default_warmup(20) == 2);
    CHECK(default_warmup(21) == 3); // 10% of 21, rounded up
    CHECK(default_warmup(100) == 10);
    const RunLog log = parse_run_log(megatron_log(), "mixtral.log", TrainerFormat::megatron);
    CHECK(measure_run(log, plan_of(kScenario16), 0).steady == 6);
    // Warm-up only: nothing left after the default's 2 of 2 records, or --warmup 6 of 6; reported at
    // the last record's line.
    const RunLog two = parse_run_log(kMegatron29 + kMegatron30, "two.log", TrainerFormat::megatron);
    CHECK(has_problem(measure_run(two, plan_of(kScenario16), std::nullopt).problems, RunRefusal::warmup_only, 2));
    CHECK(has_problem(measure_run(log, plan_of(kScenario16), 6).problems, RunRefusal::warmup_only, 6));
}

TEST_CASE("refused logs: cut last line, two runs, another run's total, no records, long lines",
          "[calibrate][run-import][refuse]") {
    // The last line cut mid-record (no end of line): truncated, at its line.
    const RunLog cut =
        parse_run_log(kMegatron29 + kMegatron30 + kMegatron31 + kMegatron32Cut, "cut.log", TrainerFormat::megatron);
    CHECK(has_problem(cut.problems, RunRefusal::truncated, 4));
    // The same cut line in the middle of a file: a malformed record there.
    const RunLog mid =
        parse_run_log(kMegatron29 + kMegatron32Cut + "\n" + kMegatron71, "mid.log", TrainerFormat::megatron);
    CHECK(has_problem(mid.problems, RunRefusal::malformed, 2));
    // A whole record without an end of line is read (Megatron closes every record with '|').
    const std::string whole = kMegatron29 + kMegatron30 + kMegatron31.substr(0, kMegatron31.size() - 1);
    CHECK(parse_run_log(whole, "whole.log", TrainerFormat::megatron).problems.empty());

    // Two runs in one file: the counter goes back (iterations 71-73, then 29-31).
    const RunLog two = parse_run_log(kMegatron71 + kMegatron72 + kMegatron73 + kMegatron29 + kMegatron30, "two.log",
                                     TrainerFormat::megatron);
    CHECK(has_problem(two.problems, RunRefusal::mixed, 4));
    // Another run's total (iteration 74 of 200 after iterations of 100).
    std::string other = kMegatron73;
    other.replace(other.find("73/     100"), 11, "74/     200");
    const RunLog totals = parse_run_log(kMegatron71 + kMegatron72 + other, "totals.log", TrainerFormat::megatron);
    CHECK(has_problem(totals.problems, RunRefusal::mixed, 3));
    // Every rank printing the same step, without a [rankN]: prefix (pytorch/torchtitan pull request
    // #2389's log): the counter does not increase.
    const std::string ranks =
        "[titan] 2026-02-24 19:46:17,508 - root - INFO - step:  4  loss:  7.62585  grad_norm: 26.6250  memory: "
        "66.91GiB(37.51%)  tps: 10,050  tflops: 314.71  mfu: 13.99%\n"
        "[titan] 2026-02-24 19:46:17,508 - root - INFO - step:  4  loss:  7.62585  grad_norm: 26.6250  memory: "
        "66.91GiB(37.51%)  tps: 10,050  tflops: 314.69  mfu: 13.99%\n";
    CHECK(has_problem(parse_run_log(ranks, "ranks.log", TrainerFormat::torchtitan).problems, RunRefusal::mixed, 2));

    // No recognisable line: a Megatron log read as DeepSpeed's, an empty file.
    const RunLog none = parse_run_log(megatron_log(), "mixtral.log", TrainerFormat::deepspeed);
    REQUIRE(none.problems.size() == 1);
    CHECK(none.problems[0].reason == RunRefusal::no_records);
    CHECK(none.problems[0].where.line == 0);
    CHECK(parse_run_log("", "empty.log", TrainerFormat::torchtitan).problems.at(0).reason == RunRefusal::no_records);
    // A line over 1 MiB (a binary file, a log without line breaks): refused at that line.
    const std::string long_line = kMegatron29 + std::string(kMaxRunLogLine + 1, 'x') + "\n";
    CHECK(has_problem(parse_run_log(long_line, "big.log", TrainerFormat::megatron).problems, RunRefusal::line_too_long,
                      2));
}

TEST_CASE("a scenario with several plans needs --plan", "[calibrate][run-import][refuse]") {
    model::LoadOptions lo;
    lo.data_dir = kData;
    const auto s = model::load_scenario_text(
        kScenario16 + "plans:\n  - name: a\n  - name: b\n    cluster: {nodes: 4}\n", "two.yaml", lo);
    REQUIRE(s.plans.size() == 2);
    CHECK_THROWS_AS(pick_plan(s, ""), CalibrationInputError);
    CHECK_THROWS_AS(pick_plan(s, "c"), CalibrationInputError);
    CHECK(pick_plan(s, "b").num_gpus() == 32);
}

TEST_CASE("bad files are refused at once: missing, a folder, a FIFO, a device", "[calibrate][run-import][refuse]") {
    test::ScratchDir dir;
    const auto t0 = std::chrono::steady_clock::now();
    CHECK_THROWS_AS(read_run_file(dir / "missing.log"), CalibrationInputError);
    CHECK_THROWS_AS(read_run_file(dir.path()), CalibrationInputError);
    REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
    CHECK_THROWS_AS(read_run_file(dir / "fifo"), CalibrationInputError); // no writer: must not wait for one
    CHECK_THROWS_AS(read_run_file("/dev/zero"), CalibrationInputError);  // endless: must not read it
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
    test::write_text(dir / "ok.log", megatron_log());
    CHECK(read_run_file(dir / "ok.log") == megatron_log());
}

TEST_CASE("import run appends a row that load_validation_csv reads back, never twice the same id",
          "[calibrate][run-import][cli]") {
    test::ScratchDir dir;
    test::write_text(dir / "mixtral.log", megatron_log());
    test::write_text(dir / "run.yaml", kScenario16);
    const std::string out = (dir / "runs.csv").string();
    const std::vector<std::string> args{"import",     "run",
                                        "--format",   "megatron",
                                        "--log",      (dir / "mixtral.log").string(),
                                        "--scenario", (dir / "run.yaml").string(),
                                        "--out",      out,
                                        "--data-dir", kData,
                                        "--json"};
    auto r = test::run_child(kExe, args, dir.path());
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j.at("row").at("id") == "mixtral");
    CHECK(j.at("run").at("dropped") == 2);
    CHECK(test::read_text(out).starts_with("id,source_group,source,model,layers,"));

    // Read back by the schema's one reader: tokens/s/GPU = 128 x 4096 / (5.5948 s x 16) = 5856.86.
    auto rows = model::load_validation_csv(out, kData);
    REQUIRE(rows.size() == 1);
    CHECK(rows[0].id == "mixtral");
    CHECK(rows[0].kind == "step");
    CHECK(rows[0].skip_reason.empty());
    CHECK(rows[0].measured_tokens_per_s_per_gpu == Approx(5856.86).margin(0.005));
    CHECK(rows[0].plan.num_gpus() == 16);
    CHECK(rows[0].plan.parallel.tp == 2);
    CHECK(rows[0].plan.parallel.dp == 8);
    CHECK(rows[0].plan.training.global_batch == 128);

    // The same id again: refused (exit 2), the file as it was; another id appends.
    const std::string before = test::read_text(out);
    r = test::run_child(kExe, args, dir.path());
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("already there"));
    CHECK(test::read_text(out) == before);
    auto again = args;
    again.insert(again.end(), {"--id", "mixtral-warmup4", "--warmup", "4"});
    REQUIRE(test::run_child(kExe, again, dir.path()).exit_code == 0);
    rows = model::load_validation_csv(out, kData);
    REQUIRE(rows.size() == 2);
    // --warmup 4: median 5650.3 ms, 128 x 4096 / (5.6503 x 16) = 5799.33.
    CHECK(rows[1].measured_tokens_per_s_per_gpu == Approx(5799.33).margin(0.005));
    CHECK(test::read_text(out).starts_with(before));
    // Nothing left beside it: no temporary file, no lock file.
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir.path())) names.insert(e.path().filename().string());
    CHECK(names == std::set<std::string>{"child.err", "child.out", "mixtral.log", "run.yaml", "runs.csv"});
}

TEST_CASE("import run refuses with exit 2 and file:line: a cut log, several plans, a FIFO",
          "[calibrate][run-import][cli][refuse]") {
    test::ScratchDir dir;
    test::write_text(dir / "cut.log", kMegatron29 + kMegatron30 + kMegatron31 + kMegatron32Cut);
    test::write_text(dir / "run.yaml", kScenario16);
    test::write_text(dir / "two.yaml", kScenario16 + "plans:\n  - name: a\n  - name: b\n");
    const std::string out = (dir / "runs.csv").string();
    auto run = [&](const std::string& log, const std::string& scenario) {
        return test::run_child(kExe,
                               {"import", "run", "--format", "megatron", "--log", log, "--scenario", scenario, "--out",
                                out, "--data-dir", kData},
                               dir.path());
    };
    auto r = run((dir / "cut.log").string(), (dir / "run.yaml").string());
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains((dir / "cut.log").string() + ":4:") && Contains("truncated"));
    r = run((dir / "cut.log").string(), (dir / "two.yaml").string());
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("--plan"));
    REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
    r = run((dir / "fifo").string(), (dir / "run.yaml").string());
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("not a regular file"));
    // A FIFO as the scenario: refused before the loader would wait on it.
    r = run((dir / "cut.log").string(), (dir / "fifo").string());
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("fifo") && Contains("not a regular file"));
    CHECK_FALSE(fs::exists(out));
}
