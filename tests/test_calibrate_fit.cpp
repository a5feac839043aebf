// The fit on synthetic samples with a known answer: alpha-beta lines, the large-GEMM rate, the
// memory curve, collective curves and hop latency, the overlap slowdown, FP8 marked unsupported;
// each recovered within 1% (exactly, without noise). And the fitted profile written and read
// back through the model's loader.
#include "test_calibrate_support.hpp"

#include "trainsim/calibrate/core/calibrate_error.hpp"
#include "trainsim/calibrate/fit/fit.hpp"
#include "trainsim/model/input/loader.hpp"
#include "trainsim/model/input/profile_io.hpp"
#include "trainsim/sim/cost/compute_cost.hpp"
#include "trainsim/sim/run/estimate.hpp"
#include "trainsim/sim/trust/trust.hpp"

#include <nlohmann/json.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

using namespace trainsim;
using namespace trainsim::calibrate;
using Catch::Matchers::Contains;

namespace {

using test::h100;

// A deterministic +-0.5% perturbation (no RNG: the test is the same on every run).
double noise(std::size_t i) { return 1.0 + 0.005 * static_cast<double>(static_cast<int>(i % 3) - 1); }

SampleFile file_of(std::vector<Sample> samples) {
    SampleFile f;
    f.path = "synthetic.jsonl";
    for (std::size_t i = 0; i < samples.size(); ++i) f.lines.push_back(static_cast<int>(i + 1));
    f.samples = std::move(samples);
    return f;
}

constexpr double kGemmRate = 700e12;  // FLOP/s (0.7075 of H100's 989.4 TFLOP/s BF16 peak)
constexpr double kGemmT0 = 5e-6;      // s
constexpr double kMemBw = 2.4e12;     // B/s
constexpr double kMemT0 = 3e-6;       // s
constexpr double kBusBw = 370e9;      // B/s (nccl-tests 8xH100 ring all-reduce busbw)
constexpr double kA0 = 10e-6, kHop = 2e-6;  // alpha(g) = a0 + hop * 2(g - 1)

std::vector<Sample> synthetic_node() {
    std::vector<Sample> s;
    for (std::int64_t n : {1024, 2048, 4096, 8192, 16384}) {
        auto d = test::gemm_desc(n, n, n, "bf16");
        s.push_back(test::synthetic(d, kGemmT0 + d.flops() / kGemmRate));
    }
    for (auto [m, n, k] : {std::tuple{4096, 12288, 4096}, std::tuple{4096, 4096, 4096 * 4}}) {
        auto d = test::gemm_desc(m, n, k, "bf16");
        s.push_back(test::synthetic(d, kGemmT0 + d.flops() / kGemmRate));
    }
    for (const char* op : {"copy", "triad"})
        for (std::int64_t e = 1 << 20; e <= (1 << 28); e *= 8) {
            auto d = test::memory_desc(op, e, "bf16");
            s.push_back(test::synthetic(d, kMemT0 + d.bytes_moved() / kMemBw));
        }
    for (int g : {2, 4, 8})
        for (double bytes = 1024; bytes <= 1024.0 * 1024 * 1024; bytes *= 16) {
            auto d = test::collective_desc("all_reduce", g, bytes);
            s.push_back(test::synthetic(d, kA0 + kHop * 2 * (g - 1) + d.bytes * d.bus_factor() / kBusBw));
        }
    for (const char* op : {"gemm_alone", "gemm_under_all_reduce"}) {
        Descriptor d = test::gemm_desc(8192, 8192, 8192, "bf16");
        d.kind = OpKind::overlap;
        d.op = op;
        d.group_size = 8;
        d.comm_bytes = d.op == "gemm_alone" ? 0.0 : 1073741824.0;
        // 8192^3 in 2 ms = 550 TFLOP/s, below the H100's BF16 peak.
        s.push_back(test::synthetic(d, d.op == "gemm_alone" ? 2.0e-3 : 2.3e-3));
    }
    return s;
}

} // namespace

