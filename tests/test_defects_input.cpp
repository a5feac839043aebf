// Issue #45 item 7: crashes, silent wrong results and unclear messages in scenario, profile,
// config and command-line input. Each case used to crash (SIGFPE, bad_alloc, nlohmann type_error),
// load a wrong value without a word, or say something misleading; each now exits with the
// documented code and a message naming the file, line and key (or the option).
#include "test_calibrate_support.hpp"

#include "trainsim/calibrate/measure/measure.hpp"
#include "trainsim/calibrate/samples/sample.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
namespace test = trainsim::test;
using nlohmann::json;

namespace {

const std::string kSim = TRAINSIM_EXE;
const std::string kCal = TRAINSIM_CALIBRATE_EXE;
const std::string kData = TRAINSIM_TEST_DATA_DIR;

// trainsim with the shipped data directory, run in `dir`.
test::ChildResult sim(const test::ScratchDir& dir, std::vector<std::string> args) {
    args.insert(args.begin(), {"TRAINSIM_DATA_DIR=" + kData, kSim});
    return test::run_child("/usr/bin/env", args, dir.path());
}

std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void write(const fs::path& p, const std::string& text) {
    std::ofstream out(p, std::ios::binary);
    out << text;
}

// A small 7B plan on one H100 node (2 micro-batches per step: fast), with extra text appended.
std::string scenario(const std::string& training = "global_batch: 8", const std::string& parallel = "tp: 2",
                     const std::string& extra = "") {
    return fmt::format("title: \"defects\"\n"
                       "model: llama2-7b\n"
                       "training: {{tokens: 1B, seq_len: 2048, micro_batch: 1, {}}}\n"
                       "parallel: {{{}, sharding: dist_opt}}\n"
                       "precision: bf16\n"
                       "cluster: {{gpu: h100-sxm, nodes: 1, gpus_per_node: 8}}\n"
                       "pricing: {{basis: gpu_hour, rate: 2.0, currency: USD}}\n{}",
                       training, parallel, extra);
}

// The shipped H100 profile with the first `from` replaced by `to`.
std::string h100_with(const std::string& from, const std::string& to) {
    std::string text = read(fs::path(kData) / "hardware" / "h100-sxm.yaml");
    const auto pos = text.find(from);
    REQUIRE(pos != std::string::npos);
    return text.replace(pos, from.size(), to);
}

// 1-based line of the first `needle` in `text`.
int line_of(const std::string& text, const std::string& needle) {
    const auto pos = text.find(needle);
    REQUIRE(pos != std::string::npos);
    return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<long>(pos), '\n'));
}

} // namespace

TEST_CASE("a gemm_tile entry of 1 is refused at its key, not a division by zero", "[defects-input]") {
    test::ScratchDir dir;
    const std::string prof = h100_with("gemm_tile: {value: [128,", "gemm_tile: {value: [1,");
    write(dir / "tile.yaml", prof);
    write(dir / "s.yaml", scenario());
    const auto r = sim(dir, {"simulate", (dir / "s.yaml").string(), "--profile", (dir / "tile.yaml").string()});
    INFO(r.err);
    CHECK(r.exit_code == 2);  // was SIGFPE
    CHECK_THAT(r.err, Contains(fmt::format("tile.yaml:{}", line_of(prof, "gemm_tile"))));
    CHECK_THAT(r.err, Contains("compute.gemm_tile[0]"));
    CHECK_THAT(r.err, Contains("at least 16"));
}

