// --lang zh-CN past the tables (issue #42 item 4): what `plan` prints after its best plan (the
// pipeline schedules, why the best wins, the per-GPU-count table, the recommendation), what makes
// a plan fit, why no plan meets the constraints, the HTML report's "does not fit" note and its
// chart tooltips. Each in Chinese from catalog strings only; plan's JSON the same with --lang.
#include "banded_run.hpp"
#include "cli_runner.hpp"

#include "trainsim/model/core/file_io.hpp"
#include "trainsim/model/input/loader.hpp"
#include "trainsim/sim/report/html_report.hpp"
#include "trainsim/sim/report/lang.hpp"
#include "trainsim/sim/report/report.hpp"
#include "trainsim/sim/run/estimate.hpp"
#include "trainsim/sim/search/constraint_miss.hpp"
#include "trainsim/sim/search/fit_advice.hpp"
#include "trainsim/sim/search/plan_search.hpp"
#include "trainsim/sim/trust/trust.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

using namespace trainsim;
using trainsim::test::run_trainsim;

namespace {

// A pipelined plan (its schedules, its timeline's tooltips), a plan beside it (why the best
// wins) and one that does not fit (Llama-2 70B on 8 RTX 3090s: fit advice, the report's note).
const char* kScenario = R"(title: "lang more"
model: llama2-7b
training: {tokens: 10B, seq_len: 4096, global_batch: 64, micro_batch: 1}
parallel: {tp: 2, pp: 2, dp: auto, sequence_parallel: true, sharding: dist_opt, recompute: selective}
precision: bf16
cluster: {gpu: h100-sxm, nodes: 1, gpus_per_node: 8}
pricing: {basis: gpu_hour, rate: 2.5, currency: USD}
plans:
  - name: h100 pp2
  - name: h100 pp1
    parallel: {tp: 2, pp: 1}
  - name: 70b on 3090
    model: llama2-70b
    cluster: {gpu: rtx-3090}
)";

using Run = test::BandedRun;

const Run& run() {
    static const Run r = test::simulate_with_bands(kScenario, "lang-more.yaml");
    return r;
}

bool has(const std::string& s, std::string_view what) { return s.find(what) != std::string::npos; }

void report_missing(const std::vector<std::string>& missing) {
    for (const auto& m : missing) UNSCOPED_INFO("untranslated: " << m);
    CHECK(missing.empty());
}

// plan on 8 RTX 4090s: the best layout is pipelined (pp 4), so its schedules follow it.
const std::string kPipelined = "plan --model llama2-7b --gpu rtx-4090 --gpus 8 --tokens 10B --top 3 -q";
// plan on 8 and 16 H100s with a deadline that 8 GPUs miss: the per-count table, and #2 recommended
// over #1 (tied, more memory headroom).
const std::string kCounts =
    "plan --model llama2-7b --gpu h100-sxm --gpus 8,16 --tokens 10B --price 2 --deadline-days 0.7 --top 2 -q";

} // namespace