TEST_CASE("fit_line recovers alpha and beta of an exact alpha-beta curve", "[calibrate][fit]") {
    std::vector<double> x, t;
    for (double b = 1024; b <= 1024.0 * 1024 * 1024; b *= 4) {
        x.push_back(b);
        t.push_back(12e-6 + b / 370e9);
    }
    const LineFit f = fit_line(x, t);
    CHECK(f.alpha == Approx(12e-6).epsilon(1e-9));
    CHECK(1.0 / f.slope == Approx(370e9).epsilon(1e-9));
    CHECK(f.r2 == Approx(1.0).epsilon(1e-12));
    CHECK(f.max_rel_err < 1e-9);
    CHECK(f.points == x.size());
}

TEST_CASE("fit_line recovers alpha and beta within 1% under +-0.5% noise", "[calibrate][fit]") {
    std::vector<double> x, t;
    std::size_t i = 0;
    for (double b = 1024; b <= 1024.0 * 1024 * 1024; b *= 2, ++i) {
        x.push_back(b);
        t.push_back((12e-6 + b / 370e9) * noise(i));
    }
    const LineFit f = fit_line(x, t);
    CHECK(f.alpha == Approx(12e-6).epsilon(0.01));
    CHECK(1.0 / f.slope == Approx(370e9).epsilon(0.01));
    CHECK(f.max_rel_err < 0.011);
    CHECK(f.r2 > 0.999);
}

TEST_CASE("fit_line never returns a negative fixed cost", "[calibrate][fit]") {
    // Points on t = 2e-9 x - 1e-6: the unconstrained intercept is negative; the fit goes
    // through the origin instead (a kernel cannot take negative time at zero size).
    const std::vector<double> x{1e3, 1e4, 1e5};
    std::vector<double> t;
    for (double v : x) t.push_back(2e-9 * v - 1e-6);
    const LineFit f = fit_line(x, t);
    CHECK(f.alpha == 0.0);
    CHECK(f.slope > 0);
}

TEST_CASE("fit recovers the GEMM rate, memory and collective curves, hop latency and slowdown", "[calibrate][fit]") {
    const auto base = h100();
    const FitResult r = fit(file_of(synthetic_node()), base, default_fit_options());
    const auto& rep = r.report;
    const auto& p = r.profile;

    REQUIRE(rep.gemm.size() == 1);
    const GemmFit& g = rep.gemm[0];
    CHECK(g.precision == "bf16");
    CHECK(g.rate == Approx(kGemmRate).epsilon(0.01));
    CHECK(g.t0 == Approx(kGemmT0).epsilon(0.01));
    CHECK(g.table_rows == 7);
    // gemm_efficiency is quoted at 8192^3, as the simulator's fallback expects.
    const double f8192 = 2.0 * 8192.0 * 8192.0 * 8192.0;
    const double rate8192 = f8192 / (kGemmT0 + f8192 / kGemmRate);
    CHECK(g.rate_8192 == Approx(rate8192).epsilon(1e-9));
    CHECK(p.gemm_efficiency.at(model::Precision::bf16) == Approx(rate8192 / 989.4e12).epsilon(1e-9));
    CHECK(p.gemm_table.size() == 7);
    CHECK(p.sources.at("compute.gemm_efficiency.bf16").starts_with("measured:"));

    REQUIRE(p.memory_curve.contains(model::Precision::bf16));
    CHECK(p.memory_curve.at(model::Precision::bf16).beta_bw.value() == Approx(kMemBw).epsilon(0.01));
    CHECK(p.memory_curve.at(model::Precision::bf16).alpha.seconds() == Approx(kMemT0).epsilon(0.01));
    CHECK(p.hbm_efficiency == Approx(kMemBw / 3.35e12).epsilon(0.01));
    CHECK(p.kernel_overhead.seconds() == Approx(kMemT0).epsilon(0.01));

    REQUIRE(p.collectives.size() == 3);
    for (const auto& c : p.collectives) {
        CHECK(c.op == "all_reduce");
        CHECK(c.scope == "intra_node");
        CHECK(c.curve.beta_bw.value() == Approx(kBusBw).epsilon(0.01));
        CHECK(c.curve.alpha.seconds() == Approx(kA0 + kHop * 2 * (c.group_size - 1)).epsilon(0.01));
    }
    // The measured curve itself: one point per (group, size), exactly the sample's time.
    // Sizes 1 KiB .. 1 GiB in steps of x16: 6 per group.
    REQUIRE(p.collective_times.size() == 3 * 6);
    for (const auto& t : p.collective_times) {
        const auto d = test::collective_desc("all_reduce", t.group_size, t.bytes.value());
        CHECK(t.time.seconds() ==
              Approx(kA0 + kHop * 2 * (t.group_size - 1) + d.bytes * d.bus_factor() / kBusBw).epsilon(1e-6));
    }
    REQUIRE(rep.hop_latency_s);
    CHECK(*rep.hop_latency_s == Approx(kHop).epsilon(0.01));
    CHECK(p.intra_node_latency.seconds() == Approx(kHop).epsilon(0.01));

    REQUIRE(rep.comm_compute_slowdown);
    CHECK(*rep.comm_compute_slowdown == Approx(0.15).epsilon(1e-6));
    CHECK(p.comm_compute_slowdown == Approx(0.15).epsilon(1e-6));

    CHECK(p.provenance == model::Provenance::calibrated);
    CHECK(p.id == "h100-sxm.calibrated");
    CHECK_THAT(p.sources.at("calibrated"), Contains("synthetic.jsonl"));
    // What was not measured keeps its datasheet value and source.
    CHECK(p.gemm_efficiency.at(model::Precision::fp8) == base.gemm_efficiency.at(model::Precision::fp8));
    CHECK(p.sources.at("compute.gemm_efficiency.fp8") == base.sources.at("compute.gemm_efficiency.fp8"));
}

