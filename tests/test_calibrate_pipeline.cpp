// The whole calibration pipeline on the CPU backend: measure -> fit -> write the profile -> load
// it with the model's loader -> simulate a plan with it. And resume: a run stopped part way (by
// the test hook, and by SIGKILL of the real executable) ends, after --resume, with exactly the
// keys of an uninterrupted run, in the same order, none duplicated or lost.
#include "fixtures.hpp"
#include "test_calibrate_support.hpp"

#include "trainsim/calibrate/backends/cpu_backend.hpp"
#include "trainsim/calibrate/fit/fit.hpp"
#include "trainsim/calibrate/measure/measure.hpp"
#include "trainsim/calibrate/measure/plan.hpp"
#include "trainsim/model/input/loader.hpp"
#include "trainsim/sim/cost/compute_cost.hpp"
#include "trainsim/sim/run/estimate.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <csignal>
#include <thread>

using namespace trainsim;
using namespace trainsim::calibrate;

namespace {

constexpr int kThreads = 2;  // the CPU backend's ranks in these tests (2 cores on CI)

std::vector<Descriptor> tiny_plan() { return make_plan(PlanKind::tiny, PlanContext{"cpu", kThreads, {}}); }

std::vector<std::string> keys_of(const std::vector<Descriptor>& plan) {
    std::vector<std::string> k;
    for (const auto& d : plan) k.push_back(d.key);
    return k;
}

std::vector<std::string> keys_of(const SampleFile& f) {
    std::vector<std::string> k;
    for (const auto& s : f.samples) k.push_back(s.desc.key);
    return k;
}

using test::h100;

FitOptions cpu_fit_options() {
    FitOptions o = default_fit_options();
    o.precision_map["fp32"] = model::Precision::bf16;  // the CPU's fp32 numbers stand in for bf16
    return o;
}

// The toy model at TP 1 with 256 tokens per micro-batch: the GEMMs the tiny plan measured.
model::Plan toy_plan(const model::HardwareProfile& hw) {
    model::Plan p = test::small_plan(1, 1, 1, /*global_batch=*/4, /*micro_batch=*/2);
    p.model = test::toy_model();
    p.training.seq_len = 128;
    p.training.tokens = 1e6;
    p.cluster.gpus_per_node = 1;
    p.cluster.nodes = 1;
    p.precision = model::Precision::bf16;
    p.hardware = hw;
    return p;
}

MeasureSummary measure_into(const std::filesystem::path& dir, bool resume, std::optional<std::size_t> stop_after = {}) {
    auto backend = make_cpu_backend(kThreads);
    const RunDir run = open_run_dir(dir, resume, true);
    MeasureOptions o;
    o.plan_name = "tiny";
    o.stop_after = stop_after;
    return measure(*backend, tiny_plan(), run, o);
}

} // namespace

