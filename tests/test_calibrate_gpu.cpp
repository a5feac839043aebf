// The CUDA backend (its own test program, trainsim_gpu_tests, built only with CUDA so that the
// main test program does not load the CUDA libraries). Without a GPU it checks the "no CUDA
// device" error; with one (scripts/gpu-check) it runs the CUDA tiny plan and checks what it
// measured against the device's physics.
#include "test_calibrate_support.hpp"

#include "trainsim/calibrate/backends/cuda_backend.hpp"
#include "trainsim/calibrate/core/calibrate_error.hpp"
#include "trainsim/calibrate/measure/measure.hpp"
#include "trainsim/calibrate/measure/plan.hpp"
#include "trainsim/kernels/gpu_device.hpp"
#include "trainsim/kernels/memory_op.hpp"

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

TEST_CASE("the memory-bound kernels compute what they claim, vector paths and scalar tails alike",
          "[calibrate][gpu][device]") {
    if (cuda_device_count() == 0) {
        SUCCEED("no GPU: nothing to run");
        return;
    }
    namespace k = trainsim::kernels;
    k::GpuDevice dev(0);
    // Element counts that are not whole 16-byte vectors (8 bf16, 4 fp32) exercise the scalar
    // tails; rows of 8192 keep RMSNorm's row in registers, 24576 re-read the rest, 1000 (not a
    // multiple of 8) take the element-by-element path.
    struct Case {
        k::MemoryKernel kernel;
        std::int64_t elements, row;
        double tolerance; // relative to the terms (memory_op.hpp, verify)
    };
    const double bf16_ulp = 1.0 / 256;
    const Case cases[] = {
        {k::MemoryKernel::copy, 1000003, 8192, 0.0},
        {k::MemoryKernel::triad, 1000003, 8192, 2 * bf16_ulp},
        {k::MemoryKernel::adam, 1000003, 8192, 1e-5},
        {k::MemoryKernel::rmsnorm, 64 * 8192, 8192, 2 * bf16_ulp},
        {k::MemoryKernel::rmsnorm, 16 * 24576, 24576, 2 * bf16_ulp},
        {k::MemoryKernel::rmsnorm, 300 * 1000, 1000, 2 * bf16_ulp},
        {k::MemoryKernel::cast_transpose, 256 * 512, 512, 0.0},
    };
    for (const auto& c : cases) {
        INFO(k::to_string(c.kernel) << " elements " << c.elements << " row " << c.row);
        if (c.kernel == k::MemoryKernel::cast_transpose && !dev.supports_fp8()) continue;
        k::MemoryOp op(dev, k::MemorySpec{c.kernel, c.elements, c.row});
        CHECK(op.verify() <= c.tolerance);
    }
}
