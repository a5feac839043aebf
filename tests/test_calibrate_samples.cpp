// Sample files: what is written reads back; bad calibration data is rejected with the file, the
// line, the sample's key and the reason (empty file, truncated line, negative time, throughput
// above the device's peak, ...); resume bookkeeping; run.json never overwritten.
#include "test_calibrate_support.hpp"

#include "trainsim/calibrate/core/calibrate_error.hpp"
#include "trainsim/calibrate/fit/fit.hpp"
#include "trainsim/calibrate/measure/measure.hpp"
#include "trainsim/model/input/loader.hpp"

#include <catch2/catch.hpp>

using namespace trainsim;
using namespace trainsim::calibrate;
using Catch::Matchers::Contains;

namespace {

using test::h100;

Sample gemm_sample(std::int64_t n, double seconds) { return test::synthetic(test::gemm_desc(n, n, n, "bf16"), seconds); }

// The diagnostics of the SampleError `f` throws.
template <class F> std::vector<model::Diagnostic> problems_of(F f) {
    try {
        f();
    } catch (const SampleError& e) {
        return e.diagnostics();
    }
    FAIL("no SampleError thrown");
    return {};
}

} // namespace

TEST_CASE("samples written by SampleWriter read back unchanged", "[calibrate][samples]") {
    test::ScratchDir dir;
    const auto file = dir / "samples.jsonl";
    Sample a = gemm_sample(1024, 4e-6);
    a.telemetry.sm_clock_mhz = 1980;
    a.telemetry.temperature_c = 61;
    a.algo_index = 2;
    a.algo_count = 8;
    Sample b = test::synthetic(test::collective_desc("all_gather", 8, 1 << 20), 2e-5);
    Sample c;
    c.desc = test::gemm_desc(64, 64, 64, "fp8_e4m3");
    c.desc.key = make_key(c.desc);
    c.status = "unsupported";
    c.reason = "FP8 needs sm_89";
    c.backend = "cuda";
    {
        SampleWriter w(file);
        w.append(a);
        w.append(b);
        w.append(c);
    }
    const SampleFile f = read_samples(file);
    REQUIRE(f.samples.size() == 3);
    CHECK(f.lines == std::vector<int>{1, 2, 3});
    CHECK(f.samples[0].desc.key == a.desc.key);
    CHECK(f.samples[0].time.median == a.time.median);
    CHECK(f.samples[0].time.p90 == a.time.p90);
    CHECK(f.samples[0].telemetry.sm_clock_mhz == 1980);
    CHECK(f.samples[0].algo_index == 2);
    CHECK(f.samples[1].desc.bytes == b.desc.bytes);
    CHECK(f.samples[1].busbw() == Approx(b.busbw()));
    CHECK_FALSE(f.samples[2].ok());
    CHECK(f.samples[2].reason == "FP8 needs sm_89");
}

TEST_CASE("an empty samples file is rejected, naming the file and the reason", "[calibrate][samples][bad-data]") {
    test::ScratchDir dir;
    const auto file = dir / "samples.jsonl";
    test::write_text(file, "");
    const auto d = problems_of([&] { (void)read_samples(file); });
    REQUIRE(d.size() == 1);
    CHECK(d[0].file == file.string());
    CHECK(d[0].line == 1);
    CHECK_THAT(d[0].message, Contains("empty file"));
}

TEST_CASE("a truncated last line is rejected with its line number", "[calibrate][samples][bad-data]") {
    test::ScratchDir dir;
    const auto file = dir / "samples.jsonl";
    const std::string good = to_json_line(gemm_sample(1024, 4e-6)) + "\n" + to_json_line(gemm_sample(2048, 3e-5)) + "\n";
    const std::string torn = to_json_line(gemm_sample(4096, 2e-4));
    test::write_text(file, good + torn.substr(0, torn.size() / 2));
    const auto d = problems_of([&] { (void)read_samples(file); });
    REQUIRE(d.size() == 1);
    CHECK(d[0].line == 3);
    CHECK_THAT(d[0].message, Contains("truncated"));
    CHECK_THAT(d[0].format(), Contains("samples.jsonl:3:"));
}

