// No value can crash, hang or overflow the simulator (issue #19 items 2, 3, 5, 6): every number
// is finite and within the physical range of its kind, checked once where it is read and reported
// at file:line:col with its key; inputs that are not files of their kind (/dev/zero) stop at a
// size limit. Each case here used to reach an internal error, a hang or an accepted absurdity.
#include "cli_runner.hpp"

#include "trainsim/model/core/units.hpp"
#include "trainsim/model/input/loader.hpp"

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <algorithm>

#include "scratch_dir.hpp"
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using trainsim::test::run_trainsim;
namespace model = trainsim::model;
namespace test = trainsim::test;

namespace {




std::string q(const fs::path& p) { return fmt::format("'{}'", p.string()); }

// A 7B plan on h100-sxm whose `cluster` keys after the GPU are `cluster` (default: two nodes of 8)
// and whose `parallel`, `run` and `pricing` sections take extra keys.
std::string scenario(const std::string& cluster = "nodes: 2, gpus_per_node: 8", const std::string& parallel_extra = "",
                     const std::string& run_extra = "", const std::string& pricing_extra = "") {
    return fmt::format("model: llama2-7b\n"
                       "training: {{tokens: 1B, seq_len: 2048, global_batch: 16, micro_batch: 1}}\n"
                       "parallel: {{tp: 2, sharding: dist_opt{}}}\n"
                       "precision: bf16\n"
                       "cluster: {{gpu: h100-sxm, {}}}\n"
                       "run: {{restart: 10 min{}}}\n"
                       "pricing: {{basis: gpu_hour, rate: 2.0, currency: USD{}}}\n",
                       parallel_extra, cluster, run_extra, pricing_extra);
}

// 1-based "line:col" of the first `needle` in `text`.
std::string line_col(const std::string& text, const std::string& needle) {
    const auto pos = text.find(needle);
    REQUIRE(pos != std::string::npos);
    int line = 1;
    std::size_t line_start = 0;
    for (std::size_t i = 0; i < pos; ++i)
        if (text[i] == '\n') {
            ++line;
            line_start = i + 1;
        }
    return fmt::format("{}:{}", line, pos - line_start + 1);
}

} // namespace

TEST_CASE("units refuse NaN, infinities and products that overflow", "[hardening][units]") {
    CHECK_THROWS_AS(model::parse_bandwidth("nan Gbit/s"), model::UnitError);
    CHECK_THROWS_AS(model::parse_bandwidth("inf GB/s"), model::UnitError);
    CHECK_THROWS_AS(model::parse_flop_rate("-inf TFLOP/s"), model::UnitError);
    CHECK_THROWS_AS(model::parse_bytes("1e308 TB"), model::UnitError); // 1e320 B is not a double
    CHECK_THROWS_AS(model::parse_count("nan"), model::UnitError);
    CHECK_THROWS_AS(model::parse_fraction("nan%"), model::UnitError);
    CHECK_THROWS_AS(model::parse_wall_seconds("inf h"), model::UnitError);
    CHECK(model::parse_bandwidth("400 Gbit/s").value() == Approx(50e9));
}

TEST_CASE("a time beyond what int64 picoseconds hold is an error, not an undefined cast", "[hardening][units]") {
    CHECK(model::Time::from_seconds(9.1e6).count_ps() == 9'100'000'000'000'000'000LL);
    CHECK_THROWS_AS(model::Time::from_seconds(9.3e6), std::overflow_error);
    CHECK_THROWS_AS(model::Time::from_seconds(-1e300), std::overflow_error);
    CHECK_THROWS_AS(model::Time::from_seconds(std::numeric_limits<double>::quiet_NaN()), std::overflow_error);
    // A transfer at a near-zero rate: the division gives ~1e12 s.
    CHECK_THROWS_AS(model::transfer_time(model::Bytes(1e9), model::Bandwidth(1e-3)), std::overflow_error);
}