TEST_CASE("text that is not UTF-8 is refused at its key, and JSON outputs never throw on it", "[defects-input]") {
    test::ScratchDir dir;
    const std::string text = scenario("global_batch: 8", "tp: 2", "plans:\n  - name: \"H100 \xff plan\"\n");
    write(dir / "s.yaml", text);
    auto r = sim(dir, {"simulate", (dir / "s.yaml").string(), "--json"});
    INFO(r.err);
    CHECK(r.exit_code == 2);  // was 1: type_error 316 in the JSON dump
    CHECK_THAT(r.err, Contains(fmt::format("s.yaml:{}", line_of(text, "H100"))));
    CHECK_THAT(r.err, Contains("plans[0].name"));
    CHECK_THAT(r.err, Contains("not valid UTF-8"));

    // The currency too.
    write(dir / "c.yaml", scenario() + "");
    std::string cur = scenario();
    cur.replace(cur.find("currency: USD"), 13, "currency: \"U\xfe" "D\"");
    write(dir / "c.yaml", cur);
    r = sim(dir, {"simulate", (dir / "c.yaml").string(), "--json"});
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("pricing.currency"));

    // A CSV row id of a validation file: the row's line and column.
    const std::string header =
        "id,source_group,source,model,layers,hidden,heads,kv_heads,ffn,ffn_type,vocab,seq_len,gpu,num_gpus,tp,pp,vp,cp,"
        "dp,sequence_parallel,sharding,micro_batch,global_batch,recompute,precision,framework,kind,"
        "tokens_per_s_per_gpu,derivation,notes\n";
    write(dir / "v.csv", header + "r\xc3\x28,g,src,llama2-7b,,,,,,,,2048,h100-sxm,8,2,1,1,1,4,true,dist_opt,1,8,none,bf16,,"
                                  "throughput,3000,,\n");
    r = sim(dir, {"validate", (dir / "v.csv").string(), "--json"});
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("v.csv:2"));
    CHECK_THAT(r.err, Contains("not valid UTF-8"));
}

TEST_CASE("more micro-batches per step than the simulation supports are refused, not a bad_alloc", "[defects-input]") {
    test::ScratchDir dir;
    // 1048576 sequences (inside training.global_batch's range) over dp = 4 at micro-batch 1:
    // 262144 micro-batches, each simulated op by op (3.8 GB and minutes before).
    const std::string text = scenario("global_batch: 1048576");
    write(dir / "s.yaml", text);
    auto r = sim(dir, {"simulate", (dir / "s.yaml").string()});
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains(fmt::format("s.yaml:{}", line_of(text, "global_batch"))));
    CHECK_THAT(r.err, Contains("training.global_batch"));
    CHECK_THAT(r.err, Contains("262144 micro-batches per step, more than the 16384"));

    r = sim(dir, {"collective", "--gpu", "h100-sxm", "--gpus", "1000000000"});
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("--gpus"));
    CHECK_THAT(r.err, Contains("2 to 16384"));

    r = sim(dir, {"plan", "--model", "llama2-7b", "--gpu", "h100-sxm", "--gpus", "16777216"});
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("--gpus"));
    CHECK_THAT(r.err, Contains("1 to 65536"));
}

TEST_CASE("an efficiency or speed far below any device is refused at its key", "[defects-input]") {
    test::ScratchDir dir;
    std::string prof = read(fs::path(kData) / "hardware" / "h100-sxm.yaml");
    const auto at = prof.find("hbm_efficiency: {value: ");
    REQUIRE(at != std::string::npos);
    const auto num = at + std::string("hbm_efficiency: {value: ").size();
    prof.replace(num, prof.find(',', num) - num, "1e-300");
    write(dir / "p.yaml", prof);
    write(dir / "s.yaml", scenario());
    auto r = sim(dir, {"simulate", (dir / "s.yaml").string(), "--profile", (dir / "p.yaml").string()});
    INFO(r.err);
    CHECK(r.exit_code == 2);  // was 1, "simulated time outside ..." naming no key
    CHECK_THAT(r.err, Contains(fmt::format("p.yaml:{}", line_of(prof, "hbm_efficiency"))));
    CHECK_THAT(r.err, Contains("memory.hbm_efficiency"));
    CHECK_THAT(r.err, Contains("below 1e-06"));

    // A sample timed at 1e300 s: refused at its line by the sample reader.
    fs::create_directories(dir / "run");
    {
        json s = json::parse(trainsim::calibrate::to_json_line(
            test::synthetic(test::gemm_desc(4096, 4096, 4096, "bf16"), 2e-4)));
        for (const char* k : {"median", "min", "max", "mean", "p10", "p90"}) s["time_s"][k] = 1e300;
        write(dir / "run" / trainsim::calibrate::kSamplesFile, s.dump() + "\n");
    }
    r = test::run_child(kCal, {"fit", (dir / "run").string(), "--out", (dir / "f.yaml").string(), "--base", "h100-sxm",
                               "--data-dir", kData},
                        dir.path());
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("samples.jsonl:1"));
    CHECK_THAT(r.err, Contains("at most 3600 s"));
    CHECK_FALSE(fs::exists(dir / "f.yaml"));
}