TEST_CASE("CPU backend end to end: measure, fit, load the profile, simulate with it", "[calibrate][pipeline]") {
    test::ScratchDir dir;
    const auto plan = tiny_plan();
    const MeasureSummary sum = measure_into(dir / "run", false);
    CHECK(sum.planned == plan.size());
    CHECK(sum.measured == plan.size());  // everything in the CPU tiny plan runs on a CPU
    CHECK(sum.unsupported == 0);
    CHECK(sum.run_info.filename() == "run.json");

    const SampleFile file = read_samples(dir / "run" / kSamplesFile);
    CHECK(keys_of(file) == keys_of(plan));
    for (const auto& s : file.samples) {
        CHECK(s.ok());
        CHECK(s.time.median > 0);
        CHECK(s.time.iters == s.desc.iters);
    }

    const FitResult r = fit(file, h100(), cpu_fit_options());
    // Fit quality on the backend's own samples is reported (its values depend on the host and its
    // load; the synthetic tests pin the numbers down).
    REQUIRE(r.report.gemm.size() == 1);
    const GemmFit& g = r.report.gemm[0];
    CHECK(g.dtypes == std::vector<std::string>{"fp32"});
    CHECK(g.quality.points == 3);  // the 64, 128, 256 square sweep
    CHECK(g.quality.r2 <= 1.0);
    CHECK(std::isfinite(g.quality.max_rel_err));
    CHECK(g.rate > 0);
    CHECK(g.efficiency > 0);
    CHECK(g.efficiency < 0.01);  // a CPU core against an H100's BF16 peak
    CHECK(r.report.collectives.size() == 5);  // every op at group size 2
    // Thread collectives on a loaded 2-core machine are noisy at the tiny plan's sizes: a fit whose
    // time does not grow with size writes no curve and says so; most of them must fit.
    std::size_t curves = 0;
    for (const auto& c : r.report.collectives) {
        CHECK(c.quality.points == 3);
        if (c.busbw > 0) {
            ++curves;
            continue;
        }
        CHECK(std::any_of(r.report.notes.begin(), r.report.notes.end(), [&](const std::string& n) {
            return n.rfind(c.op + " over ", 0) == 0 && n.find("no curve written") != std::string::npos;
        }));
    }
    CHECK(curves >= 3);
    // The joint memory curve pools the kernels streaming within 80% of the fastest one (fit.cpp;
    // on a CPU, cache-resident sizes make that vary run to run): 3 sizes of each pooled kernel.
    const MemoryFit* all = nullptr;
    std::size_t pooled = 0;
    for (const auto& m : r.report.memory) {
        if (m.kernel == "all")
            all = &m;
        else
            pooled += m.pooled ? 1 : 0;
    }
    REQUIRE(all != nullptr);
    CHECK(pooled >= 1);
    CHECK(all->quality.points == 3 * pooled);
    CHECK(r.report.attention.size() == 2);
    CHECK(r.report.comm_compute_slowdown.has_value());
    const auto j = to_json(r.report);
    CHECK(j.at("gemm").at(0).at("fit").contains("r2"));
    CHECK(j.at("collectives").size() == 5);

    const auto profile_file = dir / "cpu.calibrated.yaml";
    model::write_profile(r.profile, profile_file, false);
    const model::HardwareProfile loaded = model::load_profile(profile_file);
    CHECK(loaded.provenance == model::Provenance::calibrated);
    CHECK(loaded.gemm_table.size() == r.profile.gemm_table.size());
    CHECK(loaded.collectives.size() == curves);

    // The simulator takes the measured GEMM times from the table for the shapes it measured.
    const sim::ComputeCost cost(loaded);
    for (const auto& s : file.samples) {
        if (s.desc.kind != OpKind::gemm || s.desc.label.find("qkv") == std::string::npos) continue;
        const auto t = cost.gemm(model::Precision::bf16, s.desc.m, s.desc.n, s.desc.k);
        // The measured time (launch cost included) stretched by the sustained training clock.
        CHECK(t.seconds() == Approx(s.time.median / loaded.sustained_clock_ratio).epsilon(1e-6));
    }

    const sim::RunEstimate e = sim::estimate_plan(toy_plan(loaded));
    REQUIRE(e.fits);
    REQUIRE(e.step.has_value());
    CHECK(e.step_time_s > 0);
    CHECK(std::isfinite(e.days_to_train));
    // A CPU core is far slower than the datasheet H100: the calibrated profile must show it.
    const sim::RunEstimate datasheet = sim::estimate_plan(toy_plan(h100()));
    CHECK(e.step_time_s > 10 * datasheet.step_time_s);
}

TEST_CASE("a run stopped part way and resumed ends with exactly the uninterrupted run's samples",
          "[calibrate][pipeline][resume]") {
    test::ScratchDir dir;
    const auto plan = tiny_plan();
    const auto first = measure_into(dir.path(), false, std::size_t{7});
    CHECK(first.stopped_early);
    CHECK(first.measured == 7);
    CHECK(test::complete_lines(dir / kSamplesFile) == 7);

    const auto second = measure_into(dir.path(), true);
    CHECK(second.already_done == 7);
    CHECK(second.measured == plan.size() - 7);
    CHECK(second.run_info.filename() == "run-2.json");

    const SampleFile file = read_samples(dir / kSamplesFile);  // would throw on a duplicate key
    CHECK(keys_of(file) == keys_of(plan));
    const auto run2 = nlohmann::json::parse(test::read_text(dir / "run-2.json"));
    CHECK(run2.at("resumed") == true);
    CHECK(run2.at("already_done") == 7);

    // Nothing left: a third session measures nothing and still changes nothing.
    const auto third = measure_into(dir.path(), true);
    CHECK(third.measured == 0);
    CHECK(keys_of(read_samples(dir / kSamplesFile)) == keys_of(plan));
}