TEST_CASE("the sustained clock ratio and the slowdown come from the GEMM after sustained load", "[calibrate][fit]") {
    // 8192^3 on 8 ranks: 2.0 ms in the short benchmark, 2.5 ms after sustained load (the clock
    // the GPUs hold: ratio 0.8), and 3.0 ms under an all-reduce after that load (slowdown 0.2,
    // relative to the sustained clock; the short pair alone would say 0.15).
    auto samples = synthetic_node();
    const int calls = 20000;
    for (const char* op : {"gemm_sustained_alone", "gemm_sustained_under_all_reduce"}) {
        Descriptor d = test::gemm_desc(8192, 8192, 8192, "bf16");
        d.kind = OpKind::overlap;
        d.op = op;
        d.group_size = 8;
        d.comm_bytes = d.under_all_reduce() ? 1073741824.0 : 0.0;
        d.warmup = calls;
        samples.push_back(test::synthetic(d, d.under_all_reduce() ? 3.0e-3 : 2.5e-3));
    }
    const FitResult r = fit(file_of(samples), h100(), default_fit_options());
    REQUIRE(r.report.sustained_clock_ratio);
    CHECK(*r.report.sustained_clock_ratio == Approx(0.8).epsilon(1e-9));
    CHECK(r.profile.sustained_clock_ratio == Approx(0.8).epsilon(1e-9));
    CHECK_THAT(r.profile.sources.at("compute.sustained_clock_ratio"), Contains("after 20000 calls of sustained load"));
    REQUIRE(r.report.comm_compute_slowdown);
    CHECK(*r.report.comm_compute_slowdown == Approx(0.2).epsilon(1e-9));
    CHECK_THAT(r.profile.sources.at("overlap.comm_compute_slowdown"), Contains("after sustained load"));
    CHECK(to_json(r.report)["sustained_clock_ratio"].get<double>() == Approx(0.8));
    CHECK_THAT(format_report(r.report), Contains("GEMM rate after sustained load / short benchmark: 0.800"));
    // Without the sustained samples the profile keeps its datasheet clock ratio.
    const FitResult plain = fit(file_of(synthetic_node()), h100(), default_fit_options());
    CHECK_FALSE(plain.report.sustained_clock_ratio);
    CHECK(plain.profile.sustained_clock_ratio == h100().sustained_clock_ratio);
}