TEST_CASE("a negative time is rejected with the line, the key and the reason", "[calibrate][samples][bad-data]") {
    test::ScratchDir dir;
    const auto file = dir / "samples.jsonl";
    Sample bad = gemm_sample(2048, 3e-5);
    bad.time.median = -3e-5;
    bad.time.min = -3.1e-5;
    test::write_text(file, to_json_line(gemm_sample(1024, 4e-6)) + "\n" + to_json_line(bad) + "\n");
    const auto d = problems_of([&] { (void)read_samples(file); });
    REQUIRE(d.size() == 1);
    CHECK(d[0].line == 2);
    CHECK(d[0].key == bad.desc.key);
    CHECK_THAT(d[0].message, Contains("impossible time"));
    CHECK_THAT(d[0].message, Contains("-3e-05"));
}

TEST_CASE("other impossible or malformed samples are rejected, all at once", "[calibrate][samples][bad-data]") {
    test::ScratchDir dir;
    const auto file = dir / "samples.jsonl";
    Sample inverted = gemm_sample(512, 1e-6);
    inverted.time.min = 2e-6;  // min above the median
    Sample wrong_key = gemm_sample(256, 1e-6);
    wrong_key.desc.key = "gemm/bf16/m=1,n=1,k=1/first";
    const std::string text = to_json_line(gemm_sample(1024, 4e-6)) + "\n" +  // 1 ok
                             "{\"schema\": 1, \"key\": \"x\"\n" +            // 2 malformed JSON
                             to_json_line(inverted) + "\n" +                 // 3 min > median
                             to_json_line(gemm_sample(1024, 4e-6)) + "\n" +  // 4 duplicate of 1
                             to_json_line(wrong_key) + "\n" +                // 5 key / fields mismatch
                             "{\"schema\": 1}\n";                            // 6 missing fields
    test::write_text(file, text);
    const auto d = problems_of([&] { (void)read_samples(file); });
    REQUIRE(d.size() == 5);
    CHECK(d[0].line == 2);
    CHECK_THAT(d[0].message, Contains("malformed JSON"));
    CHECK(d[1].line == 3);
    CHECK_THAT(d[1].message, Contains("min"));
    CHECK(d[2].line == 4);
    CHECK_THAT(d[2].message, Contains("measured twice (also on line 1)"));
    CHECK(d[3].line == 5);
    CHECK_THAT(d[3].message, Contains("key does not match"));
    CHECK(d[4].line == 6);
    CHECK_THAT(d[4].message, Contains("missing field 'key'"));
}

TEST_CASE("a throughput above the base profile's peak is rejected, naming the sample", "[calibrate][samples][bad-data]") {
    test::ScratchDir dir;
    const auto file = dir / "samples.jsonl";
    // 8192^3 in 0.5 ms = 2199 TFLOP/s: above the H100's 989.4 TFLOP/s BF16 dense peak.
    const Sample fast = gemm_sample(8192, 0.5e-3);
    // 1 GiB copy (2 GiB moved) in 0.2 ms = 10.7 TB/s: above its 3.35 TB/s HBM.
    const Sample copy = test::synthetic(test::memory_desc("copy", 1 << 29, "bf16"), 0.2e-3);
    // busbw 1 TB/s inside a node: above NVLink (450 GB/s x 2 with NVLS).
    const Sample coll = test::synthetic(test::collective_desc("all_reduce", 8, 1e9), 1e9 * 1.75 / 1e12 / 1.0);
    test::write_text(file, to_json_line(gemm_sample(1024, 4e-6)) + "\n" + to_json_line(fast) + "\n" +
                               to_json_line(copy) + "\n" + to_json_line(coll) + "\n");
    const SampleFile f = read_samples(file);  // well-formed: the checks against the device come next
    const auto d = problems_of([&] { (void)fit(f, h100(), default_fit_options()); });
    REQUIRE(d.size() == 3);
    CHECK(d[0].line == 2);
    CHECK(d[0].key == fast.desc.key);
    CHECK_THAT(d[0].message, Contains("above the bf16 dense peak"));
    CHECK_THAT(d[0].message, Contains("h100-sxm"));
    CHECK(d[1].line == 3);
    CHECK_THAT(d[1].message, Contains("above the HBM bandwidth"));
    CHECK(d[2].line == 4);
    CHECK_THAT(d[2].message, Contains("bus bandwidth"));
}