TEST_CASE("trainsim-calibrate measure killed with SIGKILL resumes to exactly the full run's samples",
          "[calibrate][pipeline][resume][subprocess]") {
    test::ScratchDir dir;
    const auto plan = tiny_plan();
    const std::string out = (dir / "run").string();
    const std::vector<std::string> args{"measure", "--backend", "cpu", "--plan", "tiny", "--out", out,
                                        "--threads", std::to_string(kThreads), "--quiet"};
    const pid_t pid = test::start_child(TRAINSIM_CALIBRATE_EXE, args, dir / "out1", dir / "err1");
    const auto samples = dir / "run" / kSamplesFile;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (test::complete_lines(samples) < 5 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ::kill(pid, SIGKILL);
    CHECK(test::wait_child(pid) == -SIGKILL);
    const std::size_t at_kill = test::complete_lines(samples);
    REQUIRE(at_kill >= 5);
    REQUIRE(at_kill < plan.size());  // it really was killed mid-run
    // A kill during a write leaves a torn line; make sure there is one for resume to repair.
    {
        std::ofstream torn(samples, std::ios::app);
        torn << R"({"schema":1,"key":"gemm/fp32/m=2)";
    }

    // Without --resume the directory is refused (exit 2: bad input).
    CHECK(test::run_child(TRAINSIM_CALIBRATE_EXE, args, dir.path()).exit_code == 2);

    auto resume_args = args;
    resume_args.emplace_back("--resume");
    const auto r = test::run_child(TRAINSIM_CALIBRATE_EXE, resume_args, dir.path());
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const SampleFile file = read_samples(samples);
    CHECK(keys_of(file) == keys_of(plan));
    CHECK(std::filesystem::exists(dir / "run" / "run-2.json"));
}