TEST_CASE("scenario numbers that are not finite or are outside their physical range are refused at their line",
          "[hardening][loader]") {
    struct Case {
        std::string text;
        std::string needle;  // where the diagnostic points
        std::string key;
        std::string message; // part of it
    };
    const Case cases[] = {
        {scenario("nodes: 2, nic_rate: \"nan Gbit/s\""), "\"nan Gbit/s\"", "cluster.nic_rate", "finite"},
        {scenario("nodes: 2, nic_rate: \"1e-9 Gbit/s\""), "\"1e-9 Gbit/s\"", "cluster.nic_rate", "physical range"},
        {scenario("nodes: 2, nic_rate: \"inf Gbit/s\""), "\"inf Gbit/s\"", "cluster.nic_rate", "finite"},
        {scenario("nodes: 2, nics_per_node: 100000"), "100000", "cluster.nics_per_node", "physical range"},
        {scenario("nodes: 1, gpus_per_node: 100000"), "100000", "cluster.gpus_per_node", "physical range"},
        {scenario("nodes: 2", ", fsdp_gathers_per_layer: 100000000"), "100000000", "parallel.fsdp_gathers_per_layer",
         "physical range"},
        {scenario("nodes: 2", ", dp_bucket_params: 1k"), "1k", "parallel.dp_bucket_params", "physical range"},
        {scenario("nodes: 2", "", ", gpu_mtbf: \"inf h\""), "\"inf h\"", "run.gpu_mtbf", "finite"},
        {scenario("nodes: 2", "", ", checkpoint_bandwidth: \"1e-300 GB/s\""), "\"1e-300 GB/s\"", "run.checkpoint_bandwidth",
         "physical range"},
        {scenario("nodes: 2", "", "", ", commitment: annual, discounts: {annual: \"nan%\"}"), "\"nan%\"",
         "pricing.discounts.annual", "finite"},
        {scenario("nodes: 2", "", "", ", discounts: {monthly: .nan}"), ".nan", "pricing.discounts.monthly", ""},
    };
    test::ScratchDir tmp;
    for (const auto& c : cases) {
        CAPTURE(c.text);
        const auto file = tmp.path() / "s.yaml";
        test::write_text(file, c.text);
        const std::string written = c.text;
        const auto r = run_trainsim("simulate " + q(file), true);
        CHECK(r.rc == 2);
        CHECK_THAT(r.out, Contains(fmt::format("s.yaml:{}: {}", line_col(written, c.needle), c.key)));
        CHECK_THAT(r.out, Contains(c.message));
        CHECK_THAT(r.out, !Contains("internal error"));
    }
}

TEST_CASE("every range bound of the key table is itself accepted and documented", "[hardening][loader]") {
    int ranged = 0;
    for (const auto& k : model::scenario_keys()) {
        if (k.range_min.empty() && k.range_max.empty()) continue;
        ++ranged;
        CAPTURE(k.path);
        CHECK_FALSE(k.range_basis.empty());
        if (k.path.starts_with("model.") && k.path.find('.') != k.path.rfind('.')) continue;
        for (const auto* bound : {&k.range_min, &k.range_max})
            if (!bound->empty()) CHECK(model::check_key_value(k.path, *bound).empty());
    }
    CHECK(ranged >= 30);
    CHECK_FALSE(model::check_key_value("cluster.nic_rate", "0.5 Gbit/s").empty());
    CHECK(model::check_key_value("cluster.nic_rate", "400 Gbit/s").empty());
}

TEST_CASE("a written NIC count of 0 on several nodes is blamed on the scenario line", "[hardening][loader]") {
    test::ScratchDir tmp;
    const auto file = tmp.path() / "s.yaml";
    const std::string text = scenario("nodes: 2, nics_per_node: 0");
    test::write_text(file, text);
    const auto r = run_trainsim("simulate " + q(file), true);
    CHECK(r.rc == 2);
    CHECK_THAT(r.out, Contains(fmt::format("s.yaml:{}: cluster.nics_per_node", line_col(text, "nics_per_node"))));
    CHECK_THAT(r.out, Contains("2 nodes need at least one NIC"));
    CHECK_THAT(r.out, !Contains("h100-sxm.yaml: cluster.nics_per_node"));
}

