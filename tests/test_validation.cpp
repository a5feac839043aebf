// Accuracy against published measurements (issue "Accuracy"): every step row of the dev set is
// simulated, and the error may not rise above what has been reached (a ratchet with a margin).
#include "fixtures.hpp"
#include "scratch_dir.hpp"
#include "trainsim/model/accounting/flops.hpp"
#include "trainsim/model/accounting/memory_model.hpp"
#include "trainsim/model/input/loader.hpp"
#include "trainsim/model/input/validation_set.hpp"
#include "trainsim/sim/run/estimate.hpp"
#include "trainsim/sim/validate/accumulation_split.hpp"
#include "trainsim/sim/validate/validate.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace fs = std::filesystem;

namespace {
// The ratchet: the dev-set figures reached (docs/accuracy.md) plus a small margin. Lower them
// when the model improves; never raise them to let a change through.
constexpr double kMaxMape = 6.4;      // reached 6.6; 6.8 with llm-foundry's fused loss; 6.7 with the PP gather; 6.6 with measured A100 collectives; 6.2 with gradient accumulation passes
constexpr double kMaxMedian = 4.3;    // reached 4.6; 4.8 with the fused loss; 4.6 with the PP gather; 4.0 with gradient accumulation passes
constexpr double kMaxWorstRow = 28.5; // reached 27.3 (row 27)
// The same for the held-out torchtitan rows (tests/data/published-torchtitan.csv): published
// measurements of a stack the dev set does not hold, none used to set a constant.
constexpr double kMaxHeldOutMape = 9.0;   // reached 8.4
constexpr double kMaxHeldOutWorst = 22.5; // reached 21.3 (CP 8 at 262k tokens)
// Held out and not worked on: NeMo's H100 tables outside the dev set (tests/data/published-nemo-h100.csv).
constexpr double kMaxNemoHeldOutMape = 10.0;  // reached 11.8 on 16 rows; 9.5 with 8 rows of NeMo 25.02-26.06
constexpr double kMaxNemoHeldOutWorst = 27.0; // reached 25.6 (LLAMA2-7B at 64k tokens, CP 2)
// The llm-foundry tables' rows outside the dev set (tests/data/published-llm-foundry.csv, 196 rows:
// MPT 125M-70B on 8-512 A100 40GB / 80GB and H100).
constexpr double kMaxFoundryHeldOutMape = 9.6;   // reached 9.3; 9.0 with measured A100 collectives and legacy host costs
constexpr double kMaxFoundryHeldOutWorst = 37.5; // reached 36.2 (MPT-760m on 8 A100 80GB at 512 tokens)
// Other published runs (tests/data/published-other.csv, 36 rows: Llama 3, LLaMA, OPT and MT-NLG
// papers, BLOOM, Nemotron-4 15B, TinyLlama, NVIDIA's MaxText and PAX benchmarks, four whole-run
// totals), mostly of frameworks without a profile: a regression guard, not a target.
// (19.5 when MaxText and PaxML were read as JAX stacks compiled by XLA: PaxML's rows went to
// +21..+36%; not mapped, framework_profile.cpp says why.)
constexpr double kMaxOtherHeldOutMape = 15.8;  // reached 27.1; 18.7 with the generic eager profile for unknown stacks; 17.3 with llm-foundry recipes' recompute (MPT-7B whole run); 16.5 with stragglers in the run model; 15.1 with DeepSpeed's BF16_Optimizer accumulation (BLOOM, MT-NLG)
// The whole-run rows of that file (MPT-7B, SmolLM3-3B, Falcon-7B / 40B): issue #18's target, every
// row within 10%. Reached +16.5% (SmolLM3) with Llama 3's interruption terms alone; 7.0% with
// ByteDance's straggler waste (run.stragglers) and BLOOM's evaluation pauses (run.eval_pauses).
constexpr double kMaxEndToEndWorst = 10.0;
constexpr double kMaxOtherHeldOutWorst = 68.0; // reached 72.1; 66.8 (OPT-175B, metaseq: no profile)
// vTrain's 761 Megatron-DeepSpeed runs on A100 (../shared/validation/vtrain-dev.csv), ratchet only:
// the target is 10%.
// Reached 32.1; 31.9 with the host timeline; 20.6 with the fused-softmax limits, measured A100
// collectives and measured legacy host costs; 17.4 with Megatron-DeepSpeed's per-layer host wait;
// 12.0 with the DGX A100 host CPU's speed (node.host_cpu_speed); 10.9 with the waits at each
// micro-batch's edges and DeepSpeed's per-tensor FP16 optimizer; 10.5 with measured 2- and 4-GPU A100
// all-reduces and autograd's gradient accumulation adds (10.5 with NCCL's algorithm choice on two
// nodes); 10.1 with the cluster vTrain's configuration states (scenarios/validation/clusters.yaml).
constexpr double kMaxVtrainMape = 10.2;
// Its 41 multi-node runs on the cluster vTrain's configuration states (800 Gb/s per node, from
// scenarios/validation/clusters.yaml; before it, `validate --nics-per-node 4 --nic-rate
// 200Gbit/s`): 13.0 with the tree on two nodes, 9.4 with NCCL's tuner choice (the target
// is 10%).
constexpr double kMaxVtrainMultiStatedMape = 9.5;

fs::path dev_set() {
    if (const char* env = std::getenv("TRAINSIM_VALIDATION_CSV"); env != nullptr && *env != '\0') return env;
    return fs::path(TRAINSIM_SOURCE_DIR) / ".." / "shared" / "validation" / "published-dev.csv";
}
// The header and the line of the dev-set row `id`.
std::pair<std::string, std::string> dev_row(const std::string& id) {
    std::ifstream in(dev_set());
    std::string header, line;
    std::getline(in, header);
    while (std::getline(in, line))
        if (line.rfind(id + ",", 0) == 0) return {header, line};
    return {header, ""};
}

// Rows parsed from CSV lines under `header`, through a temporary file.
std::vector<trainsim::model::ValidationRow> load_lines(const std::string& header,
                                                       const std::vector<std::string>& lines,
                                                       const trainsim::model::ValidationCluster& cluster = {}) {
    const auto tmp = fs::temp_directory_path() / ("trainsim-validate-" + std::to_string(::getpid()) + ".csv");
    {
        std::ofstream out(tmp);
        out << header << "\n";
        for (const auto& l : lines) out << l << "\n";
    }
    auto rows = trainsim::model::load_validation_csv(tmp, TRAINSIM_TEST_DATA_DIR, cluster);
    fs::remove(tmp);
    return rows;
}

// The line with its comma-separated cell `index` (0-based) replaced.
std::string with_cell(const std::string& line, std::size_t index, const std::string& value) {
    std::size_t begin = 0;
    for (std::size_t i = 0; i < index; ++i) begin = line.find(',', begin) + 1;
    const auto end = line.find(',', begin);
    return line.substr(0, begin) + value + line.substr(end);
}
} // namespace

TEST_CASE("validate --nics-per-node / --nic-rate: a file's stated cluster replaces the profile's typical node",
          "[validate]") {
    // vTrain's multi-node runs: its configuration gives 800 Gb/s per node (inter_node_bandwidth
    // 800, node_size 8), half a DGX A100's 8 x 200 Gb/s; the schema has no column for it.
    const auto [header, line] = dev_row("2");
    REQUIRE_FALSE(line.empty());
    const auto typical = load_lines(header, {line});
    REQUIRE(typical.size() == 1);
    REQUIRE(typical[0].skip_reason.empty());
    const auto hw = typical[0].plan.hardware;
    CHECK(typical[0].plan.cluster.nics_per_node == hw.default_nics_per_node);
    CHECK(typical[0].plan.cluster.nic_rate.value() == Approx(hw.default_nic_rate.value()));

    trainsim::model::ValidationCluster stated;
    stated.nics_per_node = 4;
    stated.nic_rate = trainsim::model::Bandwidth(200e9 / 8);
    const auto rows = load_lines(header, {line}, stated);
    REQUIRE(rows.size() == 1);
    REQUIRE(rows[0].skip_reason.empty());
    CHECK(rows[0].plan.cluster.nics_per_node == 4);
    CHECK(rows[0].plan.cluster.nic_rate.value() == Approx(25e9));
    CHECK(rows[0].plan.cluster.gpus_per_node == typical[0].plan.cluster.gpus_per_node);  // not stated: the profile's
    CHECK(std::any_of(rows[0].choices.begin(), rows[0].choices.end(),
                      [](const std::string& c) { return c.find("as stated for the file") != std::string::npos; }));

    // GPUs per node stated: the node count follows.
    trainsim::model::ValidationCluster four;
    four.gpus_per_node = 4;
    const auto r4 = load_lines(header, {line}, four);
    REQUIRE(r4.size() == 1);
    CHECK(r4[0].plan.cluster.gpus_per_node == 4);
    CHECK(r4[0].plan.cluster.nodes == 2 * typical[0].plan.cluster.nodes);
}

namespace {
// The header and the first multi-node row of vTrain's file (tp 16 over two nodes or more).
std::pair<std::string, std::string> vtrain_multi_row() {
    std::ifstream in(dev_set().parent_path() / "vtrain-dev.csv");
    std::string header, line;
    std::getline(in, header);
    while (std::getline(in, line))
        if (line.find(",vtrain_multi_node,") != std::string::npos) return {header, line};
    return {header, ""};
}
bool chose(const trainsim::model::ValidationRow& r, const std::string& words) {
    return std::any_of(r.choices.begin(), r.choices.end(),
                       [&](const std::string& c) { return c.find(words) != std::string::npos; });
}
} // namespace

