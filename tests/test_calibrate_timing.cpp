// The shared timing loop and the measuring session around it, checked on a backend that records
// what it is asked to do (no clock involved): collectives timed nccl-tests' way (a barrier of the
// group, then back-to-back calls between two timestamps), the group's ranks agreeing before an op,
// the burn-in at the start of a session, the time budget, and the polling loop behind every GPU
// wait (kernels/src/wait_loop.hpp: it has no CUDA types, so its logic is tested here).
#include "test_calibrate_support.hpp"

#include "trainsim/calibrate/measure/measure.hpp"
#include "trainsim/calibrate/measure/plan.hpp"

#include "wait_loop.hpp"

#include <catch2/catch.hpp>

#include <map>

using namespace trainsim;
using namespace trainsim::calibrate;

namespace {

// Records every call as a word in `log`; `failing_rank` plays the group's vote; times are 1 ms
// per sample; rough_seconds gives each descriptor `rough` seconds.
class RecordingBackend : public Backend {
public:
    std::vector<std::string> log;
    int failing_rank = -1;
    double rough = 1e-3;
    std::vector<double> burn_ins;
    double clock = 0;       // a fake clock, seconds
    double per_prepare = 0; // what each op "takes" on it

    [[nodiscard]] std::string name() const override { return "cpu"; }
    [[nodiscard]] int ranks() const override { return 8; }
    [[nodiscard]] nlohmann::json provenance() const override { return nlohmann::json::object(); }
    [[nodiscard]] std::optional<std::string> unsupported(const Descriptor&) const override { return std::nullopt; }
    [[nodiscard]] bool participates(const Descriptor&) const override { return true; }
    [[nodiscard]] bool writes_samples() const override { return true; }
    [[nodiscard]] std::unique_ptr<PreparedOp> prepare(const Descriptor& d) override {
        struct Op : PreparedOp {
            std::vector<std::string>* log;
            void run() override { log->push_back("run"); }
            [[nodiscard]] std::string implementation() const override { return "recorder"; }
        };
        log.push_back("prepare " + d.key);
        clock += per_prepare;
        auto op = std::make_unique<Op>();
        op->log = &log;
        return op;
    }
    void start_timer() override { log.push_back("start"); }
    [[nodiscard]] double stop_timer() override {
        log.push_back("stop");
        return 1e-3;
    }
    void flush_caches() override { log.push_back("flush"); }
    void barrier(const Descriptor&) override { log.push_back("barrier"); }
    [[nodiscard]] int first_failing_rank(const Descriptor&, bool ok) override {
        log.push_back("vote");
        return ok ? failing_rank : 0;
    }
    void burn_in(double seconds) override {
        log.push_back("burn-in");
        burn_ins.push_back(seconds);
    }
    void reduce_times(const Descriptor&, std::vector<double>&) override {}
    [[nodiscard]] SampleTelemetry telemetry() const override { return {}; }
    [[nodiscard]] double rough_seconds(const Descriptor&) const override { return rough; }
};

Descriptor keyed(Descriptor d) {
    d.key = make_key(d);
    return d;
}

// The calls of one timed sample in the log, from the sample's barrier (or flush, or start) on.
std::vector<std::string> words_between(const std::vector<std::string>& log, std::size_t from, std::size_t to) {
    return {log.begin() + static_cast<std::ptrdiff_t>(from), log.begin() + static_cast<std::ptrdiff_t>(to)};
}

} // namespace