TEST_CASE("more TP ranks than KV heads are refused as Megatron-Core does", "[defects-input]") {
    test::ScratchDir dir;
    // 32 heads, 4 KV heads, tp = 8: each rank would hold half a KV head.
    const std::string text =
        "model: {name: gqa, layers: 4, hidden: 4096, heads: 32, kv_heads: 4, ffn: 11008, vocab: 32000}\n"
        "training: {tokens: 1B, seq_len: 2048, global_batch: 8, micro_batch: 1}\n"
        "parallel: {tp: 8}\n"
        "precision: bf16\n"
        "cluster: {gpu: h100-sxm, nodes: 1, gpus_per_node: 8}\n";
    write(dir / "s.yaml", text);
    const auto r = sim(dir, {"simulate", (dir / "s.yaml").string()});
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains(fmt::format("s.yaml:{}", line_of(text, "tp: 8"))));
    CHECK_THAT(r.err, Contains("parallel.tp"));
    CHECK_THAT(r.err, Contains("more than the 4 KV heads"));
}

TEST_CASE("an HF config.json with a key written twice is refused naming the key", "[defects-input]") {
    test::ScratchDir dir;
    const std::string config = "{\n"
                               "  \"model_type\": \"llama\",\n"
                               "  \"num_hidden_layers\": 4,\n"
                               "  \"hidden_size\": 512,\n"
                               "  \"num_attention_heads\": 8,\n"
                               "  \"num_key_value_heads\": 8,\n"
                               "  \"intermediate_size\": 1376,\n"
                               "  \"vocab_size\": 32000,\n"
                               "  \"num_hidden_layers\": 40\n"
                               "}\n";
    write(dir / "config.json", config);
    write(dir / "s.yaml", "model: {hf_config: config.json}\n"
                          "training: {tokens: 1B, seq_len: 1024, global_batch: 8}\n"
                          "cluster: {gpu: h100-sxm, nodes: 1, gpus_per_node: 8}\n");
    const auto r = sim(dir, {"simulate", (dir / "s.yaml").string()});
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("config.json:9"));
    CHECK_THAT(r.err, Contains("num_hidden_layers"));
    CHECK_THAT(r.err, Contains("written twice"));
    CHECK_THAT(r.err, Contains("first at line 3"));
}

TEST_CASE("a second YAML document after --- is refused at its line", "[defects-input]") {
    test::ScratchDir dir;
    const std::string text = scenario() + "---\nparallel: {tp: 4}\n";
    write(dir / "s.yaml", text);
    auto r = sim(dir, {"simulate", (dir / "s.yaml").string()});
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains(fmt::format("s.yaml:{}", line_of(text, "---"))));
    CHECK_THAT(r.err, Contains("second YAML document"));

    // A profile too; a leading "---" alone (one document) still loads.
    const std::string prof = read(fs::path(kData) / "hardware" / "h100-sxm.yaml") + "---\nid: other\n";
    write(dir / "p.yaml", prof);
    r = sim(dir, {"simulate", (dir / "s.yaml").string(), "--profile", (dir / "p.yaml").string()});
    CHECK(r.exit_code == 2);
    write(dir / "one.yaml", "---\n" + scenario());
    r = sim(dir, {"simulate", (dir / "one.yaml").string(), "--json"});
    INFO(r.err);
    CHECK(r.exit_code == 0);
}