TEST_CASE("validate: the cluster a row's source states (scenarios/validation/clusters.yaml) replaces the profile's "
          "typical node, and the command line wins over it field by field",
          "[validate]") {
    using trainsim::model::kFromCommandLine;
    using trainsim::model::kFromProfile;
    const auto [header, line] = vtrain_multi_row();
    REQUIRE_FALSE(line.empty());
    const auto rows = load_lines(header, {line});
    REQUIRE(rows.size() == 1);
    REQUIRE(rows[0].skip_reason.empty());
    const auto& c = rows[0].plan.cluster;
    // vTrain's src/config.py: inter_node_bandwidth 800 Gbps in total per node, node_size 8.
    CHECK(c.gpus_per_node == 8);
    CHECK(c.nics_per_node * c.nic_rate.value() == Approx(800e9 / 8));
    const auto& from = rows[0].cluster_origin;
    CHECK(from.gpus_per_node.find("clusters.yaml:") != std::string::npos);
    CHECK(from.nics_per_node == from.gpus_per_node);
    CHECK(from.nic_rate == from.gpus_per_node);

    // The command line states the NICs only: its count, the source's rate.
    trainsim::model::ValidationCluster nics;
    nics.nics_per_node = 8;
    const auto over = load_lines(header, {line}, nics);
    REQUIRE(over.size() == 1);
    CHECK(over[0].plan.cluster.nics_per_node == 8);
    CHECK(over[0].plan.cluster.nic_rate.value() == Approx(c.nic_rate.value()));
    CHECK(over[0].cluster_origin.nics_per_node == kFromCommandLine);
    CHECK(over[0].cluster_origin.nic_rate == from.nic_rate);

    // Everything on the command line: nothing is the source's, and the row does not say it is.
    trainsim::model::ValidationCluster all;
    all.gpus_per_node = 8;
    all.nics_per_node = 2;
    all.nic_rate = trainsim::model::Bandwidth(100e9 / 8);
    const auto cli = load_lines(header, {line}, all);
    REQUIRE(cli.size() == 1);
    CHECK(cli[0].plan.cluster.nics_per_node * cli[0].plan.cluster.nic_rate.value() == Approx(200e9 / 8));
    CHECK(cli[0].cluster_origin.gpus_per_node == kFromCommandLine);
    CHECK(cli[0].cluster_origin.nics_per_node == kFromCommandLine);
    CHECK(cli[0].cluster_origin.nic_rate == kFromCommandLine);
    CHECK_FALSE(chose(cli[0], "clusters.yaml"));

    // A source with no entry (SC'21's rows): the profile's typical node.
    const auto [dev_header, sc21] = dev_row("2");
    REQUIRE_FALSE(sc21.empty());
    const auto dev = load_lines(dev_header, {sc21});
    REQUIRE(dev.size() == 1);
    CHECK(dev[0].plan.cluster.nics_per_node == dev[0].plan.hardware.default_nics_per_node);
    CHECK(dev[0].cluster_origin.nics_per_node == kFromProfile);
    CHECK(dev[0].cluster_origin.gpus_per_node == kFromProfile);

    // llm-foundry's A100 tables state 1600 Gb/s per node: the entry says what the A100 profiles'
    // typical node already is (8 x 200 Gb/s), and states no GPUs per node.
    std::ifstream in(dev_set());
    std::string foundry;
    for (std::string l; std::getline(in, l);)
        if (l.find("section 'A100 80GB with 1600 Gbps") != std::string::npos) foundry = l;
    REQUIRE_FALSE(foundry.empty());
    const auto mpt = load_lines(dev_header, {foundry});
    REQUIRE(mpt.size() == 1);
    REQUIRE(mpt[0].skip_reason.empty());
    CHECK(mpt[0].plan.cluster.nics_per_node * mpt[0].plan.cluster.nic_rate.value() == Approx(1600e9 / 8));
    CHECK(mpt[0].plan.cluster.nic_rate.value() == Approx(mpt[0].plan.hardware.default_nic_rate.value()));
    CHECK(mpt[0].plan.cluster.nics_per_node == mpt[0].plan.hardware.default_nics_per_node);
    CHECK(mpt[0].cluster_origin.nics_per_node.find("clusters.yaml:") != std::string::npos);
    CHECK(mpt[0].cluster_origin.gpus_per_node == kFromProfile);
}

TEST_CASE("validate: a clusters file is read strictly, and the longest source prefix wins", "[validate]") {
    trainsim::test::ScratchDir dir;
    const auto file = dir / "clusters.yaml";
    // Its diagnostics, as "line key: message".
    auto problems = [&](const std::string& text) {
        {
            std::ofstream out(file);
            out << text;
        }
        std::vector<std::string> out;
        try {
            (void)trainsim::model::load_source_clusters(file);
        } catch (const trainsim::model::ScenarioError& e) {
            for (const auto& d : e.diagnostics()) {
                CHECK(d.file == file.string());
                out.push_back(fmt::format("{} {}: {}", d.line, d.key, d.message));
            }
        }
        return out;
    };
    using Strings = std::vector<std::string>;
    CHECK(trainsim::model::load_source_clusters(dir / "none.yaml").empty());  // no file: no entries

    const std::string ok = "clusters:\n  - source: A\n    nics_per_node: 4\n    stated: paper, Table 1\n";
    CHECK(problems(ok).empty());
    CHECK(problems("clusters: []\n").empty());
    CHECK(problems("clusters:\n  - source: A\n    nic_rat: 200Gbit/s\n    stated: x\n") ==
          Strings{"3 clusters[0].nic_rat: unknown key 'nic_rat' (did you mean 'nic_rate'?) (known: source, "
                  "gpus_per_node, nics_per_node, nic_rate, stated, assumed)",
                  "2 clusters[0]: states nothing: give gpus_per_node, nics_per_node or nic_rate"});
    CHECK(problems("clusters:\n  - source: A\n    nics_per_node: 4\n") ==
          Strings{"2 clusters[0]: missing 'stated': where the source states its cluster (a fact without its source "
                  "is not taken)"});
    CHECK(problems("clusters:\n  - nics_per_node: 4\n    stated: x\n") ==
          Strings{"2 clusters[0]: missing 'source': the prefix of the rows' source cell"});
    // A wrong value is reported once, as wrong: not also as missing or as stating nothing.
    CHECK(problems("clusters:\n  - source: \"\"\n    nics_per_node: 4\n    stated: x\n") ==
          Strings{"2 clusters[0].source: must not be empty"});
    const auto range = problems("clusters:\n  - source: A\n    nics_per_node: 100\n    stated: x\n");
    REQUIRE(range.size() == 1);
    CHECK(range[0].rfind("3 clusters[0].nics_per_node: ", 0) == 0);
    const auto rate = problems("clusters:\n  - source: A\n    nic_rate: fast\n    stated: x\n");
    REQUIRE(rate.size() == 1);
    CHECK(rate[0].rfind("3 clusters[0].nic_rate: ", 0) == 0);
    // A source given twice, once per later copy; in a list too.
    CHECK(problems(ok + "  - source: A\n    gpus_per_node: 4\n    stated: y\n  - source: A\n    gpus_per_node: 2\n"
                        "    stated: z\n") == Strings{"5 clusters[1]: source 'A' is already given at line 2",
                                                      "8 clusters[2]: source 'A' is already given at line 2"});
    CHECK(problems("clusters:\n  - source: [B, B]\n    nics_per_node: 4\n    stated: x\n") ==
          Strings{"2 clusters[0]: source 'B' is listed twice"});
    CHECK(problems("clusters:\n  - source: []\n    nics_per_node: 4\n    stated: x\n") ==
          Strings{"2 clusters[0].source: an empty list: give at least one prefix"});
    // An entry without a source is no twin of a later one.
    CHECK(problems("clusters:\n  - nics_per_node: 4\n    stated: x\n" + ok.substr(10)) ==
          Strings{"2 clusters[0]: missing 'source': the prefix of the rows' source cell"});
    // Wrong shapes.
    CHECK(problems("clusters:\n  - A\n") == Strings{"2 clusters[0]: expected a map (source, stated and the cluster's "
                                                    "keys), got 'A'"});
    auto ps = problems("clusters:\n");
    REQUIRE(ps.size() == 1);
    CHECK(ps[0].rfind("1 clusters: expected a list of entries", 0) == 0);
    ps = problems("- source: A\n");
    REQUIRE(ps.size() == 1);
    CHECK(ps[0].find("expected a map with the key 'clusters'") != std::string::npos);
    ps = problems("");
    REQUIRE(ps.size() == 1);
    CHECK(ps[0].find("expected a map with the key 'clusters'") != std::string::npos);
    ps = problems("clusters: [\n");
    REQUIRE_FALSE(ps.empty());
    CHECK(ps[0].find("YAML syntax error") != std::string::npos);
    CHECK(problems("cluster:\n  - source: A\n") ==
          Strings{"1 cluster: unknown key 'cluster' (did you mean 'clusters'?)",
                  "1 clusters: missing: the list of sources and their clusters"});

    // Two entries match vTrain's rows; the longer prefix is the one taken, in either order.
    fs::create_directories(dir / "data" / "validation");
    fs::copy(fs::path(TRAINSIM_TEST_DATA_DIR) / "hardware", dir / "data" / "hardware", fs::copy_options::recursive);
    const auto [header, line] = vtrain_multi_row();
    REQUIRE_FALSE(line.empty());
    const auto csv = dir / "rows.csv";
    {
        std::ofstream out(csv);
        out << header << "\n" << line << "\n";
    }
    const std::string longer = "  - source: VIA-Research/vTrain\n    nics_per_node: 2\n    stated: x\n";
    const std::string shorter = "  - source: [Other, VIA-Research]\n    nics_per_node: 1\n    stated: y\n";
    for (const auto& entries : {longer + shorter, shorter + longer}) {
        {
            std::ofstream out(dir / "data" / "validation" / "clusters.yaml");
            out << "clusters:\n" << entries;
        }
        const auto rows = trainsim::model::load_validation_csv(csv, dir / "data");
        REQUIRE(rows.size() == 1);
        CHECK(rows[0].plan.cluster.nics_per_node == 2);
        CHECK(rows[0].plan.cluster.nic_rate.value() == Approx(rows[0].plan.hardware.default_nic_rate.value()));
        CHECK(rows[0].cluster_origin.nic_rate == trainsim::model::kFromProfile);
    }
    // A malformed file stops the load, naming its file, line and key.
    const auto broken = dir / "data" / "validation" / "clusters.yaml";
    {
        std::ofstream out(broken);
        out << "clusters:\n  - source: VIA-Research/vTrain\n    nics_per_node: -1\n    stated: x\n";
    }
    try {
        (void)trainsim::model::load_validation_csv(csv, dir / "data");
        FAIL("a malformed clusters file was accepted");
    } catch (const trainsim::model::ScenarioError& e) {
        REQUIRE(e.diagnostics().size() == 1);
        const auto& d = e.diagnostics().front();
        CHECK(d.file == broken.string());
        CHECK(d.line == 3);
        CHECK(d.key == "clusters[0].nics_per_node");
    }
}