TEST_CASE("two measure runs into one folder: the second is refused naming the first, whose samples stay intact",
          "[calibrate][pipeline][lock][subprocess]") {
    test::ScratchDir dir;
    const auto plan = tiny_plan();
    const std::string out = (dir / "run").string();
    const std::vector<std::string> args{"measure", "--backend", "cpu", "--plan", "tiny", "--out", out,
                                        "--threads", std::to_string(kThreads), "--quiet"};
    const pid_t first = test::start_child(TRAINSIM_CALIBRATE_EXE, args, dir / "out1", dir / "err1");
    const auto samples = dir / "run" / kSamplesFile;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (test::complete_lines(samples) < 3 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    // Held still mid-run (it keeps its lock), so the second run surely meets it.
    REQUIRE(::kill(first, SIGSTOP) == 0);
    const std::size_t at_stop = test::complete_lines(samples);
    REQUIRE(at_stop >= 3);
    auto resume_args = args;
    resume_args.emplace_back("--resume"); // past the "already holds samples" check: the lock refuses it
    const auto second = test::run_child(TRAINSIM_CALIBRATE_EXE, resume_args, dir.path());
    CHECK(second.exit_code == 2);
    CHECK_THAT(second.err, Catch::Matchers::Contains("another measure or import is writing to this directory") &&
                               Catch::Matchers::Contains(fmt::format("pid {} on host", static_cast<long>(first))));
    CHECK(test::complete_lines(samples) == at_stop); // the second wrote nothing
    REQUIRE(::kill(first, SIGCONT) == 0);
    CHECK(test::wait_child(first) == 0);
    const SampleFile file = read_samples(samples); // throws on a torn, malformed or duplicate line
    CHECK(keys_of(file) == keys_of(plan));
    // The lock ends with its holder: a resume now runs (and has nothing left to measure).
    CHECK(test::run_child(TRAINSIM_CALIBRATE_EXE, resume_args, dir.path()).exit_code == 0);
}

namespace {

// A backend whose GEMMs of n = 128 fail while they run (as a cuBLASLt execution error would), and
// with `collectives`, its collectives too (as an NCCL error would); `sticky`: the device is
// unusable afterwards (as after an illegal address).
class FailingBackend : public Backend {
public:
    explicit FailingBackend(bool sticky, bool collectives = false) : sticky_(sticky), collectives_(collectives) {}
    [[nodiscard]] std::string name() const override { return "cpu"; }
    [[nodiscard]] int ranks() const override { return 1; }
    [[nodiscard]] nlohmann::json provenance() const override { return nlohmann::json::object(); }
    [[nodiscard]] std::optional<std::string> unsupported(const Descriptor&) const override { return std::nullopt; }
    [[nodiscard]] bool participates(const Descriptor&) const override { return true; }
    [[nodiscard]] bool writes_samples() const override { return true; }
    [[nodiscard]] std::unique_ptr<PreparedOp> prepare(const Descriptor& d) override {
        struct Op : PreparedOp {
            bool fail = false;
            void run() override {
                if (fail) throw std::runtime_error("cublasLtMatmul: CUBLAS_STATUS_EXECUTION_FAILED");
            }
            [[nodiscard]] std::string implementation() const override { return "test"; }
        };
        auto op = std::make_unique<Op>();
        op->fail = d.kind == OpKind::collective ? collectives_ : d.n == 128;
        return op;
    }
    void start_timer() override {}
    [[nodiscard]] double stop_timer() override { return 1e-3; }
    void flush_caches() override {}
    void reduce_times(const Descriptor&, std::vector<double>&) override {}
    [[nodiscard]] SampleTelemetry telemetry() const override { return {}; }
    [[nodiscard]] double rough_seconds(const Descriptor&) const override { return 1e-3; }
    [[nodiscard]] bool healthy() override { return !sticky_; }

private:
    bool sticky_;
    bool collectives_;
};

MeasureOptions named_options(const std::string& plan) {
    MeasureOptions o;
    o.plan_name = plan;
    return o;
}

std::vector<Descriptor> three_gemms() {
    std::vector<Descriptor> plan;
    for (std::int64_t n : {64, 128, 256}) {
        auto d = test::gemm_desc(n, n, n, "fp32");
        d.key = make_key(d);
        plan.push_back(d);
    }
    return plan;
}

} // namespace

TEST_CASE("an op that fails while it runs is recorded and the run goes on, or stops if the device is unusable",
          "[calibrate][pipeline][resume]") {
    const auto plan = three_gemms();
    {
        test::ScratchDir dir;
        FailingBackend backend(/*sticky=*/false);
        const auto sum = measure(backend, plan, open_run_dir(dir / "run", false, true), named_options("test"));
        CHECK(sum.measured == 2);
        CHECK(sum.unsupported == 1);
        const SampleFile file = read_samples(dir / "run" / kSamplesFile);
        REQUIRE(file.samples.size() == 3);
        CHECK(file.samples[1].status == "unsupported");
        CHECK_THAT(file.samples[1].reason, Catch::Matchers::Contains("failed while running") &&
                                               Catch::Matchers::Contains("CUBLAS_STATUS_EXECUTION_FAILED"));
    }
    {
        test::ScratchDir dir;
        FailingBackend broken(/*sticky=*/true);
        CHECK_THROWS_WITH(measure(broken, plan, open_run_dir(dir / "run", false, true), named_options("test")),
                          Catch::Matchers::Contains("CUBLAS_STATUS_EXECUTION_FAILED"));
        // The failure was written before the run stopped: a resume (on a repaired device) skips it
        // instead of failing on it forever.
        CHECK(test::complete_lines(dir / "run" / kSamplesFile) == 2);
        FailingBackend repaired(/*sticky=*/false);
        const auto sum = measure(repaired, plan, open_run_dir(dir / "run", true, true), named_options("test"));
        CHECK(sum.already_done == 2);
        CHECK(sum.measured == 1);
        CHECK(keys_of(read_samples(dir / "run" / kSamplesFile)) == keys_of(plan));
    }
    {
        // A collective that fails while it runs on a group: the other ranks are inside it, so the
        // run stops, but only after the failure is recorded; a resume skips it.
        test::ScratchDir dir;
        auto with_group = plan;
        auto ar = test::collective_desc("all_reduce", 2, 1 << 20);
        ar.key = make_key(ar);
        with_group.insert(with_group.begin() + 1, ar);
        FailingBackend nccl_error(/*sticky=*/false, /*collectives=*/true);
        CHECK_THROWS_WITH(measure(nccl_error, with_group, open_run_dir(dir / "run", false, true), named_options("test")),
                          Catch::Matchers::Contains("CUBLAS_STATUS_EXECUTION_FAILED"));
        const SampleFile file = read_samples(dir / "run" / kSamplesFile);
        REQUIRE(file.samples.size() == 2);
        CHECK(file.samples[1].desc.key == ar.key);
        CHECK(file.samples[1].status == "unsupported");
        CHECK_THAT(file.samples[1].reason, Catch::Matchers::Contains("failed while running"));
        FailingBackend healthy(/*sticky=*/false);
        const auto sum = measure(healthy, with_group, open_run_dir(dir / "run", true, true), named_options("test"));
        CHECK(sum.already_done == 2);
        CHECK(keys_of(read_samples(dir / "run" / kSamplesFile)) == keys_of(with_group));
    }
}