TEST_CASE("resume bookkeeping drops a torn last line and keeps the complete ones", "[calibrate][samples][resume]") {
    test::ScratchDir dir;
    const auto file = dir / "samples.jsonl";
    const Sample a = gemm_sample(1024, 4e-6), b = gemm_sample(2048, 3e-5);
    const std::string torn = to_json_line(gemm_sample(4096, 2e-4)).substr(0, 40);
    test::write_text(file, to_json_line(a) + "\n" + to_json_line(b) + "\n" + torn);
    TornLine where;
    CHECK(completed_keys(file, /*repair=*/false, &where) == std::set<std::string>{a.desc.key, b.desc.key});
    CHECK(where.line == 3);
    CHECK(where.bytes == 40);
    CHECK(test::read_text(file).ends_with(torn));  // not repaired
    // A resume says what it dropped, with the file and the line.
    {
        const auto run = open_run_dir(dir.path(), /*resume=*/true, /*repair=*/true); // holds the lock until }
        CHECK(run.done == std::set<std::string>{a.desc.key, b.desc.key});
        CHECK_THAT(run.dropped, Contains("samples.jsonl:3: a torn last line (40 bytes") && Contains("measured again"));
    }
    CHECK(test::read_text(file) == to_json_line(a) + "\n" + to_json_line(b) + "\n");
    CHECK(completed_keys(file, /*repair=*/true, &where) == std::set<std::string>{a.desc.key, b.desc.key});
    CHECK(where.line == 0); // nothing torn any more
    CHECK(open_run_dir(dir.path(), true, true).dropped.empty());
    CHECK(completed_keys(dir / "missing.jsonl", true).empty());
}

TEST_CASE("a run directory with samples is not measured into again without --resume", "[calibrate][samples][resume]") {
    test::ScratchDir dir;
    test::write_text(dir / kSamplesFile, to_json_line(gemm_sample(1024, 4e-6)) + "\n");
    try {
        (void)open_run_dir(dir.path(), /*resume=*/false, true);
        FAIL("expected CalibrationInputError");
    } catch (const CalibrationInputError& e) {
        CHECK_THAT(e.diagnostics().at(0).message, Contains("--resume"));
    }
    const RunDir run = open_run_dir(dir.path(), /*resume=*/true, true);
    CHECK(run.done.size() == 1);
}

TEST_CASE("run.json is never overwritten: later sessions get run-2.json, run-3.json", "[calibrate][samples]") {
    test::ScratchDir dir;
    const auto p1 = write_run_info(dir.path(), {{"session", 1}});
    const auto p2 = write_run_info(dir.path(), {{"session", 2}});
    const auto p3 = write_run_info(dir.path(), {{"session", 3}});
    CHECK(p1.filename() == "run.json");
    CHECK(p2.filename() == "run-2.json");
    CHECK(p3.filename() == "run-3.json");
    CHECK_THAT(test::read_text(p1), Contains("\"session\": 1"));
}

TEST_CASE("an unfused attention sample's rate counts the full s x s it computed, a fused one the causal half",
          "[calibrate][samples]") {
    calibrate::Descriptor d;
    d.kind = calibrate::OpKind::attention;
    d.op = "attention_fwd";
    d.dtype = "bf16";
    d.seq = 4096;
    d.batch_heads = 32;
    d.head_dim = 128;
    d.causal = true;
    d.key = calibrate::make_key(d);
    calibrate::Sample s = test::synthetic(d, 1e-3);
    const double causal = 4.0 * 32 * 128 * 4096.0 * 4097.0 / 2.0; // QK^T and PV over the lower triangle
    const double full = 4.0 * 32 * 128 * 4096.0 * 4096.0;
    s.impl = "cudnn-fused-flash";
    CHECK(s.executed_flops() == Approx(causal));
    s.impl = "unfused-cublaslt"; // QK^T and PV GEMMs over every score, the mask applied in the softmax
    CHECK(s.executed_flops() == Approx(full));
    CHECK(s.flop_rate() == Approx(full / s.time.median));
}