TEST_CASE("the fitted profile is written and read back by the model's loader", "[calibrate][fit]") {
    test::ScratchDir dir;
    const FitResult r = fit(file_of(synthetic_node()), h100(), default_fit_options());
    const auto file = dir / "h100.calibrated.yaml";
    model::write_profile(r.profile, file, false);
    const auto back = model::load_profile(file);
    CHECK(back.provenance == model::Provenance::calibrated);
    REQUIRE(back.gemm_table.size() == r.profile.gemm_table.size());
    for (std::size_t i = 0; i < back.gemm_table.size(); ++i) {
        CHECK(back.gemm_table[i].m == r.profile.gemm_table[i].m);
        CHECK(back.gemm_table[i].time == r.profile.gemm_table[i].time);
    }
    REQUIRE(back.collectives.size() == 3);
    CHECK(back.collectives[0].curve.beta_bw.value() == r.profile.collectives[0].curve.beta_bw.value());
    CHECK(back.memory_curve.at(model::Precision::bf16).beta_bw.value() ==
          r.profile.memory_curve.at(model::Precision::bf16).beta_bw.value());
    CHECK(back.hbm_efficiency == r.profile.hbm_efficiency);
    // The fits' own errors travel with the profile (the error bands narrow with them): the
    // largest relative error over the compute fits and over the collective fits.
    double compute_worst = 0, comm_worst = 0;
    for (const auto& g : r.report.gemm) compute_worst = std::max(compute_worst, g.quality.max_rel_err);
    for (const auto& m : r.report.memory)
        if (m.kernel == "all") compute_worst = std::max(compute_worst, m.quality.max_rel_err);
    for (const auto& a : r.report.attention)
        if (a.written) compute_worst = std::max(compute_worst, a.max_rel_err);
    for (const auto& c : r.report.collectives) comm_worst = std::max(comm_worst, c.quality.max_rel_err);
    REQUIRE(back.sources.contains("calibration.compute_residual"));
    REQUIRE(back.sources.contains("calibration.comm_residual"));
    CHECK(back.compute_fit_residual == Approx(compute_worst).margin(1e-12));
    CHECK(back.comm_fit_residual == Approx(comm_worst).margin(1e-12));
    // Never overwritten without force.
    CHECK_THROWS_AS(model::write_profile(r.profile, file, false), model::ProfileError);
}

TEST_CASE("FP8 GEMMs that never ran are recorded as unsupported in the profile", "[calibrate][fit]") {
    auto samples = synthetic_node();
    Sample u;
    u.desc = test::gemm_desc(8192, 8192, 8192, "fp8_e4m3");
    u.desc.key = make_key(u.desc);
    u.status = "unsupported";
    u.reason = "FP8 needs compute capability >= 8.9; NVIDIA A100-SXM4-80GB is 8.0";
    u.backend = "cuda";
    samples.push_back(u);
    const FitResult r = fit(file_of(samples), h100(), default_fit_options());
    CHECK_FALSE(r.profile.dense_peak.contains(model::Precision::fp8));
    CHECK_FALSE(r.profile.gemm_efficiency.contains(model::Precision::fp8));
    REQUIRE(r.profile.unsupported_reason.contains(model::Precision::fp8));
    CHECK_THAT(r.profile.unsupported_reason.at(model::Precision::fp8), Contains("compute capability"));
    // Still a valid profile.
    test::ScratchDir dir;
    model::write_profile(r.profile, dir / "p.yaml", false);
    CHECK_FALSE(model::load_profile(dir / "p.yaml").dense_peak.contains(model::Precision::fp8));
}