TEST_CASE("error statistics follow their definitions", "[validate]") {
    const auto s = trainsim::sim::error_stats({10.0, -20.0, 5.0, -5.0, 40.0});
    CHECK(s.n == 5);
    CHECK(s.mape == Approx(16.0));   // (10 + 20 + 5 + 5 + 40) / 5
    CHECK(s.median == Approx(10.0)); // sorted |e|: 5 5 10 20 40
    CHECK(s.p90 == Approx(32.0));    // type-7 quantile: 20 + 0.6 * (40 - 20)
    CHECK(s.max == Approx(40.0));
    CHECK(s.bias == Approx(6.0));
    CHECK(s.median_signed == Approx(5.0)); // sorted: -20 -5 5 10 40
}

TEST_CASE("validate --split-accumulation: step = per step + grad_accum x per micro-batch, recovered exactly",
          "[validate]") {
    using trainsim::model::ValidationRow;
    using trainsim::sim::RowResult;
    // Rows of one layout (tp 1, dp 2, micro-batch 2 of 1024 tokens on 2 GPUs: 2048 x grad_accum
    // tokens per GPU per step) whose measured step takes 40 ms + 130 ms per micro-batch and whose
    // simulated step takes 78 + 150 ms: the fit must give back those four numbers.
    std::vector<ValidationRow> rows;
    trainsim::sim::ValidationReport rep;
    const auto add = [&](const std::string& id, int tp, int ga, double measured_s, double simulated_s)
        -> std::pair<ValidationRow&, RowResult&> {
        ValidationRow row;
        row.id = id;
        row.plan.model.name = "m";
        row.plan.model.layers = 12;
        RowResult r;
        r.id = id;
        r.status = "ok";
        r.kind = "step";
        r.source_group = "g";
        r.gpu = "a100-sxm-80gb";
        r.precision = "fp16";
        r.has_step = true;
        r.layout.tp = tp, r.layout.pp = 1, r.layout.vp = 1, r.layout.cp = 1, r.layout.dp = 2;
        r.layout.micro_batch = 2, r.layout.grad_accum = ga, r.layout.gpus = 2 * tp, r.layout.seq_len = 1024;
        r.layout.tokens_per_gpu = 2048.0 * ga / tp;
        r.layout.framework = "megatron-deepspeed";
        r.layout.sharding = "none";
        r.layout.recompute = "full";
        r.measured = r.layout.tokens_per_gpu / measured_s;
        r.step_time_s = simulated_s;
        r.predicted = r.layout.tokens_per_gpu / simulated_s;
        rows.push_back(row);
        rep.rows.push_back(r);
        return {rows.back(), rep.rows.back()};
    };
    const auto measured = [](int ga) { return 0.040 + 0.130 * ga; };
    const auto simulated = [](int ga) { return 0.078 + 0.150 * ga; };
    // A second layout first in the file (tp 2): it must come after tp 1.
    add("t2a", 2, 4, 0.010 + 0.06 * 4, 0.02 + 0.05 * 4);
    add("t2b", 2, 16, 0.010 + 0.06 * 16, 0.02 + 0.05 * 16);
    for (int ga : {8, 2, 4}) add("a" + std::to_string(ga), 1, ga, measured(ga), simulated(ga));
    // Off the line at grad_accum 16, so that taking any of them into the group would move its
    // fit: rows the split must leave out, and rows that differ from the group in one property
    // each (each is a group of one grad_accum, dropped).
    add("blank-mb", 1, 16, 1.0, 1.0).first.micro_batch_blank = true;
    add("blank-recompute", 1, 16, 1.0, 1.0).first.recompute_blank = true;
    add("no-fit", 1, 16, 1.0, 1.0).second.status = "does_not_fit";
    add("whole-run", 1, 16, 1.0, 1.0).second.kind = "end_to_end";
    add("no-step", 1, 16, 1.0, 1.0).second.has_step = false;
    add("nan-step", 1, 16, 1.0, 1.0).second.step_time_s = std::nan("");
    add("zero-measured", 1, 16, 1.0, 1.0).second.measured = 0;
    add("other-id", 1, 16, 1.0, 1.0).second.id = "not-this-row";
    add("model", 1, 16, 1.0, 1.0).first.plan.model.layers = 24;
    add("source", 1, 16, 1.0, 1.0).second.source_group = "h";
    add("gpu", 1, 16, 1.0, 1.0).second.gpu = "a100-sxm-40gb";
    add("precision", 1, 16, 1.0, 1.0).second.precision = "bf16";
    add("framework", 1, 16, 1.0, 1.0).second.layout.framework = "megatron-lm-2021";
    add("micro-batch", 1, 16, 1.0, 1.0).second.layout.micro_batch = 4;
    add("dp", 1, 16, 1.0, 1.0).second.layout.dp = 4;
    add("seq", 1, 16, 1.0, 1.0).second.layout.seq_len = 2048;
    add("sharding", 1, 16, 1.0, 1.0).second.layout.sharding = "zero1";
    add("recompute", 1, 16, 1.0, 1.0).second.layout.recompute = "selective";
    add("sp", 1, 16, 1.0, 1.0).first.plan.parallel.sequence_parallel = true;
    add("tp4", 4, 2, 1.0, 1.0);

    const auto splits = trainsim::sim::split_accumulation(rows, rep);
    REQUIRE(splits.size() == 2);
    const auto& s = splits[0];
    CHECK(s.layout.tp == 1);
    CHECK(s.ids == std::vector<std::string>{"a2", "a4", "a8"});
    CHECK(s.grad_accum == std::vector<int>{2, 4, 8});
    CHECK(s.measured_per_step_s == Approx(0.040).epsilon(1e-9));
    CHECK(s.measured_per_microbatch_s == Approx(0.130).epsilon(1e-9));
    CHECK(s.simulated_per_step_s == Approx(0.078).epsilon(1e-9));
    CHECK(s.simulated_per_microbatch_s == Approx(0.150).epsilon(1e-9));
    CHECK(splits[1].layout.tp == 2);
    CHECK(splits[1].ids == std::vector<std::string>{"t2a", "t2b"});
    CHECK(splits[1].measured_per_step_s == Approx(0.010).epsilon(1e-9));
    CHECK(splits[1].simulated_per_microbatch_s == Approx(0.05).epsilon(1e-9));

    const auto j = trainsim::sim::accumulation_json(splits);
    REQUIRE(j.size() == 2);
    CHECK(j[0].at("per_step_ratio").get<double>() == Approx(0.078 / 0.040));
    CHECK(j[0].at("per_microbatch_ratio").get<double>() == Approx(0.150 / 0.130));
    CHECK(j[0].at("micro_batch").get<int>() == 2);
    CHECK(j[0].at("recompute").get<std::string>() == "full");
    CHECK(j[0].at("sequence_parallel").get<bool>() == false);
}

