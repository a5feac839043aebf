// The CUDA backend (its own test program, trainsim_gpu_tests, built only with CUDA so that the
// main test program does not load the CUDA libraries). Without a GPU it checks the "no CUDA
// device" error; with one (scripts/gpu-check) it runs the CUDA tiny plan and checks what it
// measured against the device's physics.
#include "test_calibrate_support.hpp"

#include "trainsim/calibrate/calibrate_error.hpp"
#include "trainsim/calibrate/cuda_backend.hpp"
#include "trainsim/calibrate/measure.hpp"
#include "trainsim/calibrate/plan.hpp"

#include <catch2/catch.hpp>

#include <map>

using namespace trainsim;
using namespace trainsim::calibrate;

TEST_CASE("without a GPU the CUDA backend says there is no CUDA device", "[calibrate][gpu]") {
    if (cuda_device_count() > 0) {
        SUCCEED("a GPU is present");
        return;
    }
    try {
        (void)make_cuda_backend(CudaOptions{});
        FAIL("expected NoDeviceError");
    } catch (const NoDeviceError& e) {
        CHECK_THAT(e.what(), Catch::Matchers::StartsWith("no CUDA device"));
    }
}

TEST_CASE("the CUDA tiny plan runs and its samples obey the device's limits", "[calibrate][gpu][device]") {
    if (cuda_device_count() == 0) {
        SUCCEED("no GPU: nothing to measure");
        return;
    }
    test::ScratchDir dir;
    auto backend = make_cuda_backend(CudaOptions{});
    const auto plan = make_plan(PlanKind::tiny, PlanContext{"cuda", 1, {}});
    MeasureOptions o;
    o.plan_name = "tiny";
    const auto sum = measure(*backend, plan, open_run_dir(dir.path(), false, true), o);
    CHECK(sum.measured + sum.unsupported == plan.size());
    const SampleFile f = read_samples(dir / kSamplesFile);
    std::map<std::string, double> tflops_8192;
    for (const auto& s : f.samples) {
        INFO(s.desc.key << " " << s.reason);
        if (!s.ok()) {
            CHECK_FALSE(s.reason.empty());
            continue;
        }
        CHECK(s.time.median > 0);
        CHECK(s.time.spread() < 1.0);
        // No H100/H200 exceeds 2 PFLOP/s dense FP8 or 5 TB/s of HBM.
        CHECK(s.flop_rate() < 2.0e15);
        if (s.desc.kind == OpKind::memory) CHECK(s.bandwidth() < 5.0e12);
        if (s.desc.kind == OpKind::gemm && s.desc.m == 8192 && s.desc.n == 8192 && s.desc.algo == AlgoChoice::first)
            tflops_8192[s.desc.dtype] = s.flop_rate() / 1e12;
    }
    REQUIRE(tflops_8192.contains("bf16"));
    CHECK(tflops_8192["bf16"] > 100);  // any A100/H100-class GPU
    if (tflops_8192.contains("fp8_e4m3")) CHECK(tflops_8192["fp8_e4m3"] > tflops_8192["bf16"]);
}