TEST_CASE("a profile without the GEMM efficiency of a precision it has a peak for is refused", "[defects-input]") {
    test::ScratchDir dir;
    std::string prof = read(fs::path(kData) / "hardware" / "h100-sxm.yaml");
    // Drop the fp8 entry of compute.gemm_efficiency (the line after "gemm_efficiency:" that starts "    fp8:").
    const auto sec = prof.find("  gemm_efficiency:");
    REQUIRE(sec != std::string::npos);
    const auto fp8 = prof.find("    fp8:", sec);
    REQUIRE(fp8 != std::string::npos);
    prof.erase(fp8, prof.find('\n', fp8) + 1 - fp8);
    write(dir / "p.yaml", prof);
    write(dir / "s.yaml", scenario());
    const auto r = sim(dir, {"simulate", (dir / "s.yaml").string(), "--profile", (dir / "p.yaml").string()});
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains(fmt::format("p.yaml:{}", line_of(prof, "  gemm_efficiency:"))));
    CHECK_THAT(r.err, Contains("compute.gemm_efficiency.fp8"));
    CHECK_THAT(r.err, Contains("required key is missing"));
}

TEST_CASE("a collective_times size measured twice is refused at its line", "[defects-input]") {
    test::ScratchDir dir;
    std::string prof = read(fs::path(kData) / "hardware" / "h100-sxm.yaml");
    REQUIRE(prof.find("calibrated:") == std::string::npos);
    prof += "calibrated:\n"
            "  source: \"test\"\n"
            "  collective_times:\n"
            "    - {op: all_reduce, group_size: 8, scope: intra_node, bytes: 1 MiB, time: 30 us}\n"
            "    - {op: all_reduce, group_size: 8, scope: intra_node, bytes: 4 MiB, time: 50 us}\n"
            "    - {op: all_reduce, group_size: 8, scope: intra_node, bytes: 1 MiB, time: 90 us}\n";
    write(dir / "p.yaml", prof);
    write(dir / "s.yaml", scenario());
    const auto r = sim(dir, {"simulate", (dir / "s.yaml").string(), "--profile", (dir / "p.yaml").string()});
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains(fmt::format("p.yaml:{}", line_of(prof, "time: 90 us"))));
    CHECK_THAT(r.err, Contains("measured twice"));
    CHECK_THAT(r.err, Contains(fmt::format("first at line {}", line_of(prof, "time: 30 us"))));
}

TEST_CASE("collective --nics-per-node -5 is refused, not read as the profile's node", "[defects-input]") {
    test::ScratchDir dir;
    const auto r = sim(dir, {"collective", "--gpu", "h100-sxm", "--gpus", "16", "--nics-per-node", "-5"});
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("--nics-per-node"));
}

TEST_CASE("a cluster interrupted more often than it can checkpoint gives no expected days, in any output",
          "[defects-input]") {
    test::ScratchDir dir;
    write(dir / "s.yaml", scenario("global_batch: 8", "tp: 2", "run: {gpu_mtbf: 1 min, node_mtbf: 1 min}\n"));
    auto r = sim(dir, {"simulate", (dir / "s.yaml").string()});
    INFO(r.err);
    CHECK(r.exit_code == 0);  // the steady-state figures stand (docs/model.md "Whole run")
    CHECK_THAT(r.out, Contains("expected wall clock: NOT ESTIMATED"));
    CHECK_THAT(r.out, !Contains("expected wall clock 2"));

    r = sim(dir, {"simulate", (dir / "s.yaml").string(), "--json"});
    REQUIRE(r.exit_code == 0);
    const json j = json::parse(r.out);
    CHECK(j.at("run").at("first_order_valid") == false);
    CHECK(j.at("expected_days").is_null());
    CHECK(j.at("expected_cost").is_null());
    CHECK_THAT(j.at("expected_days_not_estimated").get<std::string>(), Contains("interrupted every"));
    CHECK(j.at("days_to_train").is_number());

    r = sim(dir, {"simulate", (dir / "s.yaml").string(), "--csv"});
    REQUIRE(r.exit_code == 0);
    std::istringstream csv(r.out);
    std::string head, row;
    std::getline(csv, head);
    std::getline(csv, row);
    // expected_days is the 18th lead column: an empty cell.
    std::vector<std::string> h, v;
    for (std::istringstream s(head); std::getline(s, head, ',');) h.push_back(head);
    for (std::istringstream s(row); std::getline(s, row, ',');) v.push_back(row);
    const auto col = std::find(h.begin(), h.end(), "expected_days") - h.begin();
    REQUIRE(static_cast<std::size_t>(col) < v.size());
    CHECK(v[static_cast<std::size_t>(col)].empty());

    r = sim(dir, {"report", (dir / "s.yaml").string(), "--html", (dir / "r.html").string(), "--no-scaling"});
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(read(dir / "r.html"), Contains("expected: not estimated"));
}