TEST_CASE("errors grouped by the simulated plan's properties: statistics per group, natural order, cross tables",
          "[validate]") {
    using trainsim::sim::RowResult;
    trainsim::sim::ValidationReport rep;
    auto row = [&](int tp, int mb, double tokens_per_gpu, double err, const char* status = "ok") {
        RowResult r;
        r.status = status;
        r.error_pct = err;
        r.layout.tp = tp;
        r.layout.micro_batch = mb;
        r.layout.tokens_per_gpu = tokens_per_gpu;
        rep.rows.push_back(r);
    };
    row(16, 1, 1024, 40.0);
    row(2, 1, 2048, 10.0);
    row(2, 2, 4096, -20.0);
    row(2, 2, 9000, 5.0, "does_not_fit"); // compared (a memory-model error), so counted
    row(8, 1, 1024, 99.0, "skipped");     // not compared: in no group
    REQUIRE(rep.rows.size() == 5);
    rep.rows[0].features.params = 70e9;
    rep.rows[1].features.params = 1e9; // the edge belongs below
    rep.rows[2].features.params = 1.3e9;
    rep.rows[3].features.params = 7e9;
    const auto by_tp = trainsim::sim::group_errors(rep, "tp");
    REQUIRE(by_tp.size() == 2);
    CHECK(by_tp[0].label == "tp=2"); // numbers ascending, not as text ("16" < "2")
    CHECK(by_tp[0].stats.n == 3);
    CHECK(by_tp[0].stats.mape == Approx((10.0 + 20.0 + 5.0) / 3));
    CHECK(by_tp[0].stats.bias == Approx((10.0 - 20.0 + 5.0) / 3));
    CHECK(by_tp[1].label == "tp=16");
    CHECK(by_tp[1].stats.bias == Approx(40.0));
    const auto cross = trainsim::sim::group_errors(rep, "tp:micro_batch");
    REQUIRE(cross.size() == 3);
    CHECK(cross[0].label == "tp=2 micro_batch=1");
    CHECK(cross[1].label == "tp=2 micro_batch=2");
    CHECK(cross[1].stats.n == 2);
    CHECK(cross[1].stats.bias == Approx(-7.5));
    CHECK(cross[2].label == "tp=16 micro_batch=1");
    // Tokens per GPU per step in factor-of-4 buckets, edges included below.
    const auto by_tokens = trainsim::sim::group_errors(rep, "tokens_per_gpu");
    REQUIRE(by_tokens.size() == 3);
    CHECK(by_tokens[0].label == "tokens_per_gpu=<=2k");
    CHECK(by_tokens[0].stats.n == 2); // 1024 and 2048
    CHECK(by_tokens[1].label == "tokens_per_gpu=2k-8k");
    CHECK(by_tokens[2].label == "tokens_per_gpu=8k-32k");
    CHECK(by_tokens[0].stats.median_signed == Approx(25.0)); // 10 and 40
    const auto by_params = trainsim::sim::group_errors(rep, "params");
    REQUIRE(by_params.size() == 4);
    CHECK(by_params[0].label == "params=<=1B");
    CHECK(by_params[0].stats.n == 1);
    CHECK(by_params[1].label == "params=1-3B");
    CHECK(by_params[2].label == "params=3-10B");
    CHECK(by_params[3].label == "params=30-100B");
    // JSON: the groups in the same order, each key's value typed (a count as a number).
    const auto j = trainsim::sim::groups_json(cross);
    REQUIRE(j.size() == 3);
    CHECK(j[2].at("label") == "tp=16 micro_batch=1");
    CHECK(j[2].at("tp") == 16);
    CHECK(j[2].at("micro_batch") == 1);
    CHECK(j[1].at("n") == 2);
    CHECK(trainsim::sim::groups_json(by_tokens)[1].at("tokens_per_gpu") == "2k-8k");
    CHECK(cross[0].bands.rows == 0); // no band table: no band statistics
    CHECK_FALSE(j[0].contains("band_coverage"));
    // With bands: the share of the group's rows measured inside theirs, and the median width.
    for (auto& x : rep.rows) {
        x.has_band = true;
        x.measured = 100.0;
        x.predicted_p10 = 90.0;
        x.predicted_p90 = x.error_pct > 0 ? 99.0 : 108.0; // only the negative error's row holds 100
    }
    const auto banded = trainsim::sim::group_errors(rep, "tp");
    CHECK(banded[0].bands.rows == 3);
    CHECK(banded[0].bands.coverage == Approx(1.0 / 3.0));
    CHECK(banded[0].bands.median_width == Approx(99.0 / 90.0 - 1.0)); // widths 0.1, 0.1, 0.2
    CHECK(trainsim::sim::groups_json(banded)[0].at("band_coverage").get<double>() == Approx(1.0 / 3.0));
    CHECK_THROWS_WITH(trainsim::sim::group_errors(rep, "tq"), Catch::Contains("did you mean 'tp'"));
    CHECK_THROWS_AS(trainsim::sim::group_errors(rep, "tp:"), std::invalid_argument);
    CHECK_THROWS_WITH(trainsim::sim::group_errors(rep, "tp:micro_batch:tp"), Catch::Contains("'tp' given twice"));
}

TEST_CASE("the published dev set: every step row simulated, MAPE ratchet", "[validate][accuracy]") {
    const auto file = dev_set();
    INFO("dev set: " << file.string() << " (set TRAINSIM_VALIDATION_CSV to move it)");
    REQUIRE(fs::exists(file));
    const auto rows = trainsim::model::load_validation_csv(file, TRAINSIM_TEST_DATA_DIR);
    REQUIRE(rows.size() >= 60);
    const auto rep = trainsim::sim::validate_rows(rows, "step", 2);
    int step_rows = 0;
    for (const auto& r : rep.rows) {
        if (r.kind != "step") continue;
        ++step_rows;
        CAPTURE(r.id, r.reason);
        CHECK(r.status != "skipped");
        // A measured configuration the memory model says does not fit is a memory-model error.
        CHECK(r.status != "does_not_fit");
    }
    CHECK(rep.overall.n == step_rows);
    CHECK(rep.overall.mape <= kMaxMape);
    CHECK(rep.overall.median <= kMaxMedian);
    CHECK(rep.overall.max <= kMaxWorstRow);
}

TEST_CASE("vTrain's Megatron-DeepSpeed runs: every row simulated and fitting, MAPE ratchet", "[validate][accuracy]") {
    const auto file = dev_set().parent_path() / "vtrain-dev.csv";
    REQUIRE(fs::exists(file));
    const auto rows = trainsim::model::load_validation_csv(file, TRAINSIM_TEST_DATA_DIR);
    REQUIRE(rows.size() == 761);
    const auto rep = trainsim::sim::validate_rows(rows, "", 2);
    for (const auto& r : rep.rows) {
        CAPTURE(r.id, r.reason);
        CHECK(r.status == "ok");
    }
    CHECK(rep.overall.n == 761);
    CHECK(rep.overall.mape <= kMaxVtrainMape);
}

TEST_CASE("vTrain's multi-node runs on their stated cluster: MAPE ratchet", "[validate][accuracy]") {
    const auto file = dev_set().parent_path() / "vtrain-dev.csv";
    REQUIRE(fs::exists(file));
    // The cluster from scenarios/validation/clusters.yaml (what vTrain's configuration states).
    auto rows = trainsim::model::load_validation_csv(file, TRAINSIM_TEST_DATA_DIR);
    std::erase_if(rows, [](const trainsim::model::ValidationRow& r) { return r.source_group != "vtrain_multi_node"; });
    REQUIRE(rows.size() == 41);
    const auto rep = trainsim::sim::validate_rows(rows, "", 2);
    CHECK(rep.overall.n == 41);
    CHECK(rep.overall.mape <= kMaxVtrainMultiStatedMape);
}

TEST_CASE("vTrain's stated 800 Gb/s per node: 4 x 200 and 8 x 100 Gb/s NICs give the same step times",
          "[validate][accuracy]") {
    // clusters.yaml assumes the split of vTrain's stated total; NCCL's ring across nodes is bound by
    // the node's total, so the split must not matter on any of the 41 runs.
    const auto file = dev_set().parent_path() / "vtrain-dev.csv";
    REQUIRE(fs::exists(file));
    auto simulate = [&](int nics, double gbit) {
        trainsim::model::ValidationCluster node;
        node.nics_per_node = nics;
        node.nic_rate = trainsim::model::Bandwidth(gbit * 1e9 / 8);
        auto rows = trainsim::model::load_validation_csv(file, TRAINSIM_TEST_DATA_DIR, node);
        std::erase_if(rows,
                      [](const trainsim::model::ValidationRow& r) { return r.source_group != "vtrain_multi_node"; });
        return trainsim::sim::validate_rows(rows, "", 2);
    };
    const auto four = simulate(4, 200), eight = simulate(8, 100);
    REQUIRE(four.rows.size() == 41);
    REQUIRE(eight.rows.size() == four.rows.size());
    for (std::size_t i = 0; i < four.rows.size(); ++i) {
        CAPTURE(four.rows[i].id);
        CHECK(eight.rows[i].step_time_s == Approx(four.rows[i].step_time_s).epsilon(1e-3));
    }
}

namespace {
// Every row of a held-out file simulated and fitting, and its error under the ratchet.
void check_held_out(const std::string& name, std::size_t n, double max_mape, double max_worst) {
    const auto file = fs::path(TRAINSIM_SOURCE_DIR) / "tests" / "data" / name;
    REQUIRE(fs::exists(file));
    const auto rows = trainsim::model::load_validation_csv(file, TRAINSIM_TEST_DATA_DIR);
    REQUIRE(rows.size() == n);
    const auto rep = trainsim::sim::validate_rows(rows, "", 2);
    for (const auto& r : rep.rows) {
        CAPTURE(r.id, r.reason);
        CHECK(r.status == "ok");
    }
    CHECK(rep.overall.n == static_cast<int>(n));
    CHECK(rep.overall.mape <= max_mape);
    CHECK(rep.overall.max <= max_worst);
}
} // namespace

TEST_CASE("held-out torchtitan measurements: every row simulated, MAPE ratchet", "[validate][accuracy]") {
    check_held_out("published-torchtitan.csv", 22, kMaxHeldOutMape, kMaxHeldOutWorst);
}