TEST_CASE("FP8 split-accumulator speed is measured and backward GEMM times come back exactly", "[calibrate][fit]") {
    // Forward squares at 1400 TFLOP/s with fast accumulation, the same squares 1/0.87 slower with
    // the split accumulator; a dgrad layer shape measured (split) at 1000 TFLOP/s.
    constexpr double kFast = 1400e12, kSpeed = 0.87;
    std::vector<Sample> s;
    for (std::int64_t n : {1024, 2048, 4096, 8192}) {
        auto fast = test::gemm_desc(n, n, n, "fp8_e4m3");
        fast.fast_accum = true;
        s.push_back(test::synthetic(fast, fast.flops() / kFast));
        auto split = test::gemm_desc(n, n, n, "fp8_e5m2xfp8_e4m3");
        s.push_back(test::synthetic(split, split.flops() / kFast / kSpeed));
    }
    const auto dgrad = test::gemm_desc(4096, 4096, 12288, "fp8_e5m2xfp8_e4m3");
    const double t_dgrad = dgrad.flops() / 1000e12;
    s.push_back(test::synthetic(dgrad, t_dgrad));
    const FitResult r = fit(file_of(s), h100(), default_fit_options());
    REQUIRE(r.report.fp8_split_accumulate_speed);
    CHECK(*r.report.fp8_split_accumulate_speed == Approx(kSpeed).epsilon(1e-9));
    CHECK(r.profile.fp8_split_accumulate_speed == Approx(kSpeed).epsilon(1e-9));
    CHECK(r.profile.sources.at("compute.fp8_split_accumulate_speed").starts_with("measured:"));
    // Squares enter the table once (fast); the dgrad shape as its fast-accumulation equivalent.
    CHECK(r.profile.gemm_table.size() == 5);
    REQUIRE(r.report.gemm.size() == 1);
    CHECK(r.report.gemm[0].rate == Approx(kFast).epsilon(0.01));  // the sweep fit uses fast squares only

    model::OpProto op;
    op.kind = model::OpKind::gemm;
    op.precision = model::Precision::fp8;
    op.m = dgrad.m;
    op.n = dgrad.n;
    op.k = dgrad.k;
    op.split_accumulate = true;
    const sim::ComputeCost cost(r.profile);
    // The measured time (launch cost included) stretched by the sustained training clock.
    CHECK(cost.cost(op).seconds() == Approx(t_dgrad / r.profile.sustained_clock_ratio).epsilon(1e-6));
}

TEST_CASE("unmapped element types are reported and not used, --map enters them", "[calibrate][fit]") {
    std::vector<Sample> s;
    for (std::int64_t n : {128, 256, 512}) {
        auto d = test::gemm_desc(n, n, n, "fp32");
        s.push_back(test::synthetic(d, d.flops() / 20e9));
    }
    const FitResult plain = fit(file_of(s), h100(), default_fit_options());
    CHECK(plain.profile.gemm_table.empty());
    CHECK(plain.report.gemm.empty());
    REQUIRE_FALSE(plain.report.notes.empty());
    CHECK_THAT(plain.report.notes.front(), Contains("fp32"));

    FitOptions opts = default_fit_options();
    opts.precision_map["fp32"] = model::Precision::bf16;
    const FitResult mapped = fit(file_of(s), h100(), opts);
    REQUIRE(mapped.report.gemm.size() == 1);
    CHECK(mapped.report.gemm[0].rate == Approx(20e9).epsilon(0.01));
    CHECK(mapped.profile.gemm_table.size() == 3);
}

TEST_CASE("summarize gives median, quantiles and spread of per-call times", "[calibrate][fit]") {
    const TimeStats t = summarize({5, 1, 4, 2, 3}, 1);
    CHECK(t.median == 3);
    CHECK(t.min == 1);
    CHECK(t.max == 5);
    CHECK(t.mean == Approx(3));
    CHECK(t.p10 == Approx(1.4));  // linear interpolation between order statistics
    CHECK(t.p90 == Approx(4.6));
    CHECK(t.spread() == Approx((4.6 - 1.4) / 3));
    CHECK(t.stddev == Approx(std::sqrt(2.5)));
}

TEST_CASE("a memory kernel far slower than the others stays out of the joint curve and hbm_efficiency",
          "[calibrate][fit]") {
    // copy and triad stream at kMemBw; rmsnorm runs at 0.3 x kMemBw (as a kernel with scalar
    // loads would). Pooled blindly, the joint line would come out well below kMemBw.
    std::vector<Sample> s = synthetic_node();
    for (std::int64_t e = 1 << 20; e <= (1 << 28); e *= 8) {
        auto d = test::memory_desc("rmsnorm", e, "bf16");
        d.row = 8192;
        s.push_back(test::synthetic(d, kMemT0 + d.bytes_moved() / (0.3 * kMemBw)));
    }
    const FitResult r = fit(file_of(s), h100(), default_fit_options());
    // The joint curve and hbm_efficiency are copy's and triad's: exactly kMemBw (no noise).
    CHECK(r.profile.memory_curve.at(model::Precision::bf16).beta_bw.value() == Approx(kMemBw).epsilon(1e-6));
    CHECK(r.profile.hbm_efficiency == Approx(kMemBw / 3.35e12).epsilon(1e-6));
    std::map<std::string, const MemoryFit*> by_kernel;
    for (const auto& m : r.report.memory) by_kernel[m.kernel] = &m;
    REQUIRE(by_kernel.contains("rmsnorm"));
    CHECK_FALSE(by_kernel.at("rmsnorm")->pooled);
    CHECK(by_kernel.at("rmsnorm")->bandwidth == Approx(0.3 * kMemBw).epsilon(1e-6));
    CHECK(by_kernel.at("copy")->pooled);
    CHECK(by_kernel.at("triad")->pooled);
    CHECK(to_json(r.report)["memory"].size() == 4); // copy, rmsnorm, triad, and the joint "all"
    bool noted = false;
    for (const auto& n : r.report.notes) noted = noted || n.find("rmsnorm") != std::string::npos;
    CHECK(noted);
    CHECK_THAT(r.profile.sources.at("memory.hbm_efficiency"), Contains("(copy, triad)"));
}