TEST_CASE("profile values of NaN or absurd size are refused at their line", "[hardening][profile]") {
    test::ScratchDir tmp;
    const std::string shipped = test::read_text(fs::path(TRAINSIM_TEST_DATA_DIR) / "hardware" / "h100-sxm.yaml");
    const auto peak = shipped.find("989.4 TFLOP/s");
    REQUIRE(peak != std::string::npos);
    for (const std::string bad : {"nan TFLOP/s", "1e-300 TFLOP/s", "inf TFLOP/s"}) {
        CAPTURE(bad);
        std::string text = shipped;
        text.replace(peak, std::string("989.4 TFLOP/s").size(), bad);
        const auto profile = tmp.path() / "bad-gpu.yaml";
        test::write_text(profile, text);
        const auto file = tmp.path() / "s.yaml";
        std::string sc = scenario();
        test::write_text(file, sc.replace(sc.find("gpu: h100-sxm"), 13, "gpu: ./bad-gpu.yaml"));
        const auto r = run_trainsim("simulate " + q(file), true);
        CHECK(r.rc == 2);
        CHECK_THAT(r.out, Contains(fmt::format("bad-gpu.yaml:{}", line_col(text, "\"" + bad))));
        CHECK_THAT(r.out, !Contains("internal error"));
    }
}

TEST_CASE("a measured collective time that is not a size and a duration is refused at its line",
          "[hardening][profile][measured]") {
    test::ScratchDir tmp;
    const std::string shipped = test::read_text(fs::path(TRAINSIM_TEST_DATA_DIR) / "hardware" / "a100-sxm-80gb.yaml");
    const std::string good = "bytes: \"4 MiB\", time: \"112.0 us\"";
    const auto row = shipped.find(good);
    REQUIRE(row != std::string::npos);
    for (const std::string bad : {"bytes: \"0 B\", time: \"112.0 us\"", "bytes: \"4 MiB\", time: \"-3 us\"",
                                  "bytes: \"4 MiB\", time: \"nan us\"", "bytes: \"1e20 B\", time: \"112.0 us\"",
                                  "bytes: \"4 MiB\", tim: \"112.0 us\""}) {
        CAPTURE(bad);
        std::string text = shipped;
        text.replace(row, good.size(), bad);
        const auto profile = tmp.path() / "bad-gpu.yaml";
        test::write_text(profile, text);
        const auto r = run_trainsim("collective --gpu " + q(profile) + " --op all_reduce --gpus 8 --size 4MiB", true);
        CHECK(r.rc == 2);
        const auto at = text.find(bad);
        const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n');
        CHECK_THAT(r.out, Contains(fmt::format("bad-gpu.yaml:{}:", line)));
        CHECK_THAT(r.out, !Contains("internal error"));
    }
}

TEST_CASE("command-line sizes and rates get the same bounds as scenario keys", "[hardening][cli]") {
    auto r = run_trainsim("collective --gpu h100-sxm --op all_reduce --gpus 8 --size '1e12 GiB'", true);
    CHECK(r.rc == 2);
    CHECK_THAT(r.out, Contains("--size"));
    r = run_trainsim("collective --gpu h100-sxm --op all_reduce --gpus 16 --nic-rate '1e-9 Gbit/s'", true);
    CHECK(r.rc == 2);
    CHECK_THAT(r.out, Contains("--nic-rate"));
    r = run_trainsim("collective --gpu h100-sxm --op all_reduce --gpus 16 --nics-per-node 100000", true);
    CHECK(r.rc == 2);
    CHECK_THAT(r.out, Contains("--nics-per-node"));
    r = run_trainsim("plan --model llama2-7b --gpu h100-sxm --gpus 8 --tokens 1B --gpu-mtbf-hours inf", true);
    CHECK(r.rc == 2);
    CHECK_THAT(r.out, Contains("--gpu-mtbf-hours"));
}

TEST_CASE("a device or a huge file as input stops at a size limit instead of reading forever",
          "[hardening][loader]") {
    // /dev/zero never ends: before, the readers consumed memory until killed. Now a device is
    // refused before it is read, named for what it is (issue #45 item 7); the size cap stays for
    // regular files (tests/test_defects_io.cpp).
    auto r = run_trainsim("simulate /dev/zero", true);
    CHECK(r.rc == 2);
    CHECK_THAT(r.out, Contains("is a character device"));
    r = run_trainsim("validate /dev/zero", true);
    CHECK(r.rc == 2);
    CHECK_THAT(r.out, Contains("is a character device"));
    test::ScratchDir tmp;
    const auto file = tmp.path() / "hf.yaml";
    test::write_text(file, scenario().replace(0, std::string("model: llama2-7b").size(), "model: {hf_config: /dev/zero}"));
    r = run_trainsim("simulate " + q(file), true);
    CHECK(r.rc == 2);
    CHECK_THAT(r.out, Contains("is a character device"));
}