TEST_CASE("a collective's samples each follow a barrier and time their calls back to back", "[calibrate][timing]") {
    RecordingBackend b;
    Descriptor d = keyed(test::collective_desc("all_reduce", 8, 256.0 * (1 << 20)));
    d.warmup = 2;
    d.iters = 3;
    d.calls_per_sample = 4;
    auto op = b.prepare(d);
    b.log.clear();
    const TimeStats t = time_op(b, *op, d);
    // nccl-tests' BenchTime: warm-up calls, then per sample Barrier, start, `calls` calls, stop;
    // the time per call is the sample over the calls (1 ms / 4).
    const std::vector<std::string> warm{"start", "run", "stop"};
    const std::vector<std::string> sample{"barrier", "start", "run", "run", "run", "run", "stop"};
    REQUIRE(b.log.size() == 2 * warm.size() + 3 * sample.size());
    for (std::size_t w = 0; w < 2; ++w) CHECK(words_between(b.log, w * 3, w * 3 + 3) == warm);
    for (std::size_t s = 0; s < 3; ++s) {
        const std::size_t at = 6 + s * sample.size();
        CHECK(words_between(b.log, at, at + sample.size()) == sample);
    }
    CHECK(t.median == Approx(1e-3 / 4));
    CHECK(t.calls_per_sample == 4);
}

TEST_CASE("a GEMM sample flushes the caches and meets no other rank", "[calibrate][timing]") {
    RecordingBackend b;
    Descriptor d = keyed(test::gemm_desc(1024, 1024, 1024, "bf16"));
    d.warmup = 0;
    d.iters = 2;
    auto op = b.prepare(d);
    b.log.clear();
    (void)time_op(b, *op, d);
    CHECK(b.log == std::vector<std::string>{"flush", "start", "run", "stop", "flush", "start", "run", "stop"});
}

TEST_CASE("the ranks of a group agree before an op: one rank that cannot run it stops all", "[calibrate][timing]") {
    test::ScratchDir dir;
    const std::vector<Descriptor> plan{keyed(test::collective_desc("all_gather", 4, 1 << 20)),
                                       keyed(test::gemm_desc(512, 512, 512, "bf16"))};
    RecordingBackend b;
    b.failing_rank = 2; // rank 2 of the group could not prepare its part
    MeasureOptions o;
    o.plan_name = "test";
    const auto sum = measure(b, plan, open_run_dir(dir / "run", false, true), o);
    CHECK(sum.unsupported == 1);
    CHECK(sum.measured == 1);
    const SampleFile f = read_samples(dir / "run" / kSamplesFile);
    REQUIRE(f.samples.size() == 2);
    CHECK(f.samples[0].status == "unsupported");
    CHECK_THAT(f.samples[0].reason, Catch::Matchers::Contains("rank 2 of the group of 4 could not run it"));
    CHECK(f.samples[1].ok());
    // The vote comes after preparing and before any call; nothing of the collective ran.
    const auto vote = std::find(b.log.begin(), b.log.end(), "vote");
    REQUIRE(vote != b.log.end());
    CHECK(*std::prev(vote) == "prepare " + plan[0].key);
    CHECK(*std::next(vote) == "prepare " + plan[1].key);
    // A single-rank op is not voted on.
    CHECK(std::count(b.log.begin(), b.log.end(), "vote") == 1);
}

TEST_CASE("a session starts with one burn-in, and none when nothing is left to measure", "[calibrate][timing]") {
    test::ScratchDir dir;
    const std::vector<Descriptor> plan{keyed(test::gemm_desc(256, 256, 256, "bf16")),
                                       keyed(test::gemm_desc(512, 512, 512, "bf16"))};
    MeasureOptions o;
    o.plan_name = "test";
    o.burn_in_s = burn_in_seconds("cuda");
    RecordingBackend b;
    (void)measure(b, plan, open_run_dir(dir / "run", false, true), o);
    CHECK(b.burn_ins == std::vector<double>{5.0});
    CHECK(b.log.front() == "burn-in");
    RecordingBackend again;
    const auto sum = measure(again, plan, open_run_dir(dir / "run", true, true), o);
    CHECK(sum.already_done == 2);
    CHECK(again.burn_ins.empty());
    CHECK(burn_in_seconds("cpu") == 0.0);
}