TEST_CASE("zh-CN plan text after the best plan: schedules, why the best wins, per-count table, recommendation",
          "[lang]") {
    const auto pipe = run_trainsim(kPipelined + " --lang zh-CN");
    REQUIRE(pipe.rc == 0);
    INFO(pipe.out);
    CHECK(has(pipe.out, "\n各流水线调度下的最佳布局（由 megatron-core 提供；"));
    CHECK(has(pipe.out, fmt::format("  {:<11} {:>3} {:>8}", "调度", "vp", "已提供")));
    CHECK(has(pipe.out, "不适用：parallel.recompute_layers")); // the check's diagnostic: scenario keys
    CHECK(has(pipe.out, "  选定：1f1b：megatron-core 提供的调度中能放下此布局的最快者"));
    CHECK(has(pipe.out, "，但 megatron-core 未提供"));
    CHECK(has(pipe.out, "最佳方案为何胜出：与次优方案（"));
    CHECK(has(pipe.out, " s 重计算"));

    const auto counts = run_trainsim(kCounts + " --lang zh-CN");
    REQUIRE(counts.rc == 0);
    INFO(counts.out);
    CHECK(has(counts.out, "\n各 GPU 数的最佳方案（'*'：位于天数-费用帕累托前沿上"));
    CHECK(has(counts.out, "  GPU 数  最佳布局"));
    CHECK(has(counts.out, "      8  无方案：因期限被排除\n"));
    CHECK(has(counts.out, "推荐：第 2 名在误差区间内与第 1 名并列，且更稳健：显存余量多 "));

    // None of the English sentences is left (numbers, units, ids and scenario keys stay).
    for (const auto* out : {&pipe.out, &counts.out})
        for (const char* english : {"the best layout under each pipeline schedule", "offered by", "chosen:",
                                    "not applicable", "would be", "why the best wins", "runner-up", "best plan per GPU",
                                    "best layout", "excluded by", "tied with #1", "more robust", "headroom", "days",
                                    "no price"}) {
            INFO(english);
            CHECK_FALSE(has(*out, english));
        }
    // The tables line up as the English ones do: the per-count rows are as wide as their header.
    const auto at = counts.out.find("  GPU 数  最佳布局");
    REQUIRE(at != std::string::npos);
    const auto line = [&](std::size_t from) { return counts.out.substr(from, counts.out.find('\n', from) - from); };
    const auto header = line(at);
    const auto row = line(counts.out.find("\n *", at) + 1); // 16 GPUs: a plan, on the front
    CHECK(sim::display_width(row) == sim::display_width(header));
}

TEST_CASE("plan --json is the same with --lang zh-CN: schedule reason and recommendation stay English", "[lang]") {
    for (const auto& cmd : {kPipelined, kCounts}) {
        const auto en = run_trainsim(cmd + " --json");
        const auto zh = run_trainsim(cmd + " --json --lang zh-CN");
        REQUIRE(en.rc == 0);
        CHECK(zh.rc == 0);
        // Byte for byte but the search's own wall time and the counters of how plans were dropped,
        // which depend on which thread finished first (docs/plan-search.md).
        auto without_seconds = [](const std::string& out) {
            auto j = nlohmann::json::parse(out);
            for (const char* k : {"seconds", "pruned_bound", "pruned_critical_path", "simulated", "filtered",
                                  "filtered_deadline", "filtered_budget"})
                j["search"].erase(k);
            return j.dump(2);
        };
        CHECK(without_seconds(zh.out) == without_seconds(en.out));
        const auto j = nlohmann::json::parse(en.out);
        if (cmd == kPipelined)
            CHECK(has(j["schedule_reason"].get<std::string>(), "the fastest schedule megatron-core offers"));
        else
            CHECK(has(j["search"]["recommended_why"].get<std::string>(), "is tied with #1 within the error bands"));
    }
}