TEST_CASE("a validation row beyond the physical range is refused at its cell", "[hardening][validation]") {
    test::ScratchDir tmp;
    // The first row of the shared dev set (../shared/validation, as CI places it), with its layers made absurd.
    const std::string dev = test::read_text(fs::path(TRAINSIM_SOURCE_DIR) / ".." / "shared" / "validation" / "published-dev.csv");
    REQUIRE_FALSE(dev.empty());
    const auto header_end = dev.find('\n');
    const auto row_end = dev.find('\n', header_end + 1);
    const std::string header = dev.substr(0, header_end);
    std::string row = dev.substr(header_end + 1, row_end - header_end - 1);
    // The layers cell is column 5 of the schema (id, source_group, source, model, layers): replace it.
    std::vector<std::string> cells;
    {
        // Split on commas outside quotes.
        std::string cur;
        bool quoted = false;
        for (char ch : row) {
            if (ch == '"') quoted = !quoted;
            if (ch == ',' && !quoted) {
                cells.push_back(cur);
                cur.clear();
            } else {
                cur += ch;
            }
        }
        cells.push_back(cur);
    }
    REQUIRE(cells.size() > 5);
    cells[4] = "100000000";
    std::string bad;
    for (std::size_t i = 0; i < cells.size(); ++i) bad += (i ? "," : "") + cells[i];
    const auto file = tmp.path() / "rows.csv";
    test::write_text(file, header + "\n" + bad + "\n");
    const auto r = run_trainsim("validate " + q(file), true);
    CHECK(r.rc == 2);
    CHECK_THAT(r.out, Contains("rows.csv:2:5: layers"));
    CHECK_THAT(r.out, Contains("physical range"));
}

TEST_CASE("command-line mistakes get their own message and exit 2", "[hardening][cli]") {
    auto r = run_trainsim("simulat x.yaml", true);
    CHECK(r.rc == 2);
    CHECK_THAT(r.out, Contains("unknown command 'simulat'") && Contains("did you mean 'simulate'"));
    // 7 GPUs: no layout exists (tp must divide the 8-GPU node and the heads, dp the batch) -
    // a request error, not "no plan fits in memory".
    r = run_trainsim("plan --model llama2-7b --gpu h100-sxm --gpus 7 --tokens 1B", true);
    CHECK(r.rc == 2);
    CHECK_THAT(r.out, Contains("no valid layout of 7 GPU(s)"));
    CHECK_THAT(r.out, !Contains("no plan fits in memory"));
    r = run_trainsim("plan --model llama2-7b --gpu h100-sxm --gpus 8 --tokens 1B --max-micro-batch 0", true);
    CHECK(r.rc == 2);
    CHECK_THAT(r.out, Contains("--max-micro-batch"));
}

TEST_CASE("an unclosed quote is pointed at where it opens", "[hardening][loader]") {
    test::ScratchDir tmp;
    const auto file = tmp.path() / "s.yaml";
    // The title's closing quote is missing: YAML lets the value run on to the next quote, which
    // swallows the model and training keys.
    std::string text = "title: \"7B on 8 GPUs\ndescription: \"x\"\n";
    text += scenario("nodes: 1");
    test::write_text(file, text);
    const auto r = run_trainsim("simulate " + q(file), true);
    CHECK(r.rc == 2);
    CHECK_THAT(r.out, Contains("s.yaml:1:8: this quote is not closed on its line"));
}

TEST_CASE("a layout mistake in a shared section is reported once, not once per plan", "[hardening][loader]") {
    test::ScratchDir tmp;
    const auto file = tmp.path() / "s.yaml";
    const std::string text = "model: llama2-7b\n"
                             "training: {tokens: 1B, seq_len: 2048, global_batch: 16, micro_batch: 1}\n"
                             "parallel: {tp: 3}\n"
                             "cluster: {gpu: h100-sxm}\n"
                             "plans:\n"
                             "  - name: a\n"
                             "  - name: b\n"
                             "    precision: fp8\n"
                             "  - name: c\n"
                             "    parallel: {tp: 5}\n";
    test::write_text(file, text);
    const auto r = run_trainsim("simulate " + q(file), true);
    CHECK(r.rc == 2);
    const std::string shared = "tp=3 does not divide the 32 attention heads";
    const auto first = r.out.find(shared);
    REQUIRE(first != std::string::npos);
    CHECK(r.out.find(shared, first + 1) == std::string::npos); // once
    // Plans a and b share it (c writes its own tp): the message names them.
    CHECK_THAT(r.out, Contains("s.yaml:3:12: parallel.tp: in plans 'a', 'b': tp=3 does not divide"));
    CHECK_THAT(r.out, Contains("in plan 'c': tp=5 does not divide"));
}