TEST_CASE("board power from the samples' NVML telemetry becomes power.compute_busy and power.idle",
          "[calibrate][fit][energy]") {
    // GEMMs read 640, 655 and 690 W after their timed loops (a short loop's reading is diluted by
    // the idle moments around it: the highest is the closest to the sustained draw); the device
    // drew 72 W idle before the run (run.json).
    auto samples = synthetic_node();
    const double readings[] = {640, 690, 655};
    std::size_t i = 0;
    for (auto& s : samples)
        if (s.desc.kind == OpKind::gemm) s.telemetry.power_w = readings[i++ % 3];
    REQUIRE(i >= 3);
    auto opts = default_fit_options();
    opts.idle_power_w = 72;
    const FitResult r = fit(file_of(samples), h100(), opts);
    REQUIRE(r.report.compute_busy_power_w);
    CHECK(*r.report.compute_busy_power_w == 690);
    CHECK(r.profile.power_compute_busy.value() == 690);
    CHECK(r.profile.power_idle.value() == 72);
    CHECK_THAT(r.profile.sources.at("power.compute_busy"), Contains("measured: NVML board power"));
    CHECK_THAT(r.profile.sources.at("power.idle"), Contains("measured: NVML board power of the idle device"));
    // What was not measured stays the base profile's.
    CHECK(r.profile.power_comm_busy == h100().power_comm_busy);
    CHECK(r.profile.power_node_overhead == h100().power_node_overhead);
    CHECK(to_json(r.report)["compute_busy_power_w"].get<double>() == 690);
    CHECK(to_json(r.report)["idle_power_w"].get<double>() == 72);
    // Written and read back by the model's loader.
    test::ScratchDir dir;
    model::write_profile(r.profile, dir / "p.yaml", false);
    CHECK(model::load_profile(dir / "p.yaml").power_compute_busy.value() == 690);

    // Without NVML (no readings), the profile keeps its datasheet power and the report says so.
    const FitResult plain = fit(file_of(synthetic_node()), h100(), default_fit_options());
    CHECK_FALSE(plain.report.compute_busy_power_w);
    CHECK(plain.profile.power_compute_busy == h100().power_compute_busy);
    CHECK(to_json(plain.report)["compute_busy_power_w"].is_null());
    bool noted = false;
    for (const auto& n : plain.report.notes) noted = noted || n.find("no board power") != std::string::npos;
    CHECK(noted);

    // A base profile without a power section gets none: the section is all or nothing.
    auto bare = h100();
    bare.power_compute_busy = bare.power_comm_busy = bare.power_idle = bare.power_node_overhead = model::Power();
    for (const char* k : {"power.compute_busy", "power.comm_busy", "power.idle", "power.node_overhead"})
        bare.sources.erase(k);
    const FitResult none = fit(file_of(samples), bare, opts);
    CHECK_FALSE(none.profile.has_power());
    CHECK_FALSE(none.profile.sources.contains("power.compute_busy"));

    // A busy reading below the base profile's comm-busy and idle figures (a throttled or
    // mis-read board, 60 W) without an idle reading: comm-busy and idle are capped at it, said
    // as derived, and the profile still loads (idle <= comm-busy <= compute-busy).
    auto low = synthetic_node();
    for (auto& s : low)
        if (s.desc.kind == OpKind::gemm) s.telemetry.power_w = 60;
    const FitResult capped = fit(file_of(low), h100(), default_fit_options());
    CHECK(capped.profile.power_compute_busy.value() == 60);
    CHECK(capped.profile.power_comm_busy.value() == 60);
    CHECK(capped.profile.power_idle.value() == 60);
    CHECK_THAT(capped.profile.sources.at("power.comm_busy"), Contains("derived: capped"));
    CHECK_THAT(capped.profile.sources.at("power.idle"), Contains("derived: capped"));
    model::write_profile(capped.profile, dir / "capped.yaml", false);
    CHECK(model::load_profile(dir / "capped.yaml").power_idle.value() == 60);
}