TEST_CASE("zh-CN search text uses only catalog strings: schedules, why the best wins, fit advice, constraints",
          "[lang]") {
    const auto& r = run();
    REQUIRE(r.results.size() == 3);
    const auto& pp2 = r.results[0];
    const auto& pp1 = r.results[1];
    REQUIRE(pp2.estimate.step.has_value());
    REQUIRE(pp1.estimate.step.has_value());
    REQUIRE_FALSE(r.results[2].estimate.fits);
    std::vector<std::string> missing;
    const sim::Translator zh(sim::Lang::zh_cn, &missing);

    // Why the schedule: every schedule's step, some faster and some not offered.
    const auto options = sim::compare_schedules(*pp2.plan, {model::PpSchedule::one_f_one_b}, 0.05, pp2.estimate, 2);
    const auto why = sim::schedule_reason(*pp2.plan, options, "--pp-schedules", zh);
    const auto why_en = sim::schedule_reason(*pp2.plan, options, "--pp-schedules");
    CHECK(has(why_en, "the fastest schedule --pp-schedules offers"));
    CHECK(has(why, "--pp-schedules 提供的调度中能放下此布局的最快者"));
    CHECK_FALSE(has(why, "faster"));
    CHECK_FALSE(has(why, "slower"));

    const sim::RankedPlan a{*pp1.plan, pp1.estimate}, b{*pp2.plan, pp2.estimate};
    const auto wins = sim::explain_winner(a, b, zh);
    CHECK(wins.rfind("最佳方案为何胜出：与次优方案（tp2 pp2", 0) == 0);
    CHECK_FALSE(has(wins, "runner-up"));
    // English unchanged in form: the categories follow "spends", comma-separated.
    CHECK(has(sim::explain_winner(a, b), "; per step the runner-up spends +"));

    // What makes the 70B fit: each knob's memory, in Chinese; the knobs are scenario keys.
    const auto advice = sim::fit_advice({*r.results[2].plan}, sim::kMemoryHeadroomFraction, false);
    const auto fit = sim::format_fit_advice(advice, zh);
    CHECK(fit.rfind("最接近的布局：8 个 GPU ", 0) == 0);
    CHECK(has(fit, "能让它放下的调整，逐项作用于该布局：\n"));
    CHECK(has(fit, "parallel.recompute: full"));
    CHECK(has(fit, "  放不下\n"));
    CHECK_FALSE(has(fit, "does not fit"));
    CHECK_FALSE(has(fit, "GiB per GPU"));
    CHECK_FALSE(has(fit, " fits"));

    // No plan meets the constraints: a deadline one count misses, a budget the other.
    sim::SearchOptions opt;
    opt.deadline_days = 1.0;
    opt.budget = 10.0;
    sim::ConstraintMiss miss;
    miss.fastest = a;
    miss.cheapest = b;
    sim::CountMiss c8{8, a, a, {"deadline", "budget"}};
    sim::CountMiss c16{16, std::nullopt, std::nullopt, {"memory"}};
    miss.counts = {c8, c16};
    const auto cm = sim::format_constraint_miss(miss, opt, "USD", zh);
    CHECK(cm.rfind("没有方案满足约束", 0) == 0);
    CHECK(has(cm, "排除原因：期限与预算\n"));
    CHECK(has(cm, "没有显存放得下的布局\n"));
    CHECK_FALSE(has(cm, "excluded by"));
    CHECK_FALSE(has(cm, "plan,"));

    report_missing(missing);
}

TEST_CASE("zh-CN HTML report: the does-not-fit note and the chart tooltips in Chinese, catalog strings only",
          "[lang]") {
    const auto& r = run();
    std::vector<std::string> missing;
    const sim::Translator zh(sim::Lang::zh_cn, &missing);
    const std::string zh_page = sim::html_report("lang more", "lang-more.yaml", r.results, {}, zh);
    const std::string en_page = sim::html_report("lang more", "lang-more.yaml", r.results, {});
    report_missing(missing);

    // The plans table's note: why the 70B does not fit, as the JSON's "reason" says in English.
    const auto& nofit = r.results[2];
    const auto reason_en = sim::no_fit_reason(*nofit.plan, nofit.estimate);
    CHECK(sim::plan_json(*nofit.plan, nofit.estimate)["reason"] == reason_en);
    CHECK(has(en_page, fmt::format("data-key=\"reason\">{}</td>", reason_en)));
    CHECK(has(zh_page, "data-key=\"reason\">每 GPU 需 "));
    CHECK(has(zh_page, " GiB（流水线阶段 0），而 GPU 只有 "));
    CHECK_FALSE(has(zh_page, "data-key=\"reason\">needs"));

    // Tooltips: the 80% band's whisker and each pipeline pass.
    CHECK(has(en_page, "<title>80% band: "));
    CHECK(has(zh_page, "<title>80% 区间："));
    CHECK_FALSE(has(zh_page, "80% band:"));
    CHECK(has(en_page, "<title>stage 0 F micro-batch 1: "));
    CHECK(has(zh_page, "<title>阶段 0 F 微批 1："));
    CHECK_FALSE(has(zh_page, "micro-batch 1:"));
}