TEST_CASE("the time budget stops before a descriptor that would overrun it, and --resume finishes the plan",
          "[calibrate][timing]") {
    test::ScratchDir dir;
    std::vector<Descriptor> plan;
    for (std::int64_t n : {128, 256, 512, 1024}) plan.push_back(keyed(test::gemm_desc(n, n, n, "bf16")));
    MeasureOptions o;
    o.plan_name = "test";
    // Each descriptor is estimated at 0.4 s and takes 0.4 s on the session's clock: within 1 s the
    // first two fit (ending at 0.4 and 0.8 s), the third would end at 1.2 s.
    o.time_budget_s = 1.0;
    RecordingBackend b;
    b.rough = 0.4;
    b.per_prepare = 0.4;
    o.clock = [&b] { return b.clock; };
    const auto first = measure(b, plan, open_run_dir(dir / "run", false, true), o);
    CHECK(first.budget_reached);
    CHECK(first.stopped_early);
    CHECK(first.measured == 2);
    o.time_budget_s.reset();
    RecordingBackend rest;
    const auto second = measure(rest, plan, open_run_dir(dir / "run", true, true), o);
    CHECK(second.already_done == 2);
    CHECK(second.measured == 2);
    CHECK_FALSE(second.budget_reached);
    std::vector<std::string> keys;
    for (const auto& s : read_samples(dir / "run" / kSamplesFile).samples) keys.push_back(s.desc.key);
    CHECK(keys == std::vector<std::string>{plan[0].key, plan[1].key, plan[2].key, plan[3].key});
}

TEST_CASE("the GPU plans time the short-benchmark GEMM first and the sustained pair last", "[calibrate][timing]") {
    for (int world : {1, 8}) {
        const auto plan = make_plan(PlanKind::quick, PlanContext{"cuda", world, {}});
        REQUIRE(plan.size() > 4);
        CHECK(plan.front().op == "gemm_alone");
        CHECK(plan[1].kind == OpKind::gemm);
        CHECK(plan.back().op == "gemm_sustained_" + std::string(world > 1 ? "under_all_reduce" : "alone"));
        // Collectives: 20 calls a sample below 64 MiB (nccl-tests' default -n 20), 2 from there.
        for (const auto& d : plan)
            if (d.kind == OpKind::collective) {
                INFO(d.key);
                CHECK(d.calls_per_sample == (d.bytes < 64.0 * (1 << 20) ? 20 : 2));
            }
    }
}

TEST_CASE("a GPU wait ends when the work is done, on an NCCL error, or at its timeout", "[calibrate][timing]") {
    using kernels::detail::wait_until;
    using kernels::detail::WaitEnd;
    int polls = 0;
    auto healthy = [] { return std::optional<std::string>{}; };
    CHECK(wait_until([&] { return ++polls == 3; }, healthy, 60.0) == WaitEnd::done);
    CHECK(polls == 3);
    std::string why;
    int asked = 0;
    auto broken = [&]() -> std::optional<std::string> {
        return ++asked == 2 ? std::optional<std::string>("rank 3: remote process exited") : std::nullopt;
    };
    CHECK(wait_until([] { return false; }, broken, 60.0, &why) == WaitEnd::async_error);
    CHECK(why == "rank 3: remote process exited");
    // Never ready, never an error: gives up after the timeout (0: at the first poll past it).
    CHECK(wait_until([] { return false; }, healthy, 0.0) == WaitEnd::timeout);
}

TEST_CASE("the group's vote names the lowest rank that cannot run the op, the same on every rank",
          "[calibrate][timing]") {
    // 4 ranks; ranks 1 and 3 cannot: they contribute world - rank = 3 and 1, the max over the
    // group (what MPI_Allreduce or NCCL returns to every rank) is 3, i.e. rank 1.
    const std::vector<bool> ok{true, false, true, false};
    auto max_over_group = [&ok](std::vector<double>& v) {
        double m = 0;
        for (int r = 0; r < 4; ++r) m = std::max(m, ok[static_cast<std::size_t>(r)] ? 0.0 : 4.0 - r);
        v[0] = m;
    };
    for (int r = 0; r < 4; ++r) CHECK(lowest_failing_rank(r, 4, ok[static_cast<std::size_t>(r)], max_over_group) == 1);
    auto all_ok = [](std::vector<double>& v) { v[0] = 0.0; };
    CHECK(lowest_failing_rank(2, 4, true, all_ok) == -1);
}