TEST_CASE("held-out NeMo / Megatron-Bridge H100 measurements: every row simulated, MAPE ratchet",
          "[validate][accuracy]") {
    check_held_out("published-nemo-h100.csv", 24, kMaxNemoHeldOutMape, kMaxNemoHeldOutWorst);
}

TEST_CASE("held-out llm-foundry measurements: every row simulated, MAPE ratchet", "[validate][accuracy]") {
    check_held_out("published-llm-foundry.csv", 196, kMaxFoundryHeldOutMape, kMaxFoundryHeldOutWorst);
}

TEST_CASE("held-out measurements of other stacks: every row simulated, MAPE ratchet", "[validate][accuracy]") {
    check_held_out("published-other.csv", 36, kMaxOtherHeldOutMape, kMaxOtherHeldOutWorst);
}

TEST_CASE("published whole-run totals: every end-to-end row within 10%", "[validate][accuracy][run]") {
    const auto file = fs::path(TRAINSIM_SOURCE_DIR) / "tests" / "data" / "published-other.csv";
    auto rows = trainsim::model::load_validation_csv(file, TRAINSIM_TEST_DATA_DIR);
    std::erase_if(rows, [](const auto& r) { return r.kind != "end_to_end"; });
    REQUIRE(rows.size() == 4);
    const auto rep = trainsim::sim::validate_rows(rows, "", 2);
    for (const auto& r : rep.rows) {
        CAPTURE(r.id, r.predicted, r.measured);
        CHECK(r.status == "ok");
        CHECK(std::abs(r.error_pct) <= kMaxEndToEndWorst);
    }
    REQUIRE(rep.by_kind.contains("end_to_end"));
    CHECK(rep.by_kind.at("end_to_end").n == 4);
}

TEST_CASE("framework profiles follow the release named in the framework column", "[validate]") {
    using trainsim::model::default_recompute;
    using trainsim::model::framework_profile;
    // DeepSpeed fetches a layer's weights module by module (the norm vectors and biases stay
    // gathered). Before 0.6 it reduced every tensor on its own through the list API, synchronised
    // the device around each gather, and its prefetcher and reuse tracking were off by one step.
    for (const char* old : {"deepspeed-2021", "deepspeed-0.5.4"}) {
        CAPTURE(old);
        const auto f = framework_profile(old);
        CHECK(f.parallel.list_collectives);
        CHECK(f.parallel.fsdp_fetch == trainsim::model::FsdpFetch::module);
        CHECK(f.parallel.fsdp_reduce_scatters_per_layer == 12);
        CHECK(f.parallel.fsdp_gather_sync);
        CHECK_FALSE(f.parallel.fsdp_prefetch);
        CHECK(f.parallel.fsdp_reuse_distance_params == 0);
    }
    for (const char* cur : {"deepspeed", "deepspeed-0.14.2", "deepspeed-2024"}) {
        CAPTURE(cur);
        const auto f = framework_profile(cur);
        CHECK_FALSE(f.parallel.list_collectives);
        CHECK(f.parallel.fsdp_fetch == trainsim::model::FsdpFetch::module);
        CHECK(f.parallel.fsdp_reduce_scatters_per_layer == 1);
        CHECK_FALSE(f.parallel.fsdp_gather_sync);
        CHECK(f.parallel.fsdp_prefetch);
        CHECK(f.parallel.fsdp_prefetch_bucket_params == 5e7);
        CHECK(f.parallel.fsdp_reuse_distance_params == 1e9);
    }
    // NeMo 1.x (up to 24.07) syncs BF16 gradients; NeMo 2.0 uses Megatron-Core's FP32 main grads.
    CHECK_FALSE(framework_profile("nemo-24.07").parallel.main_grads_fp32);
    CHECK_FALSE(framework_profile("nemo-23.11").parallel.main_grads_fp32);
    CHECK(framework_profile("nemo-24.09").parallel.main_grads_fp32);
    CHECK(framework_profile("nemo").parallel.main_grads_fp32);
    CHECK(framework_profile("megatron-core-0.8").parallel.main_grads_fp32);
    // NeMo's FP8 performance recipes keep FP8 primary weights; Megatron-Core's default does not.
    CHECK(framework_profile("nemo-24.07").parallel.fp8_params);
    CHECK_FALSE(framework_profile("megatron-core-0.8").parallel.fp8_params);
    // torchtitan: FSDP2 with an FP32 reduce, op-level selective checkpointing, SDPA's
    // FlashAttention-2, foreach AdamW, eager element-wise ops unless compiled.
    const auto tt = framework_profile("torchtitan");
    CHECK(tt.known);
    CHECK(tt.parallel.sharding == trainsim::model::Sharding::fsdp);
    CHECK(tt.parallel.selective_recompute == trainsim::model::SelectiveRecompute::alternate_matmuls);
    CHECK(tt.parallel.attention == trainsim::model::AttentionImpl::flash2);
    CHECK(tt.parallel.fsdp_reduce_fp32);
    CHECK_FALSE(tt.parallel.fused_optimizer);
    CHECK(tt.parallel.elementwise == trainsim::model::Elementwise::eager);
    CHECK(tt.parallel.cross_entropy == trainsim::model::CrossEntropy::pytorch);
    CHECK(framework_profile("nemo").parallel.cross_entropy == trainsim::model::CrossEntropy::megatron);
    // llm-foundry: MPT's default loss is flash-attn's fused kernel; FSDP's SHARD_GRAD_OP gathers
    // in each block's pre-forward, not prefetched (as its FULL_SHARD gathers).
    const auto lf = framework_profile("llm-foundry");
    CHECK(lf.parallel.cross_entropy == trainsim::model::CrossEntropy::fused);
    CHECK_FALSE(lf.parallel.overlap_param_gather);
    CHECK_FALSE(lf.parallel.fsdp_prefetch);
    // Its recipes checkpoint activations from mpt-3b up, not at mpt-1b: MPT shapes (gelu, 4x FFN,
    // vocab 50368) of mpt-1b (24 x 2048, 1.3B parameters) and mpt-3b (32 x 2560, 2.7B).
    auto mpt = [](int layers, int hidden) {
        trainsim::model::ModelArch m;
        m.layers = layers;
        m.hidden = hidden;
        m.heads = m.kv_heads = hidden / 128;
        m.head_dim = 128;
        m.ffn = 4 * hidden;
        m.ffn_type = trainsim::model::FfnType::gelu;
        m.vocab = 50368;
        m.tied_embeddings = true;
        return m;
    };
    CHECK(trainsim::model::count_params(mpt(24, 2048)).total == Approx(1.32e9).epsilon(0.02));
    CHECK(trainsim::model::count_params(mpt(32, 2560)).total == Approx(2.65e9).epsilon(0.02));
    CHECK(default_recompute(lf, mpt(24, 2048)) == trainsim::model::Recompute::none);
    CHECK(default_recompute(lf, mpt(32, 2560)) == trainsim::model::Recompute::full);
    CHECK_FALSE(lf.block_recompute);
    // Other stacks keep one default whatever the size.
    CHECK(default_recompute(framework_profile("nemo"), mpt(32, 2560)) ==
          framework_profile("nemo").parallel.recompute);
    CHECK(framework_profile("torchtitan-compile").parallel.elementwise == trainsim::model::Elementwise::fused);
    CHECK_FALSE(framework_profile("torchtitanic").known);
    CHECK_FALSE(framework_profile("nemotron-trainer").known);
    // A remark after the family name, behind any separator, still names the family.
    const auto remark = framework_profile("llm-foundry/composer (MosaicML platform, 2023)");
    CHECK(remark.known);
    CHECK(remark.parallel.cross_entropy == trainsim::model::CrossEntropy::fused);
    CHECK(framework_profile("DeepSpeed 0.5.4 (ZeRO-3)").precision == trainsim::model::Precision::fp16);
    CHECK(framework_profile("megatron-core").precision == trainsim::model::Precision::bf16);
    for (const auto& family : trainsim::model::framework_families()) {
        CAPTURE(family);
        CHECK(framework_profile(family).known);
        CHECK(framework_profile(family + "-2024.1").known);
    }
    // Spelling: case-blind, '_' and ' ' as '-'.
    CHECK(framework_profile("TorchTitan").parallel.attention == trainsim::model::AttentionImpl::flash2);
    CHECK_FALSE(framework_profile("NeMo 24.07").parallel.main_grads_fp32);
    CHECK(framework_profile("LLM_Foundry").parallel.sharding == trainsim::model::Sharding::fsdp);
}