TEST_CASE("keys lists each enum's values and each number's range", "[hardening][cli]") {
    const auto r = run_trainsim("keys");
    REQUIRE(r.rc == 0);
    CHECK_THAT(r.out, Contains("[one of: none, dist_opt, zero1, zero2, zero3, fsdp, hsdp]"));
    CHECK_THAT(r.out, Contains("[range 1 Gbit/s to 10 Tbit/s"));
}

TEST_CASE("plan --csv leads with rank, name, layout and the contract figures", "[hardening][cli][plan]") {
    const auto r = run_trainsim("plan --model llama2-7b --gpu h100-sxm --gpus 8 --tokens 1B --top 2 --csv --quiet");
    REQUIRE(r.rc == 0);
    const std::string header = r.out.substr(0, r.out.find('\n'));
    CHECK(header.starts_with("rank,recommended,tied_with_best,name,num_gpus,tp,pp,vp,cp,dp,"));
    CHECK(header.find("days_to_train") < header.find("breakdown."));
    CHECK(header.find("cost,") < header.find("breakdown."));
}

TEST_CASE("plan leaves the memory headroom free, and simulate marks a plan inside it as tight",
          "[hardening][plan]") {
    const auto r = run_trainsim("plan --model llama2-7b --gpu a100-sxm-40gb --gpus 8 --tokens 1B --top 50 --json --quiet");
    REQUIRE(r.rc == 0);
    const auto j = nlohmann::json::parse(r.out);
    REQUIRE_FALSE(j["plans"].empty());
    for (const auto& p : j["plans"]) {
        CAPTURE(p["name"]);
        CHECK(p["memory_free_gib"].get<double>() >= 0.05 * p["memory"]["capacity_gib"].get<double>() - 1e-9);
        CHECK_FALSE(p["memory_tight"].get<bool>());
    }
    // With no headroom the search may propose plans the default refuses, never fewer.
    const auto loose =
        run_trainsim("plan --model llama2-7b --gpu a100-sxm-40gb --gpus 8 --tokens 1B --top 50 --json --quiet "
                     "--memory-headroom 0%");
    REQUIRE(loose.rc == 0);
    CHECK(nlohmann::json::parse(loose.out)["search"]["does_not_fit"].get<int>() <=
          j["search"]["does_not_fit"].get<int>());
}

TEST_CASE("an HF config model may carry its own name", "[hardening][loader]") {
    test::ScratchDir tmp;
    test::write_text(tmp.path() / "config.json",
               R"({"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
                   "intermediate_size": 11008, "vocab_size": 32000, "hidden_act": "silu"})");
    const auto file = tmp.path() / "s.yaml";
    test::write_text(file, scenario("nodes: 1").replace(0, std::string("model: llama2-7b").size(),
                                                  "model: {hf_config: config.json, name: \"Our 7B\"}"));
    const auto r = run_trainsim("simulate --json " + q(file));
    REQUIRE(r.rc == 0);
    CHECK_THAT(r.out, Contains("Our 7B"));
}

TEST_CASE("plan says when it uses only the first plan of a file, and --profile says what it replaces",
          "[hardening][cli]") {
    test::ScratchDir tmp;
    const auto file = tmp.path() / "s.yaml";
    test::write_text(file, scenario("nodes: 1") + "plans:\n  - name: first\n  - name: second\n    parallel: {tp: 4}\n");
    const auto r = run_trainsim("plan " + q(file) + " --top 1 --quiet", true);
    CHECK(r.rc == 0);
    CHECK_THAT(r.out, Contains("has 2 plans; plan searches around the first, 'first'"));
    const auto profile = fs::path(TRAINSIM_TEST_DATA_DIR) / "hardware" / "h200-sxm.yaml";
    const auto s = run_trainsim("simulate " + q(file) + " --profile " + q(profile), true);
    CHECK(s.rc == 0);
    CHECK_THAT(s.out, Contains("replaces the GPU (cluster.gpu) of all 2 plans"));
}