TEST_CASE("all_to_all and send_recv over two nodes pick an algorithm that applies", "[defects-input]") {
    test::ScratchDir dir;
    for (const char* op : {"all_to_all", "send_recv"}) {
        CAPTURE(op);
        const auto r = sim(dir, {"collective", "--gpu", "h100-sxm", "--op", op, "--gpus", "16", "--json"});
        INFO(r.err);
        REQUIRE(r.exit_code == 0);  // was 2: "ring does not apply to all_to_all over 8 GPUs on 1 node(s)"
        const json j = json::parse(r.out);
        CHECK(j.at("algorithm") == "direct");
        CHECK(j.at("time_s").get<double>() > 0);
    }
    // Forcing one that does not apply names the group as given: 16 GPUs on 2 nodes.
    const auto r = sim(dir, {"collective", "--gpu", "h100-sxm", "--op", "all_to_all", "--gpus", "16", "--algo", "ring"});
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("over 16 GPUs on 2 node(s)"));
}

TEST_CASE("an unreadable tp reports that alone, not its consequences", "[defects-input]") {
    test::ScratchDir dir;
    const std::string text = scenario("global_batch: 8", "tp: abc, sequence_parallel: true");
    write(dir / "s.yaml", text);
    const auto r = sim(dir, {"simulate", (dir / "s.yaml").string()});
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("1 scenario problem"));
    CHECK_THAT(r.err, Contains("parallel.tp: expected an integer, got 'abc'"));
    CHECK_THAT(r.err, !Contains("sequence parallelism needs tp > 1"));
}

TEST_CASE("an integer of 2^63 in a samples file is out of range, not a negative number", "[defects-input]") {
    test::ScratchDir dir;
    fs::create_directories(dir / "run");
    auto d = test::gemm_desc(4096, 4096, 4096, "bf16");
    std::string line = trainsim::calibrate::to_json_line(test::synthetic(d, 2e-4));
    const auto pos = line.find("\"m\":4096");
    REQUIRE(pos != std::string::npos);
    line.replace(pos, 8, "\"m\":9223372036854775808");
    write(dir / "run" / trainsim::calibrate::kSamplesFile, line + (line.ends_with("\n") ? "" : "\n"));
    const auto r = test::run_child(kCal, {"fit", (dir / "run").string(), "--out", (dir / "f.yaml").string(), "--base",
                                          "h100-sxm", "--data-dir", kData},
                                   dir.path());
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("samples.jsonl:1"));
    CHECK_THAT(r.err, Contains("9223372036854775808 is out of range"));
    CHECK_THAT(r.err, !Contains("-9223372036854775808"));
}

TEST_CASE("import nccl-tests --group-size 0 gives a readable range", "[defects-input]") {
    test::ScratchDir dir;
    write(dir / "log.txt", "x\n");
    const auto r = test::run_child(kCal, {"import", "nccl-tests", (dir / "log.txt").string(), "--out",
                                          (dir / "o").string(), "--group-size", "0"},
                                   dir.path());
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("--group-size"));
    CHECK_THAT(r.err, Contains("not in range 1 to 1048576"));
    CHECK(r.err.size() < 300);  // was a 300-digit upper end
}