TEST_CASE("Megatron-DeepSpeed rows run DeepSpeed's pipeline engine and Megatron-LM 2021's model code", "[validate]") {
    // Row 26: GPT-530B on 2240 A100 (tp 8, pp 35, dp 8), the MT-NLG shape. Named
    // megatron-deepspeed with vp (16), sequence_parallel (19), recompute (23) blank and MT-NLG's
    // global batch of 1920 (22).
    const auto [header, row26] = dev_row("26");
    REQUIRE(!row26.empty());
    const auto base = with_cell(with_cell(with_cell(with_cell(row26, 16, ""), 19, ""), 23, ""), 22, "1920");
    const auto rows =
        load_lines(header, {with_cell(base, 25, "megatron-deepspeed-2022"), with_cell(base, 25, "megatron-core")});
    REQUIRE(rows.size() == 2);
    std::vector<std::string> choices;
    const auto ds = trainsim::sim::tune_blank_cells(rows[0], choices);
    // TrainSchedule is plain 1F1B: a blank vp is not tuned to an interleaving.
    CHECK(ds.parallel.vp == 1);
    // --checkpoint-activations: full recompute of every layer, not the fewest that fit.
    CHECK(ds.parallel.recompute == trainsim::model::Recompute::full);
    CHECK(trainsim::model::full_recompute_layers(ds) == ds.model.layers / ds.parallel.pp);
    CHECK_FALSE(ds.parallel.sequence_parallel);
    CHECK(ds.parallel.attention == trainsim::model::AttentionImpl::unfused);
    // ReduceGrads after the last micro-batch; blocking pipeline sends.
    CHECK_FALSE(ds.parallel.overlap_grad_reduce);
    CHECK_FALSE(ds.parallel.overlap_p2p);
    // Its layer code (microsoft/Megatron-DeepSpeed, 2022 on) makes two tensors from Python scalars
    // on the device before each MLP: the host waits for the GPU there. BigScience's fork (BLOOM)
    // and 2021 releases kept Megatron-LM's layer.
    CHECK(ds.parallel.host_sync_layer);
    CHECK(trainsim::model::framework_profile("megatron-deepspeed").parallel.host_sync_layer);
    CHECK_FALSE(trainsim::model::framework_profile("megatron-deepspeed-bigscience-2022").parallel.host_sync_layer);
    CHECK_FALSE(trainsim::model::framework_profile("megatron-deepspeed-2021").parallel.host_sync_layer);
    CHECK_FALSE(trainsim::model::framework_profile("megatron-lm-2021").parallel.host_sync_layer);
    // Every forward starts DeepSpeed's ThroughputTimer (a device synchronize), and its batch comes
    // through Megatron's broadcast_data (blocking copies); Megatron-LM's own 2021-22 schedules wait
    // around each forward and backward (its timers); Megatron-Core does neither.
    using trainsim::model::MicrobatchSync;
    CHECK(ds.parallel.host_sync_microbatch == MicrobatchSync::forward);
    CHECK(ds.parallel.host_sync_batch);
    // ZeRO stage 0 in FP16: DeepSpeed's FP16_Optimizer, tensor by tensor.
    CHECK(ds.parallel.optimizer_per_tensor);
    CHECK_FALSE(trainsim::model::framework_profile("megatron-core").parallel.optimizer_per_tensor);
    for (const char* fw : {"megatron-lm-2021", "megatron-lm-2022"}) {
        CHECK(trainsim::model::framework_profile(fw).parallel.host_sync_microbatch == MicrobatchSync::forward_backward);
        CHECK(trainsim::model::framework_profile(fw).parallel.host_sync_batch);
    }
    CHECK(trainsim::model::framework_profile("megatron-core").parallel.host_sync_microbatch == MicrobatchSync::none);
    CHECK_FALSE(trainsim::model::framework_profile("megatron-core").parallel.host_sync_batch);
    // Written the other way round, it is the same family (not DeepSpeed's ZeRO-3 profile).
    const auto swapped = trainsim::model::framework_profile("DeepSpeed-Megatron");
    CHECK(swapped.known);
    CHECK(swapped.parallel.sharding == trainsim::model::Sharding::none);
    CHECK_FALSE(swapped.tune_blank_vp);
    // The same row as Megatron-Core: the cheapest recompute that fits, as its benchmarks are tuned.
    choices.clear();
    const auto mc = trainsim::sim::tune_blank_cells(rows[1], choices);
    CHECK(mc.parallel.recompute != trainsim::model::Recompute::full);
    CHECK(trainsim::sim::estimate_plan(mc).tokens_per_s_per_gpu >
          trainsim::sim::estimate_plan(ds).tokens_per_s_per_gpu);
}

TEST_CASE("a blank sharding that does not fit a measured run takes the framework's least sharding that fits",
          "[validate][memory]") {
    // GPT 3.6B (h3072, 30 layers) on 8 A100 80GB, tp 1 pp 1, FP16, Megatron-DeepSpeed: at ZeRO
    // stage 0 DeepSpeed's FP16_Optimizer needs 2 + 2 + 12 B per parameter plus the step's 8 B of
    // FP32 gradient copies, more than the GPU holds; ZeRO-1 shards the 12 B of optimizer state.
    const std::string header = "id,source_group,source,model,layers,hidden,heads,kv_heads,ffn,ffn_type,vocab,seq_len,"
                               "gpu,num_gpus,tp,pp,vp,cp,dp,sequence_parallel,sharding,micro_batch,global_batch,"
                               "recompute,precision,framework,kind,tokens_per_s_per_gpu,derivation,notes";
    const std::string line = "r,g,s,GPT 3.6B,30,3072,32,32,12288,gelu,50257,2048,a100-sxm-80gb,8,1,1,,1,8,false,"
                             "SHARDING,1,8,full,fp16,megatron-deepspeed,step,1000,d,n";
    const auto at = [&](const std::string& sharding, const std::string& gpu, const std::string& gpus = "8") {
        auto l = line;
        l.replace(l.find("SHARDING"), 8, sharding);
        l.replace(l.find("a100-sxm-80gb,8,1,1,,1,8"), 24, gpu + "," + gpus + ",1,1,,1," + gpus);
        return l;
    };
    const auto rows = load_lines(header, {at("", "a100-sxm-80gb"), at("none", "a100-sxm-80gb"), at("", "h200-sxm"),
                                          at("", "a100-sxm-80gb", "1")});
    REQUIRE(rows.size() == 4);
    REQUIRE(rows[0].sharding_blank);
    REQUIRE_FALSE(rows[1].sharding_blank);
    const auto& plan0 = rows[0].plan;
    const double P = trainsim::model::stage_memory(plan0, 0).local_params;
    // The closed form the choice rests on: ZeRO-0 needs 24 B per parameter at the step.
    REQUIRE(24.0 * P + plan0.hardware.reserved_memory.value() > plan0.hardware.hbm_capacity.value());
    std::vector<std::string> choices = rows[0].choices;
    const auto chosen = trainsim::sim::tune_blank_cells(rows[0], choices);
    CHECK(chosen.parallel.sharding == trainsim::model::Sharding::zero1);
    CHECK(trainsim::model::fits_in_memory(chosen, trainsim::model::peak_memory(chosen)));
    CHECK(std::count_if(choices.begin(), choices.end(),
                        [](const std::string& c) { return c.starts_with("sharding=zero1 (blank: the least sharding"); }) ==
          1);
    CHECK(std::none_of(choices.begin(), choices.end(),
                       [](const std::string& c) { return c.starts_with("sharding=none"); }));
    // Written in the row, the sharding stays, and the memory model says it does not fit.
    choices = rows[1].choices;
    const auto written = trainsim::sim::tune_blank_cells(rows[1], choices);
    CHECK(written.parallel.sharding == trainsim::model::Sharding::none);
    CHECK_FALSE(trainsim::model::fits_in_memory(written, trainsim::model::peak_memory(written)));
    // On a GPU where ZeRO-0 fits (H200, 141 GB), the framework's default stays.
    REQUIRE(24.0 * P + rows[2].plan.hardware.reserved_memory.value() < rows[2].plan.hardware.hbm_capacity.value());
    choices = rows[2].choices;
    CHECK(trainsim::sim::tune_blank_cells(rows[2], choices).parallel.sharding == trainsim::model::Sharding::none);
    // One data-parallel rank: ZeRO would shard nothing, so the default stays (and does not fit).
    choices = rows[3].choices;
    const auto single = trainsim::sim::tune_blank_cells(rows[3], choices);
    CHECK(single.parallel.dp == 1);
    CHECK(single.parallel.sharding == trainsim::model::Sharding::none);
    CHECK_FALSE(trainsim::model::fits_in_memory(single, trainsim::model::peak_memory(single)));
    // ZeRO-2 is never the fallback: DeepSpeed's pipeline engine, which Megatron-DeepSpeed runs at
    // every pp, asserts a ZeRO stage below 2.
    const auto fallbacks = trainsim::model::framework_profile("megatron-deepspeed").blank_sharding_fallbacks;
    CHECK(fallbacks == std::vector<trainsim::model::Sharding>{trainsim::model::Sharding::zero1});
}

TEST_CASE("a framework profile fills every behaviour the scenario does not write", "[validate]") {
    using namespace trainsim::model;
    // Each copied behaviour is a scenario key...
    const auto& keys = scenario_keys();
    for (auto key : framework_behaviour_keys()) {
        CAPTURE(key);
        CHECK(std::any_of(keys.begin(), keys.end(), [&](const KeySpec& k) { return k.path == key; }));
    }
    // ...copied unless written: DeepSpeed 2021 differs from the defaults in five of them.
    const auto fw = framework_profile("deepspeed-2021");
    Plan plan = trainsim::test::small_plan(1, 1, 8);
    apply_framework_profile(fw, plan, [](std::string_view) { return false; });
    CHECK(plan.parallel.fsdp_fetch == FsdpFetch::module);
    CHECK(plan.parallel.fsdp_reduce_scatters_per_layer == 12);
    CHECK(plan.parallel.list_collectives);
    CHECK(plan.parallel.attention == AttentionImpl::unfused);
    CHECK(plan.parallel.dropout);
    Plan kept = trainsim::test::small_plan(1, 1, 8);
    apply_framework_profile(fw, kept, [](std::string_view k) { return k == "parallel.list_collectives"; });
    CHECK_FALSE(kept.parallel.list_collectives);
    CHECK(kept.parallel.dropout);
}