TEST_CASE("a profile fitted with --base h100-sxm gets a band no wider than h100-sxm's on the same plan",
          "[calibrate][fit][trust]") {
    // Issue #45: the fitted profile's own id ("lab-node-7", as `fit --id` names it) has no published
    // run, so it used to be flagged outside the evidence and its band widened x1.5 — calibrating
    // made the prediction look less trustworthy than the datasheet profile it started from. The
    // profile records its base, and the trust lookup judges it as that GPU (docs/trust.md).
    test::ScratchDir dir;
    auto opts = default_fit_options();
    opts.id = "lab-node-7";
    const FitResult r = fit(file_of(synthetic_node()), h100(), opts);
    CHECK(r.profile.base == "h100-sxm");
    const auto file = dir / "lab-node-7.yaml";
    model::write_profile(r.profile, file, false);
    const auto back = model::load_profile(file);
    CHECK(back.id == "lab-node-7");
    CHECK(back.base == "h100-sxm");
    // The datasheet figures the tables were measured on travel with them (calibrated.measured_on).
    CHECK(back.measured_on == model::datasheet_fingerprint(h100()));
    CHECK(back.measured_on.at("interconnect.nvlink_bandwidth") == "450 GB/s");
    CHECK(back.warnings.empty());
    // A refit of the fit keeps the first base.
    CHECK(fit(file_of(synthetic_node()), back, opts).profile.base == "h100-sxm");

    model::LoadOptions lo;
    lo.data_dir = TRAINSIM_TEST_DATA_DIR;
    const auto plan = model::load_scenario_text(
                          "model: llama2-7b\ntraining: {tokens: 100B, seq_len: 4096, global_batch: 256, "
                          "micro_batch: 1}\nparallel: {tp: 2, pp: 1, dp: auto}\nprecision: bf16\n"
                          "cluster: {gpu: h100-sxm, nodes: 1, gpus_per_node: 8}\n",
                          "band test", lo)
                          .plans.front();
    std::ifstream in(std::filesystem::path(TRAINSIM_TEST_DATA_DIR) / "trust" / "error-model.json");
    REQUIRE(in);
    const auto em = sim::error_model_from_json(nlohmann::json::parse(in), "error-model.json");
    auto band_of = [&](const model::HardwareProfile& hw) {
        auto p = plan;
        p.hardware = hw;
        const auto e = sim::estimate_plan(p);
        REQUIRE(e.step);
        return sim::band_for(em, p, &*e.step);
    };
    const auto stock = band_of(h100());
    const auto fitted = band_of(back);
    CAPTURE(stock.basis, fitted.basis);
    CHECK(fitted.out_of_domain == stock.out_of_domain);
    CHECK(fitted.regime == stock.regime);
    CHECK(fitted.time_p90 - fitted.time_p10 <= stock.time_p90 - stock.time_p10);
    CHECK(fitted.time_p90 <= stock.time_p90);
    CHECK(fitted.time_p10 >= stock.time_p10);
    CHECK(fitted.basis.find("narrowed by the calibrated profile") != std::string::npos);
    // Without the recorded base the same profile is an unknown GPU: flagged and wider (the
    // behaviour a hand-copied profile keeps).
    auto orphan = back;
    orphan.base.clear();
    const auto unknown = band_of(orphan);
    CHECK_FALSE(unknown.out_of_domain.empty());
    CHECK(unknown.time_p90 - unknown.time_p10 > stock.time_p90 - stock.time_p10);
}
