// trainsim-calibrate as a user runs it: exit codes (0 ok, 2 bad input / bad data / no device),
// fit refusing to overwrite without --force, the JSON of fit and show.
#include "test_calibrate_support.hpp"

#include "trainsim/calibrate/measure/measure.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>

using namespace trainsim;
using namespace trainsim::calibrate;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

const std::string kExe = TRAINSIM_CALIBRATE_EXE;
const std::string kData = TRAINSIM_TEST_DATA_DIR;

// A run directory holding a small synthetic H100-like run (no measuring needed).
void write_synthetic_run(const std::filesystem::path& dir) {
    test::write_synthetic_h100_samples(dir);
    write_run_info(dir, {{"plan", "quick"}, {"backend", "cuda"}, {"provenance", {{"device", "NVIDIA H100 80GB HBM3"}}}});
}

} // namespace

TEST_CASE("measure --backend cuda without a GPU exits 2 saying there is no CUDA device", "[calibrate][cli]") {
    if (std::filesystem::exists("/dev/nvidia0")) {
        SUCCEED("a GPU is present: covered by the GPU tests");
        return;
    }
    test::ScratchDir dir;
    const auto r = test::run_child(kExe, {"measure", "--backend", "cuda", "--plan", "quick", "--out", (dir / "r").string()},
                                   dir.path());
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("no CUDA device"));
}

TEST_CASE("fit writes a calibrated profile, refuses to overwrite it, and show compares it", "[calibrate][cli]") {
    test::ScratchDir dir;
    write_synthetic_run(dir / "run");
    const std::string prof = (dir / "h100-node.yaml").string();
    // No --base: taken from the device name in run.json.
    const std::vector<std::string> fit_args{"fit", (dir / "run").string(), "--out", prof, "--data-dir", kData, "--json"};
    auto r = test::run_child(kExe, fit_args, dir.path());
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const json report = json::parse(r.out);
    CHECK(report.at("base") == "h100-sxm");
    CHECK(report.at("gemm").at(0).at("rate_flops").get<double>() == Approx(750e12).epsilon(0.01));
    CHECK(report.at("collectives").at(0).at("busbw").get<double>() == Approx(360e9).epsilon(0.01));
    CHECK(report.at("samples") == 11);

    // Exists now: refused without --force (exit 2), accepted with it.
    r = test::run_child(kExe, fit_args, dir.path());
    CHECK(r.exit_code == 2);
    auto forced = fit_args;
    forced.emplace_back("--force");
    CHECK(test::run_child(kExe, forced, dir.path()).exit_code == 0);

    r = test::run_child(kExe, {"show", prof, "--vs", "h100-sxm", "--data-dir", kData, "--json"}, dir.path());
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const json show = json::parse(r.out);
    CHECK(show.at("id") == "h100-node");
    CHECK(show.at("provenance") == "calibrated");
    CHECK(show.at("vs").at("id") == "h100-sxm");
    bool saw_gemm = false;
    for (const auto& e : show.at("entries")) {
        if (e.at("path") != "compute.gemm_efficiency.bf16") continue;
        saw_gemm = true;
        CHECK(e.at("source") == "measured");
        CHECK(e.at("vs_source") == "datasheet");
        // 8192^3 at 750 TFLOP/s (+4 us) against the datasheet's 0.80.
        const double eff = e.at("number").get<double>();
        CHECK(eff < 750e12 / 989.4e12);
        CHECK(e.at("diff_rel").get<double>() == Approx(eff / 0.8 - 1).epsilon(1e-6));
    }
    CHECK(saw_gemm);
    CHECK(show.at("collectives").size() == 1);
    CHECK_FALSE(show.at("collectives").at(0).contains("vs"));  // the datasheet profile has no curve

    r = test::run_child(kExe, {"show", prof, "--vs", "h100-sxm", "--data-dir", kData}, dir.path());
    CHECK(r.exit_code == 0);
}

TEST_CASE("fit rejects bad data with exit code 2", "[calibrate][cli][bad-data]") {
    test::ScratchDir dir;
    std::filesystem::create_directories(dir / "run");
    test::write_text(dir / "run" / kSamplesFile, "");
    const auto r = test::run_child(kExe, {"fit", (dir / "run").string(), "--out", (dir / "p.yaml").string(), "--base",
                                          "h100-sxm", "--data-dir", kData},
                                   dir.path());
    CHECK(r.exit_code == 2);
    CHECK_FALSE(std::filesystem::exists(dir / "p.yaml"));
}

TEST_CASE("fit without --base on an unknown device asks for one (exit 2)", "[calibrate][cli]") {
    test::ScratchDir dir;
    write_synthetic_run(dir / "run");
    std::filesystem::remove(dir / "run" / "run.json");
    const auto r = test::run_child(kExe, {"fit", (dir / "run").string(), "--out", (dir / "p.yaml").string(),
                                          "--data-dir", kData},
                                   dir.path());
    CHECK(r.exit_code == 2);
    CHECK_FALSE(std::filesystem::exists(dir / "p.yaml"));
}

TEST_CASE("env reports what the binary finds, and --require-gpu exits 2 without a GPU", "[calibrate][cli]") {
    test::ScratchDir dir;
    const auto r = test::run_child(kExe, {"env", "--json"}, dir.path());
    REQUIRE(r.exit_code == 0);
    const json j = json::parse(r.out);
    CHECK(j.at("trainsim_calibrate").is_string());
    CHECK(j.at("built_with_cuda").is_boolean());
    if (j.at("built_with_cuda").get<bool>()) {
        // NCCL is opened at run time: either the file that was loaded, or every place looked at.
        CHECK((j.contains("nccl_library") ||
               j.at("nccl_missing").get<std::string>().find("libnccl.so.2") != std::string::npos));
        CHECK(j.at("cuda_devices").is_number_integer());
    }
    if (std::filesystem::exists("/dev/nvidia0")) return;
    const auto g = test::run_child(kExe, {"env", "--require-gpu"}, dir.path());
    CHECK(g.exit_code == 2);
    CHECK_THAT(g.err, Contains("no CUDA device"));
}

TEST_CASE("measure refuses a time budget or a GPU timeout that is not a positive number of seconds",
          "[calibrate][cli]") {
    test::ScratchDir dir;
    for (const auto& [flag, value] : {std::pair{"--time-budget", "-5"}, std::pair{"--gpu-timeout", "0"}}) {
        INFO(flag << " " << value);
        const auto r = test::run_child(
            kExe, {"measure", "--backend", "cpu", "--plan", "tiny", "--out", (dir / "r").string(), flag, value},
            dir.path());
        CHECK(r.exit_code == 2);
        CHECK_THAT(r.err, Contains(flag) && Contains("positive number of seconds"));
        CHECK_FALSE(std::filesystem::exists(dir / "r" / kSamplesFile));
    }
}