TEST_CASE("GPU ids and framework names are read case-blind", "[validate]") {
    const auto [header, row40] = dev_row("40"); // Llama-2 7B on 8 H100, NeMo 24.07
    REQUIRE(!row40.empty());
    const auto rows = load_lines(header, {with_cell(with_cell(row40, 12, "H100_SXM"), 25, "NeMo 24.07")}); // 12: gpu
    REQUIRE(rows.size() == 1);
    CHECK(rows[0].skip_reason.empty());
    CHECK(rows[0].plan.hardware.id == "h100-sxm");
    CHECK(rows[0].plan.parallel.tp_comm_overlap == false); // tp = 1: nothing to overlap
    CHECK_FALSE(rows[0].plan.parallel.main_grads_fp32);    // NeMo 1.x gradient sync in BF16
}

TEST_CASE("torchtitan rows run their element-wise ops compiled in FP8 (torchao float8), eager otherwise",
          "[validate]") {
    const auto [header, row40] = dev_row("40"); // Llama-2 7B on 8 H100, FP8
    REQUIRE(!row40.empty());
    const auto tt = with_cell(with_cell(row40, 25, "torchtitan"), 20, ""); // 25: framework, 20: sharding
    const auto rows = load_lines(header, {tt, with_cell(tt, 24, "bf16")}); // 24: precision
    REQUIRE(rows.size() == 2);
    for (const auto& r : rows) {
        CHECK(r.plan.parallel.sharding == trainsim::model::Sharding::fsdp);
        CHECK(r.plan.parallel.attention == trainsim::model::AttentionImpl::flash2);
    }
    CHECK(rows[0].plan.parallel.elementwise == trainsim::model::Elementwise::fused);
    CHECK(rows[1].plan.parallel.elementwise == trainsim::model::Elementwise::eager);
    // A blank micro-batch is torchtitan's default: the rank's whole batch at once without
    // pipelining (21: micro_batch, 22: global_batch; 16 sequences over dp 8).
    const auto blank = load_lines(header, {with_cell(with_cell(tt, 21, ""), 22, "16")});
    REQUIRE(blank.size() == 1);
    std::vector<std::string> choices;
    const auto tuned = trainsim::sim::tune_blank_cells(blank[0], choices);
    CHECK(tuned.training.micro_batch == 2);
}

TEST_CASE("end-to-end rows: the steady throughput over the run model's checkpoint and failure factor",
          "[validate][run]") {
    // Row 35 of the dev set (GPT-462B on 6144 H100, 768 nodes) as a step row and as an end-to-end
    // row. By hand, with the default run settings (Llama 3, Dubey et al. 2024, Sec. 3.3.4 and
    // Table 5): checkpoint delta = P x 14 B / (5 GB/s x 768 nodes); unplanned stops from 331 GPU and
    // software interruptions per 16,384 GPUs and 88 host ones per 2,048 nodes in 54 days:
    // 1/M = 6144 x 331 / (16384 x 1296 h) + 768 x 88 / (2048 x 1296 h) (= 419 x 0.375 / 1296 h);
    // planned stops 47 per 54 days; tau = sqrt(2 delta M); restart R = 1020 s; stretch 1.01 (diurnal)
    // + 0.104 / 0.896 (ByteDance's straggler waste) + 0.007 (BLOOM's evaluations); factor = stretch x
    // (1 + delta/tau + tau/(2M) + R (1/M + 47 / 54 d)).
    const auto [header, row35] = dev_row("35");
    REQUIRE(!row35.empty());
    const auto rows = load_lines(header, {row35, with_cell(row35, 26, "end_to_end")}); // 26: kind
    REQUIRE(rows.size() == 2);
    const auto rep = trainsim::sim::validate_rows(rows, "", 1);
    REQUIRE(rep.rows.at(0).status == "ok");
    REQUIRE(rep.rows.at(1).status == "ok");
    CHECK(rep.rows.at(1).kind == "end_to_end");

    const double params = trainsim::model::count_params(rows.at(0).plan.model).total;
    const double delta = params * 14.0 / (5e9 * 768);
    const double M = 3600.0 / (6144 * 331.0 / (16384 * 1296.0) + 768 * 88.0 / (2048 * 1296.0));
    const double tau = std::sqrt(2.0 * delta * M);
    const double planned = 47.0 / (54.0 * 86400);
    const double stretch = 1.01 + 0.104 / 0.896 + 0.007;
    const double factor = stretch * (1.0 + delta / tau + tau / (2.0 * M) + 1020.0 * (1.0 / M + planned));
    CHECK(factor > 1.13);
    CHECK(rep.rows.at(1).predicted == Approx(rep.rows.at(0).predicted / factor).epsilon(1e-3));
    CHECK(rep.by_kind.contains("end_to_end"));
    CHECK(rep.by_kind.at("end_to_end").n == 1);
}

TEST_CASE("NeMo rows keep FP8 primary weights only in FP8", "[validate]") {
    const auto [header, row42] = dev_row("42"); // Llama-2 70B, NeMo 24.07, FP8
    REQUIRE(!row42.empty());
    const auto rows = load_lines(header, {row42, with_cell(row42, 24, "bf16")}); // 24: precision
    REQUIRE(rows.size() == 2);
    CHECK(rows[0].plan.parallel.fp8_params);
    CHECK_FALSE(rows[1].plan.parallel.fp8_params);
    CHECK(rows[1].skip_reason.empty());
    // Nor under per-layer sharding, which does not carry them (20: sharding).
    const auto fsdp = load_lines(header, {with_cell(row42, 20, "fsdp")});
    REQUIRE(fsdp.size() == 1);
    CHECK_FALSE(fsdp[0].plan.parallel.fp8_params);
}

TEST_CASE("a blank degree is derived from the GPU count when it is the only one", "[validate]") {
    // Row 42: Llama-2 70B on 64 GPUs, tp 4 pp 4 dp 4. Blank tp with pp, cp and dp given: 64 / 16.
    const auto [header, row42] = dev_row("42");
    REQUIRE(!row42.empty());
    const auto rows = load_lines(header, {with_cell(row42, 14, "")}); // 14: tp, 15: pp
    REQUIRE(rows.size() == 1);
    CHECK(rows[0].skip_reason.empty());
    CHECK(rows[0].plan.parallel.tp == 4);
    CHECK(std::find(rows[0].choices.begin(), rows[0].choices.end(), "tp=4 (blank: the GPUs the other degrees leave)") !=
          rows[0].choices.end());
    // Two blank degrees cannot both follow: they stay 1, and the layout rules then reject the row.
    const auto two = load_lines(header, {with_cell(with_cell(row42, 14, ""), 15, "")});
    REQUIRE(two.size() == 1);
    CHECK(two[0].plan.parallel.tp == 1);
    CHECK(two[0].plan.parallel.pp == 1);
    CHECK(two[0].defaulted_degrees == std::vector<std::string>{"tp", "pp"});
    // A blank cp does not compete with a blank pp: cp stays 1 and pp follows (64 / (4 * 4)).
    const auto pp_cp = load_lines(header, {with_cell(with_cell(row42, 15, ""), 17, "")}); // 17: cp
    REQUIRE(pp_cp.size() == 1);
    CHECK(pp_cp[0].plan.parallel.pp == 4);
    CHECK(pp_cp[0].plan.parallel.cp == 1);
    CHECK(pp_cp[0].defaulted_degrees.empty());
}

TEST_CASE("blank heads, ffn and precision take the conventions and the framework's default, said", "[validate]") {
    // Row 1: GPT-1.7B (hidden 2304, 24 heads of 96, ffn 9216 = 4h), Megatron-LM 2021 in FP16.
    // Row 42: Llama-2 70B (hidden 8192, 64 heads of 128, SwiGLU), NeMo 24.07 in FP8.
    // Columns: 6: heads, 7: kv_heads, 8: ffn, 24: precision.
    const auto [header, row1] = dev_row("1");
    const auto [header42, row42] = dev_row("42");
    REQUIRE(!row1.empty());
    REQUIRE(!row42.empty());
    const auto rows = load_lines(header, {with_cell(with_cell(with_cell(with_cell(row1, 6, ""), 7, ""), 8, ""), 24, ""),
                                          with_cell(with_cell(row42, 8, ""), 24, "")});
    REQUIRE(rows.size() == 2);
    for (const auto& r : rows) CHECK(r.skip_reason.empty());
    // 2304 / 128 heads; Megatron-LM's 4h for a 2-matrix MLP; the SC'21 runs' FP16.
    CHECK(rows[0].plan.model.heads == 18);
    CHECK(rows[0].plan.model.head_dim == 128);
    CHECK(rows[0].plan.model.ffn == 4 * 2304);
    CHECK(rows[0].plan.precision == trainsim::model::Precision::fp16);
    // SwiGLU: two thirds of 4h rounded down to a multiple of 64 (21845 -> 21824); NeMo: BF16.
    CHECK(rows[1].plan.model.ffn == 21824);
    CHECK(rows[1].plan.precision == trainsim::model::Precision::bf16);
    auto said = [](const trainsim::model::ValidationRow& r, const std::string& what) {
        return std::any_of(r.choices.begin(), r.choices.end(),
                           [&](const std::string& c) { return c.starts_with(what); });
    };
    CHECK(said(rows[0], "heads=18 (blank"));
    CHECK(said(rows[0], "ffn=9216 (blank"));
    CHECK(said(rows[0], "precision=fp16 (blank"));
    CHECK(said(rows[1], "precision=bf16 (blank"));
}