TEST_CASE("plan folds plans that differ only in an equivalent sharding into the simplest", "[hardening][plan]") {
    const auto r = run_trainsim("plan --model llama2-7b --gpu h100-sxm --gpus 8 --tokens 1B --top 60 --json --quiet");
    REQUIRE(r.rc == 0);
    const auto j = nlohmann::json::parse(r.out);
    const auto& plans = j["plans"];
    // The space has twins (ZeRO-1 and FSDP under pp > 1 keep the same state): some were folded.
    REQUIRE(j["search"]["folded_equivalent"].get<int>() > 0);
    std::size_t named = 0;
    for (const auto& p : plans) named += p["equivalent_plans"].size();
    CHECK(named == j["search"]["folded_equivalent"].get<std::size_t>());
    const char* layout[] = {"num_gpus", "tp", "pp", "vp", "cp", "dp", "sequence_parallel", "recompute",
                            "recompute_layers", "micro_batch"};
    for (std::size_t a = 0; a < plans.size(); ++a)
        for (std::size_t b = a + 1; b < plans.size(); ++b) {
            bool same = plans[a]["step_time_s"] == plans[b]["step_time_s"] &&
                        plans[a]["memory_per_gpu_gib"] == plans[b]["memory_per_gpu_gib"];
            for (const char* k : layout) same = same && plans[a][k] == plans[b][k];
            CAPTURE(plans[a]["name"], plans[b]["name"]);
            CHECK_FALSE(same); // no twins left
        }
    // The kept member of a folded group is the simplest: zero1 is kept over fsdp, none over both.
    for (const auto& p : plans)
        for (const auto& n : p["equivalent_plans"]) {
            CAPTURE(p["name"], n);
            if (p["sharding"] == "fsdp") CHECK(n.get<std::string>().find("zero1") == std::string::npos);
        }
}

TEST_CASE("a long run shows its progress on a terminal", "[hardening][cli]") {
    test::ScratchDir tmp;
    const auto file = tmp.path() / "many.yaml";
    std::string text = "model: {name: tiny, layers: 2, hidden: 256, heads: 4, ffn: 1024, vocab: 1024}\n"
                       "training: {tokens: 1B, seq_len: 256, global_batch: 8, micro_batch: 1}\n"
                       "cluster: {gpu: h100-sxm, gpus_per_node: 1}\nplans:\n";
    for (int i = 0; i < 60; ++i) text += fmt::format("  - name: p{}\n", i);
    test::write_text(file, text);
    // script(1) gives the command a terminal, as a user at a shell has.
    const std::string cmd = fmt::format("script -qec \"TRAINSIM_DATA_DIR='{}' '{}' simulate '{}' > /dev/null\" /dev/null",
                                        TRAINSIM_TEST_DATA_DIR, TRAINSIM_EXE, file.string());
    std::string out;
    {
        std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
        REQUIRE(pipe);
        std::array<char, 4096> buf{};
        while (std::fgets(buf.data(), buf.size(), pipe.get()) != nullptr) out += buf.data();
    }
    CHECK_THAT(out, Contains("100% 60/60 plans"));
    // Without a terminal (a pipe, CI logs) there is no bar.
    const auto r = run_trainsim("simulate " + q(file), true);
    CHECK(r.rc == 0);
    CHECK_THAT(r.out, !Contains("60/60 plans"));
}

TEST_CASE("an HF config shape beyond the physical range is refused at its field", "[hardening][loader]") {
    test::ScratchDir tmp;
    test::write_text(tmp.path() / "config.json",
               R"({"model_type": "llama", "num_hidden_layers": 100000000, "hidden_size": 4096,
                   "num_attention_heads": 32, "intermediate_size": 11008, "vocab_size": 32000, "hidden_act": "silu"})");
    const auto file = tmp.path() / "s.yaml";
    test::write_text(file, scenario("nodes: 1").replace(0, std::string("model: llama2-7b").size(),
                                                  "model: {hf_config: config.json}"));
    const auto r = run_trainsim("simulate " + q(file), true);
    CHECK(r.rc == 2);
    CHECK_THAT(r.out, Contains("config.json:1:") && Contains("physical range of model.layers"));
}