TEST_CASE("a global batch that is no whole number of micro-batches per rank is simulated at the nearest that is",
          "[validate]") {
    // Row 93: MPT-7b on 8 H100, micro-batch 6, global batch 48 (22: global_batch). 50 and 20 are
    // not multiples of 6 x 8: the nearest multiple, at least one micro-batch per rank.
    const auto [header, row93] = dev_row("93");
    REQUIRE(!row93.empty());
    const auto rows = load_lines(header, {with_cell(row93, 22, "50"), with_cell(row93, 22, "20"), row93});
    REQUIRE(rows.size() == 3);
    CHECK(rows[0].plan.training.global_batch == 48);
    CHECK(rows[1].plan.training.global_batch == 48);
    CHECK(rows[2].plan.training.global_batch == 48);
    CHECK(std::find(rows[0].choices.begin(), rows[0].choices.end(),
                    "global_batch=48 (written 50: not a whole number of micro-batches of 6 on 8 data-parallel ranks; "
                    "the nearest that is)") != rows[0].choices.end());
    const auto rep = trainsim::sim::validate_rows(rows, "", 1);
    CHECK(rep.skipped == 0);
    CHECK(rep.rows[0].predicted == Approx(rep.rows[2].predicted));
}

TEST_CASE("spreadsheet habits are read as the schema means them: BOM, CRLF, padded cells, case", "[validate]") {
    // Row 42 (Llama-2 70B, NeMo 24.07, FP8, SP on) written as a spreadsheet export would: a UTF-8
    // byte-order mark, CRLF line ends, padded cells, "FP8", "True", "Step", "Dist-Opt".
    const auto [header, row42] = dev_row("42");
    REQUIRE(!row42.empty());
    const auto padded = with_cell(
        with_cell(with_cell(with_cell(with_cell(row42, 24, " FP8 "), 19, "True"), 26, "Step"), 20, "Dist-Opt"), 14,
        " 4");
    const auto tmp = fs::temp_directory_path() / ("trainsim-validate-bom-" + std::to_string(::getpid()) + ".csv");
    {
        std::ofstream out(tmp, std::ios::binary);
        out << "\xEF\xBB\xBF" << header << "\r\n" << padded << "\r\n" << row42 << "\r\n";
    }
    const auto rows = trainsim::model::load_validation_csv(tmp, TRAINSIM_TEST_DATA_DIR);
    fs::remove(tmp);
    REQUIRE(rows.size() == 2);
    CHECK(rows[0].skip_reason.empty());
    CHECK(rows[0].id == "42");
    CHECK(rows[0].kind == "step");
    CHECK(rows[0].plan.precision == rows[1].plan.precision);
    CHECK(rows[0].plan.parallel.sequence_parallel == rows[1].plan.parallel.sequence_parallel);
    CHECK(rows[0].plan.parallel.sharding == trainsim::model::Sharding::dist_opt);
    CHECK(rows[0].plan.parallel.tp == rows[1].plan.parallel.tp);
    // A sequence_parallel cell that is neither true nor false stops the file at its cell.
    try {
        (void)load_lines(header, {with_cell(row42, 19, "maybe")});
        FAIL("expected a ScenarioError");
    } catch (const trainsim::model::ScenarioError& e) {
        REQUIRE(e.diagnostics().size() == 1);
        CHECK(e.diagnostics()[0].key == "sequence_parallel");
        CHECK(e.diagnostics()[0].col == 20);
    }
    // A sharding that is none of the schema's words is taken as blank (the framework's default,
    // open to the blank-sharding fallback), and the row's choices say so.
    const auto annotated = load_lines(header, {with_cell(row42, 20, "\"zero1 (ds_config stage 1)\""),
                                               with_cell(row42, 20, "zero1"), with_cell(row42, 20, "")});
    REQUIRE(annotated.size() == 3);
    CHECK(annotated[0].sharding_blank);
    CHECK(annotated[0].plan.parallel.sharding == annotated[2].plan.parallel.sharding);
    CHECK(std::any_of(annotated[0].choices.begin(), annotated[0].choices.end(), [](const std::string& c) {
        return c.find("'zero1 (ds_config stage 1)' is none of") != std::string::npos;
    }));
    CHECK_FALSE(annotated[1].sharding_blank);
    CHECK(annotated[1].plan.parallel.sharding == trainsim::model::Sharding::zero1);
    CHECK(annotated[2].sharding_blank);
}

TEST_CASE("a zero, negative or fractional count stops the file at its cell instead of crashing", "[validate]") {
    // 13: num_gpus, 14: tp, 4: layers, 21: micro_batch, 27: tokens_per_s_per_gpu.
    const auto [header, row42] = dev_row("42");
    REQUIRE(!row42.empty());
    const std::vector<std::tuple<std::size_t, std::string, std::string>> bad{{13, "0", "num_gpus"},
                                                                             {14, "-2", "tp"},
                                                                             {4, "2.5", "layers"},
                                                                             {21, "1.5", "micro_batch"},
                                                                             {27, "0", "tokens_per_s_per_gpu"}};
    for (const auto& [index, value, key] : bad) {
        CAPTURE(key, value);
        try {
            (void)load_lines(header, {with_cell(row42, index, value)});
            FAIL("expected a ScenarioError");
        } catch (const trainsim::model::ScenarioError& e) {
            REQUIRE(e.diagnostics().size() == 1);
            CHECK(e.diagnostics()[0].key == key);
            CHECK(e.diagnostics()[0].line == 2);
            CHECK(e.diagnostics()[0].col == static_cast<int>(index) + 1);
        }
    }
}

TEST_CASE("a row whose blanks leave it unsimulable is skipped with the reason, the file still read", "[validate]") {
    const auto [header, row42] = dev_row("42");
    REQUIRE(!row42.empty());
    // 5: hidden, 9: ffn_type (architecture the simulation needs). 13/14/15/18: Llama-2 70B on 8
    // GPUs with tp, pp and dp blank: no layout of 8 GPUs holds it, so the degrees stay at the
    // default 1 and the row is skipped saying so.
    const auto rows =
        load_lines(header, {with_cell(row42, 5, ""), with_cell(row42, 9, ""),
                            with_cell(with_cell(with_cell(with_cell(row42, 13, "8"), 14, ""), 15, ""), 18, ""), row42});
    REQUIRE(rows.size() == 4);
    CHECK(rows[0].skip_reason == "blank hidden: the simulation needs it (the source does not say)");
    CHECK(rows[1].skip_reason == "blank ffn_type: the simulation needs it (the source does not say)");
    const auto rep = trainsim::sim::validate_rows(rows, "", 1);
    CHECK(rep.rows[2].status == "skipped");
    CHECK_THAT(rep.rows[2].reason, Catch::Contains("blank tp, pp: no layout fits"));
    CHECK(rep.rows[3].status == "ok");
    CHECK(rep.skipped == 3);
    CHECK(rep.does_not_fit == 0);
    // Blank tp and dp (14/18/19) on the row's 64 GPUs: the least model parallelism that fits,
    // TP first: no smaller tp x pp fits with micro-batch 1 and full recompute.
    const auto open = load_lines(header, {with_cell(with_cell(with_cell(row42, 14, ""), 18, ""), 19, "")});
    std::vector<std::string> choices;
    const auto chosen = trainsim::sim::tune_blank_cells(open.at(0), choices);
    CHECK(trainsim::sim::estimate_plan(chosen).fits);
    CHECK(chosen.parallel.pp == 4); // given
    CHECK(chosen.parallel.tp * chosen.parallel.pp * chosen.parallel.dp == 64);
    for (int tp = 1; tp < chosen.parallel.tp; tp *= 2) {
        auto smaller = chosen;
        smaller.parallel.tp = tp;
        smaller.parallel.dp = 64 / (tp * 4);
        smaller.parallel.sequence_parallel = tp > 1;
        smaller.parallel.tp_comm_overlap = tp > 1;
        smaller.training.micro_batch = 1;
        smaller.parallel.recompute = trainsim::model::Recompute::full;
        smaller.parallel.recompute_layers = 0;
        smaller.parallel.vp = 1;
        CAPTURE(tp);
        CHECK_FALSE(trainsim::sim::estimate_plan(smaller).fits);
    }
    CHECK(std::any_of(choices.begin(), choices.end(), [](const std::string& c) {
        return c.find("(blank tp: the least model parallelism that fits, TP first)") != std::string::npos;
    }));
    // The blank sequence_parallel (19) is reported as the chosen tp leaves it, once.
    REQUIRE(chosen.parallel.tp > 1);
    CHECK(chosen.parallel.sequence_parallel);
    CHECK(std::count_if(choices.begin(), choices.end(),
                        [](const std::string& c) { return c.starts_with("sequence_parallel="); }) == 1);
    CHECK(std::any_of(choices.begin(), choices.end(), [&](const std::string& c) {
        return c.starts_with("sequence_parallel=true (blank:") &&
               c.ends_with("at tp=" + std::to_string(chosen.parallel.tp) + ")");
    }));
    // 26: kind. Blank is a step row; a kind outside the schema is skipped, naming it.
    const auto kinds = load_lines(header, {with_cell(row42, 26, ""), with_cell(row42, 26, "weird")});
    REQUIRE(kinds.size() == 2);
    CHECK(kinds[0].kind == "step");
    CHECK(kinds[0].skip_reason.empty());
    CHECK(kinds[1].skip_reason == "kind 'weird' is not one of step, end_to_end");
}
