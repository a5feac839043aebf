// The one strict loader: every mistake a user can make is reported at its file:line:col with its
// key path, all of them together. Each test builds its own presets and profiles in a scratch
// directory (the shipped data in scenarios/ is only read by the [data] test at the end).
//
// Line and column numbers are written down by counting in the YAML text of the test (1-based).
#include "trainsim/model/input/loader.hpp"
#include "trainsim/model/input/profile_io.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>

namespace fs = std::filesystem;
using namespace trainsim::model;
using Catch::Matchers::Contains;

namespace {

// A scratch directory with a data dir layout (models/, hardware/), removed afterwards.
class TempDir {
public:
    TempDir() {
        std::random_device rd;
        path_ = fs::temp_directory_path() / fmt::format("trainsim-loader-test-{:08x}{:08x}", rd(), rd());
        fs::create_directories(path_ / "models");
        fs::create_directories(path_ / "hardware");
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    [[nodiscard]] const fs::path& path() const { return path_; }

    fs::path write(const std::string& relative, const std::string& text) const {
        fs::path file = path_ / relative;
        fs::create_directories(file.parent_path());
        std::ofstream out(file, std::ios::binary);
        out << text;
        REQUIRE(out.good());
        return file;
    }

private:
    fs::path path_;
};

// 1-based line and column of the first occurrence of `needle` in `text`.
std::pair<int, int> position_of(const std::string& text, const std::string& needle) {
    const auto pos = text.find(needle);
    REQUIRE(pos != std::string::npos);
    const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(pos), '\n');
    const auto line_start = text.rfind('\n', pos);
    const auto col = line_start == std::string::npos ? pos + 1 : pos - line_start;
    return {static_cast<int>(line), static_cast<int>(col)};
}

std::string replace(std::string text, const std::string& from, const std::string& to) {
    const auto pos = text.find(from);
    REQUIRE(pos != std::string::npos);
    return text.replace(pos, from.size(), to);
}

// An H100-like profile (fp8 supported) or an A100-like one (fp8 unsupported, with the reason).
std::string profile_yaml(const std::string& id, bool fp8) {
    std::string peaks = fp8 ? "    bf16: {value: \"989.4 TFLOP/s\", source: \"datasheet\"}\n"
                              "    fp8: {value: \"1978.9 TFLOP/s\", source: \"datasheet\"}\n"
                            : "    bf16: {value: \"312 TFLOP/s\", source: \"datasheet\"}\n";
    std::string unsupported =
        fp8 ? "" : "  unsupported:\n    fp8: \"Ampere (sm_80) tensor cores have no FP8 data path\"\n";
    return "id: " + id + "\n" + "name: \"Test GPU " + id + "\"\n" +
           "provenance: datasheet+published\n"
           "compute:\n"
           "  sm_count: {value: 132, source: \"fixture\"}\n"
           "  dense_peak:\n" +
           peaks + unsupported +
           "  gemm_efficiency:\n"
           "    bf16: {value: 0.75, source: \"fixture\"}\n" +
           (fp8 ? "    fp8: {value: 0.7, source: \"fixture\"}\n" : "") + // 0.7: the value it read before it was required
           "  gemm_tile: {value: [128, 256], source: \"fixture\"}\n"
           "  attention_efficiency:\n"
           "    fwd: {value: 0.55, source: \"fixture\"}\n"
           "    bwd: {value: 0.45, source: \"fixture\"}\n"
           "  kernel_overhead: {value: \"4 us\", source: \"fixture\"}\n"
           "memory:\n"
           "  hbm_capacity: {value: \"80 GiB\", source: \"fixture\"}\n"
           "  hbm_bandwidth: {value: \"3.35 TB/s\", source: \"fixture\"}\n"
           "  hbm_efficiency: {value: 0.85, source: \"fixture\"}\n"
           "  reserved: {value: \"3 GiB\", source: \"fixture\"}\n"
           "interconnect:\n"
           "  nvlink_bandwidth: {value: \"450 GB/s\", source: \"fixture\"}\n"
           "  nvlink_efficiency: {value: 0.82, source: \"fixture\"}\n" +
           (fp8 ? "  nvls: {value: true, source: \"fixture\"}\n"
                  "  nvls_efficiency: {value: 1.05, source: \"fixture\"}\n"
                : "") +
           "  pcie_bandwidth: {value: \"64 GB/s\", source: \"fixture\"}\n"
           "  pcie_efficiency: {value: 0.8, source: \"fixture\"}\n"
           "  intra_node_latency: {value: \"8 us\", source: \"fixture\"}\n"
           "  inter_node_latency: {value: \"20 us\", source: \"fixture\"}\n"
           "  nic_efficiency: {value: 0.92, source: \"fixture\"}\n"
           "overlap:\n"
           "  comm_compute_slowdown: {value: 0.1, source: \"fixture\"}\n"
           "node:\n"
           "  gpus_per_node: {value: 8, source: \"fixture\"}\n";
}

// A 4-layer GQA model: 8 heads, 4 KV heads, head_dim 32.
const std::string kTinyPreset = R"(id: tiny
name: Tiny
source: "test fixture"
layers: 4
hidden: 256
heads: 8
kv_heads: 4
ffn: 704
ffn_type: swiglu
vocab: 1000
tied_embeddings: false
)";

const std::string kLlamaConfig = R"({
  "_name_or_path": "test/llama-mini",
  "model_type": "llama",
  "num_hidden_layers": 6,
  "hidden_size": 512,
  "num_attention_heads": 8,
  "num_key_value_heads": 2,
  "intermediate_size": 1376,
  "vocab_size": 32000,
  "hidden_act": "silu",
  "tie_word_embeddings": true
}
)";

// A data dir with the tiny preset and two GPUs: gpu-fp8 (H100-like) and gpu-bf16 (A100-like).
struct Fixture {
    TempDir dir;
    LoadOptions opts;
    Fixture() {
        dir.write("models/tiny.yaml", kTinyPreset);
        dir.write("hardware/gpu-fp8.yaml", profile_yaml("gpu-fp8", true));
        dir.write("hardware/gpu-bf16.yaml", profile_yaml("gpu-bf16", false));
        opts.data_dir = dir.path();
    }
    [[nodiscard]] std::string scenario_name() const { return (dir.path() / "s.yaml").string(); }

    Scenario load(const std::string& yaml) const { return load_scenario_text(yaml, scenario_name(), opts); }

    // The diagnostics of a scenario that must fail.
    std::vector<Diagnostic> errors(const std::string& yaml) const {
        try {
            (void)load(yaml);
        } catch (const ScenarioError& e) {
            return e.diagnostics();
        }
        FAIL("expected a ScenarioError");
        return {};
    }
};

std::string listing(const std::vector<Diagnostic>& ds) {
    std::string s;
    for (const auto& d : ds) s += "\n  " + d.format();
    return s;
}

// The diagnostic with `key` whose message contains `fragment`.
Diagnostic find(const std::vector<Diagnostic>& ds, const std::string& key, const std::string& fragment = "") {
    for (const auto& d : ds)
        if (d.key == key && d.message.find(fragment) != std::string::npos) return d;
    FAIL("no diagnostic for key '" << key << "' containing '" << fragment << "' in:" << listing(ds));
    return {};
}

void check_at(const Diagnostic& d, int line, int col, const std::string& fragment) {
    INFO(d.format());
    CHECK(d.line == line);
    CHECK(d.col == col);
    CHECK_THAT(d.message, Contains(fragment));
}

// A valid scenario: lines 1-7.
const std::string kBase = R"(model: tiny
training:
  tokens: 1B
  seq_len: 1024
  global_batch: 64
cluster:
  gpu: gpu-fp8
)";

} // namespace

// ---------------------------------------------------------------------------------------------
// Mistakes, one by one

TEST_CASE("unknown key: named, located and the closest known key suggested", "[loader]") {
    Fixture fx;
    auto ds = fx.errors(kBase + "parallel:\n  tpp: 2\n");
    REQUIRE(ds.size() == 1);
    CHECK(ds[0].file == fx.scenario_name());
    CHECK(ds[0].key == "parallel.tpp");
    check_at(ds[0], 9, 3, "unknown key 'tpp' (did you mean 'tp'?)");
}

TEST_CASE("unknown top-level key: suggests the section it belongs in", "[loader]") {
    Fixture fx;
    auto ds = fx.errors(kBase + "tp: 2\n");
    REQUIRE(ds.size() == 1);
    CHECK(ds[0].key == "tp");
    check_at(ds[0], 8, 1, "unknown key 'tp' (did you mean 'parallel.tp'?)");
}

TEST_CASE("missing unit on a bandwidth", "[loader]") {
    Fixture fx;
    auto ds = fx.errors(kBase + "  nic_rate: 400\n");
    REQUIRE(ds.size() == 1);
    CHECK(ds[0].key == "cluster.nic_rate");
    check_at(ds[0], 8, 13, "'400' has no unit");
}

TEST_CASE("energy section: values, defaults, and a PUE below 1 refused at its place", "[loader][energy]") {
    Fixture fx;
    // Absent: PUE 1 (IT power only), no price, the pricing currency, no grid intensity.
    const Plan plain = fx.load(kBase).plans.at(0);
    CHECK(plain.energy.pue == 1.0);
    CHECK_FALSE(plain.energy.price_per_kwh);
    CHECK_FALSE(plain.energy.currency);
    CHECK_FALSE(plain.energy.grid_g_co2_per_kwh);
    const Plan owned =
        fx.load(kBase + "energy:\n  pue: 1.4\n  price: 0.7\n  currency: CNY\n  grid_intensity: 581\n").plans.at(0);
    CHECK(owned.energy.pue == 1.4);
    CHECK(owned.energy.price_per_kwh == 0.7);
    CHECK(owned.energy.currency == std::string("CNY"));
    CHECK(owned.energy.grid_g_co2_per_kwh == 581.0);
    // Lines 8-10 after kBase's 7.
    auto ds = fx.errors(kBase + "energy:\n  pue: 0.5\n  grid_intensity: -3\n");
    REQUIRE(ds.size() == 2);
    for (const auto& d : ds) CHECK(d.file == fx.scenario_name());
    check_at(find(ds, "energy.pue"), 9, 8, "'0.5' is outside the physical range of energy.pue: 1 to 3");
    CHECK(find(ds, "energy.grid_intensity").line == 10);
    auto typo = fx.errors(kBase + "energy:\n  pue_: 1.2\n");
    REQUIRE(typo.size() == 1);
    check_at(typo[0], 9, 3, "unknown key 'pue_' (did you mean 'pue'?)");
}

TEST_CASE("profile power section: optional, all or nothing, idle <= comm-busy <= compute-busy", "[loader][profile]") {
    Fixture fx;
    const std::string base = profile_yaml("gpu-p", true);
    // Without it the profile loads and has no power.
    fx.dir.write("hardware/gpu-p.yaml", base);
    CHECK_FALSE(load_profile(fx.dir.path() / "hardware" / "gpu-p.yaml").has_power());
    const std::string full = base +
                             "power:\n"
                             "  compute_busy: {value: \"700 W\", source: \"datasheet\"}\n"
                             "  comm_busy: {value: \"350 W\", source: \"estimated\"}\n"
                             "  idle: {value: \"90 W\", source: \"estimated\"}\n"
                             "  node_overhead: {value: \"2.8 kW\", source: \"measured\"}\n";
    fx.dir.write("hardware/gpu-p.yaml", full);
    const auto p = load_profile(fx.dir.path() / "hardware" / "gpu-p.yaml");
    CHECK(p.has_power());
    CHECK(p.power_compute_busy.value() == 700.0);
    CHECK(p.power_comm_busy.value() == 350.0);
    CHECK(p.power_idle.value() == 90.0);
    CHECK(p.power_node_overhead.value() == 2800.0);
    // Half a section, a bare number, and an idle draw above the comm-busy one.
    auto errors_of = [&](const std::string& text) {
        fx.dir.write("hardware/gpu-p.yaml", text);
        try {
            (void)load_profile(fx.dir.path() / "hardware" / "gpu-p.yaml");
        } catch (const ProfileError& e) {
            return e.diagnostics();
        }
        FAIL("expected a ProfileError");
        return std::vector<Diagnostic>{};
    };
    const auto half = errors_of(base + "power:\n  compute_busy: {value: \"700 W\", source: \"datasheet\"}\n");
    CHECK(find(half, "power.idle", "required key is missing").line > 0);
    CHECK(find(half, "power.node_overhead", "required key is missing").line > 0);
    const auto bare = errors_of(replace(full, "\"90 W\"", "90"));
    CHECK(find(bare, "power.idle", "has no unit").line > 0);
    const auto order = errors_of(replace(full, "\"90 W\"", "\"400 W\""));
    CHECK(find(order, "power.comm_busy", "idle <= comm_busy <= compute_busy").line > 0);
    // A unit slip: a board at 7 kW, a node's host side at 2.8 W.
    const auto gpu_kw = errors_of(replace(full, "\"700 W\"", "\"7 kW\""));
    CHECK(find(gpu_kw, "power.compute_busy", "outside the physical range").line > 0);
    const auto node_w = errors_of(replace(full, "\"2.8 kW\"", "\"2.8 W\""));
    CHECK(find(node_w, "power.node_overhead", "outside the physical range").line > 0);
}

TEST_CASE("run settings: a duration without a unit and bad values, each at its place", "[loader]") {
    Fixture fx;
    // Lines 8-12 after kBase's 7.
    auto ds = fx.errors(kBase + "run:\n  gpu_mtbf: 50000\n  restart: \"-5 min\"\n  checkpoint_bandwidth: \"0 GB/s\"\n"
                                "  checkpoint_interval: \"2 weeks\"\n");
    REQUIRE(ds.size() == 4);
    for (const auto& d : ds) CHECK(d.file == fx.scenario_name());
    check_at(find(ds, "run.gpu_mtbf"), 9, 13, "'50000' has no unit (one of: s, min, h, d)");
    check_at(find(ds, "run.restart"), 10, 12, "must not be negative");
    check_at(find(ds, "run.checkpoint_bandwidth"), 11, 25, "outside the physical range");
    check_at(find(ds, "run.checkpoint_interval"), 12, 24, "unknown unit 'weeks'");
    // A typo in the section is an unknown key with a suggestion.
    auto typo = fx.errors(kBase + "run:\n  gpu_mtfb: \"1000 h\"\n");
    REQUIRE(typo.size() == 1);
    CHECK(typo[0].key == "run.gpu_mtfb");
    check_at(typo[0], 9, 3, "unknown key 'gpu_mtfb' (did you mean 'gpu_mtbf'?)");
}

TEST_CASE("run settings: defaults from the key table and per-plan overrides in their units", "[loader]") {
    Fixture fx;
    const auto sc = fx.load(kBase + "run:\n  gpu_mtbf: \"2 d\"\n  restart: \"90 s\"\nplans:\n  - name: a\n  - name: b\n"
                                    "    run: {checkpoint_bandwidth: \"8 Gbit/s\", checkpoint_interval: \"30 min\"}\n");
    REQUIRE(sc.plans.size() == 2);
    const auto& a = sc.plans[0].run;
    CHECK(a.gpu_mtbf_hours == 48.0);
    CHECK(a.restart_s == 90.0);
    CHECK(a.checkpoint_bandwidth_per_node.value() == 5e9);  // the table's default, 5 GB/s
    CHECK_FALSE(a.checkpoint_interval_s.has_value());        // absent: the Young/Daly optimum
    const auto& b = sc.plans[1].run;
    CHECK(b.gpu_mtbf_hours == 48.0);                         // from the top-level section
    CHECK(b.checkpoint_bandwidth_per_node.value() == 1e9);   // 8 Gbit/s
    CHECK(b.checkpoint_interval_s == 1800.0);
    // Without a run section: Llama 3's table split per GPU (16384 x 54 x 24 / 331 GPU-hours) and per
    // node (2048 x 54 x 24 / 88 node-hours), 47 planned stops in 54 days, 17 min restarts, 1% slower.
    const Plan d = fx.load(kBase).plans[0];
    CHECK(d.run.gpu_mtbf_hours == Approx(64149.0).epsilon(1e-4));  // Llama 3 Table 5, GPU and software
    CHECK(d.run.node_mtbf_hours == Approx(30161.0).epsilon(1e-4)); // ... host and network
    CHECK(d.run.restart_s == 1020.0);                              // 17 min: Llama 3's effective training time
    CHECK(d.run.planned_per_day == Approx(47.0 / 54.0));
    CHECK(d.run.slowdown == Approx(0.01));
    CHECK(d.run.straggler_fraction == Approx(0.104 / 0.896)); // ByteDance, OSDI'25: 10.4% wasted
    CHECK(d.run.eval_fraction == Approx(0.007));             // BLOOM's chronicle: 0.7% of training
    CHECK(d.run.data_stall_fraction == 0);
    // The new terms in their units: a duration, a rate per day, fractions.
    const Plan e = fx.load(kBase +
                           "run:\n  node_mtbf: \"100 d\"\n  planned_interruptions: \"2/d\"\n  slowdown: 3%\n"
                           "  stragglers: 4%\n  eval_pauses: \"1%\"\n  data_stalls: 0.02\n")
                       .plans[0];
    CHECK(e.run.node_mtbf_hours == 2400.0);
    CHECK(e.run.planned_per_day == Approx(2.0));
    CHECK(e.run.slowdown == Approx(0.03));
    CHECK(e.run.straggler_fraction == Approx(0.04));
    CHECK(e.run.eval_fraction == Approx(0.01));
    CHECK(e.run.data_stall_fraction == Approx(0.02));
    CHECK_FALSE(fx.errors(kBase + "run:\n  planned_interruptions: 2\n").empty()); // a rate needs its span
}

TEST_CASE("wrong unit kind: a size where a bandwidth is needed", "[loader]") {
    Fixture fx;
    auto ds = fx.errors(kBase + "  nic_rate: \"400 GB\"\n");
    REQUIRE(ds.size() == 1);
    CHECK(ds[0].key == "cluster.nic_rate");
    check_at(ds[0], 8, 13, "unknown unit 'GB' for a bandwidth");
}

TEST_CASE("bad enum value lists the allowed values", "[loader]") {
    Fixture fx;
    auto ds = fx.errors(kBase + "parallel:\n  sharding: zero4\n");
    REQUIRE(ds.size() == 1);
    CHECK(ds[0].key == "parallel.sharding");
    check_at(ds[0], 9, 13, "unknown value 'zero4'");
    CHECK_THAT(ds[0].message, Contains("one of: none, dist_opt, zero1, zero2, zero3, fsdp, hsdp"));
}

TEST_CASE("wrong type: a fraction where an integer is needed", "[loader]") {
    Fixture fx;
    auto ds = fx.errors(replace(kBase, "global_batch: 64", "global_batch: 1.5"));
    REQUIRE(ds.size() == 1);
    CHECK(ds[0].key == "training.global_batch");
    check_at(ds[0], 5, 17, "expected an integer, got '1.5'");
}

TEST_CASE("missing required key is reported at its section", "[loader]") {
    Fixture fx;
    auto ds = fx.errors(replace(kBase, "  tokens: 1B\n", ""));
    REQUIRE(ds.size() == 1);
    CHECK(ds[0].key == "training.tokens");
    check_at(ds[0], 2, 1, "required key is missing");
}

TEST_CASE("negative tokens", "[loader]") {
    Fixture fx;
    auto ds = fx.errors(replace(kBase, "tokens: 1B", "tokens: -5B"));
    REQUIRE(ds.size() == 1);
    CHECK(ds[0].key == "training.tokens");
    check_at(ds[0], 3, 11, "must not be negative");
}

TEST_CASE("tp that does not divide the attention heads", "[loader]") {
    Fixture fx;
    const std::string yaml = R"(model:
  name: m12
  layers: 4
  hidden: 768
  heads: 12
  ffn: 2048
  vocab: 1000
training:
  tokens: 1B
  seq_len: 1024
  global_batch: 64
parallel:
  tp: 8
cluster:
  gpu: gpu-fp8
)";
    auto ds = fx.errors(yaml);
    check_at(find(ds, "parallel.tp", "attention heads"), 13, 3, "tp=8 does not divide the 12 attention heads of m12");
    // 12 KV heads (MHA) and tp=8 do not divide one another either: reported too, same place.
    check_at(find(ds, "parallel.tp", "KV heads"), 13, 3, "the 12 KV heads of m12 do not divide one another");
    CHECK(ds.size() == 2);
}

TEST_CASE("kv_heads and tp that do not divide one another (flow style)", "[loader]") {
    Fixture fx;
    const std::string yaml = R"(model: {name: g, layers: 4, hidden: 1536, heads: 24, kv_heads: 6, ffn: 4096, vocab: 1000}
training: {tokens: 1B, seq_len: 1024, global_batch: 64}
parallel: {tp: 4}
cluster: {gpu: gpu-fp8}
)";
    auto ds = fx.errors(yaml);
    REQUIRE(ds.size() == 1);
    CHECK(ds[0].key == "parallel.tp");
    check_at(ds[0], 3, 12, "tp=4 and the 6 KV heads of g do not divide one another");
}

TEST_CASE("a model chunk without a layer", "[loader]") {
    Fixture fx;
    // 4 layers + embedding + loss = 6 units over 8 chunks: the first chunk would hold none.
    auto ds = fx.errors(kBase + "parallel:\n  pp: 2\n  vp: 4\n");
    REQUIRE(ds.size() == 1);
    CHECK(ds[0].key == "parallel.pp");
    check_at(ds[0], 9, 3,
             "pp*vp = 2*4 = 8 model chunks leave a chunk without a layer of the 4 of Tiny (the embedding and the loss "
             "count as one layer each when the layers do not divide evenly)");
}

namespace {
// The one diagnostic of a scenario that must fail, which must blame `key`.
Diagnostic only_error(const Fixture& fx, const std::string& yaml, const std::string& key) {
    const auto ds = fx.errors(yaml);
    REQUIRE(ds.size() == 1);
    CHECK(ds[0].key == key);
    return ds[0];
}
} // namespace

TEST_CASE("block recompute layers: only under full recompute and at most a chunk", "[loader][recompute]") {
    Fixture fx;
    const std::string key = "parallel.recompute_layers";
    check_at(only_error(fx, kBase + "parallel:\n  recompute_layers: 2\n", key), 9, 3,
             "recompute_layers applies to recompute: full (block recompute), not 'none'");
    check_at(only_error(fx, kBase + "parallel:\n  recompute: full\n  recompute_layers: 5\n", key), 10, 3,
             "5 layers recomputed per model chunk, but the largest chunk has 4 (4 layers over pp*vp = 1 chunks)");
    (void)only_error(fx, kBase + "parallel:\n  recompute: full\n  recompute_layers: 0\n", key);
    const auto ok = fx.load(kBase + "parallel:\n  recompute: full\n  recompute_layers: 3\n");
    CHECK(ok.plans.at(0).parallel.recompute_layers == 3);
    const auto all = fx.load(kBase + "parallel:\n  recompute: full\n  recompute_layers: all\n");
    CHECK(all.plans.at(0).parallel.recompute_layers == 0);
}

TEST_CASE("FP8 primary weights and master remainders: where they apply", "[loader]") {
    Fixture fx;
    // kBase runs on gpu-fp8 in bf16 (the default precision).
    check_at(only_error(fx, kBase + "parallel:\n  fp8_params: true\n", "parallel.fp8_params"), 9, 3,
             "FP8 primary weights need precision: fp8, not bf16");
    const std::string key = "parallel.master_param_remainders";
    (void)only_error(fx, kBase + "precision: fp8\nparallel:\n  fp8_params: true\n  master_param_remainders: true\n",
                     key);
    (void)only_error(fx, kBase + "parallel:\n  sharding: none\n  master_param_remainders: true\n", key);
    check_at(only_error(fx, kBase + "parallel:\n  optimizer_state: bf16\n  master_param_remainders: true\n", key), 10,
             3, "with optimizer_state: bf16 there is none");
    const auto ok = fx.load(kBase + "precision: fp8\nparallel:\n  fp8_params: true\n");
    CHECK(ok.plans.at(0).parallel.fp8_params);
}

TEST_CASE("ZeRO-3 reuse distance: a count or unlimited", "[loader]") {
    Fixture fx;
    const std::string key = "parallel.fsdp_reuse_distance_params";
    CHECK(std::isinf(fx.load(kBase).plans.at(0).parallel.fsdp_reuse_distance_params)); // default: always kept
    CHECK(std::isinf(fx.load(kBase + "parallel:\n  fsdp_reuse_distance_params: unlimited\n")
                         .plans.at(0)
                         .parallel.fsdp_reuse_distance_params));
    CHECK(fx.load(kBase + "parallel:\n  fsdp_reuse_distance_params: 0\n")
              .plans.at(0)
              .parallel.fsdp_reuse_distance_params == 0);
    check_at(only_error(fx, kBase + "parallel:\n  fsdp_reuse_distance_params: lots\n", key), 9, 31,
             "got 'lots'; or write 'unlimited'");
    (void)only_error(fx, kBase + "parallel:\n  fsdp_reuse_distance_params: -5\n", key);
    (void)only_error(fx, kBase + "parallel:\n  fsdp_reduce_scatters_per_layer: 0\n",
                     "parallel.fsdp_reduce_scatters_per_layer");
}

TEST_CASE("a framework's default that follows the model's size is applied once the model is read",
          "[loader][framework]") {
    Fixture fx;
    // llm-foundry recomputes every block from 2B parameters up (its mpt-3b and larger recipes):
    // the tiny preset (a few million parameters) runs without, an MPT-3B shape (32 x 2560, 4x
    // GELU FFN, vocab 50368: 2.65B) with full recompute of every layer, whatever order the
    // scenario writes its sections in.
    const auto small = fx.load(kBase + "parallel:\n  framework: llm-foundry\n").plans.at(0).parallel;
    CHECK(small.recompute == Recompute::none);
    const std::string mpt3b = R"(parallel:
  framework: llm-foundry
plans:
  - name: mpt-3b shape
    model: {name: m, layers: 32, hidden: 2560, heads: 20, ffn: 10240, ffn_type: gelu, vocab: 50368}
  - name: written
    model: {name: m, layers: 32, hidden: 2560, heads: 20, ffn: 10240, ffn_type: gelu, vocab: 50368}
    parallel: {recompute: selective}
)";
    const auto big = fx.load(kBase + mpt3b);
    REQUIRE(big.plans.size() == 2);
    CHECK(big.plans[0].parallel.recompute == Recompute::full);
    CHECK(big.plans[0].parallel.recompute_layers == 0); // every layer: no block recompute
    CHECK(big.plans[1].parallel.recompute == Recompute::selective); // what the scenario writes wins
}

TEST_CASE("parallel.framework fills the properties the scenario does not write", "[loader][framework]") {
    Fixture fx;
    // kBase: 8 GPUs of gpu-fp8, tp 1. DeepSpeed 2021's profile: ZeRO-3, full recompute, per-weight
    // gathers through the list API behind a device synchronize, unfused attention.
    const auto ds = fx.load(kBase + "parallel:\n  framework: deepspeed-2021\n").plans.at(0).parallel;
    CHECK(ds.framework == "deepspeed-2021");
    CHECK(ds.sharding == Sharding::zero3);
    CHECK(ds.recompute == Recompute::full);
    CHECK(ds.fsdp_fetch == FsdpFetch::module);
    CHECK(ds.fsdp_gather_sync);
    CHECK(ds.list_collectives);
    CHECK(ds.attention == AttentionImpl::unfused);
    // What the scenario writes wins, in the top level or in a plan.
    const auto two = fx.load(kBase + R"(parallel:
  framework: deepspeed-2021
  recompute: none
plans:
  - name: a
  - name: b
    parallel: {list_collectives: false}
  - name: c
    parallel: {framework: nemo-24.07, tp: 2}
    precision: fp8
)");
    REQUIRE(two.plans.size() == 3);
    CHECK(two.plans[0].parallel.recompute == Recompute::none);
    CHECK(two.plans[0].parallel.list_collectives);
    CHECK_FALSE(two.plans[1].parallel.list_collectives);
    CHECK(two.plans[1].parallel.sharding == Sharding::zero3);
    // NeMo: SP and TP overlap with tp > 1, FP8 primary weights in FP8, BF16 gradient sync.
    const auto& nemo = two.plans[2].parallel;
    CHECK(nemo.sharding == Sharding::dist_opt);
    CHECK(nemo.sequence_parallel);
    CHECK(nemo.tp_comm_overlap);
    CHECK(nemo.fp8_params);
    CHECK_FALSE(nemo.main_grads_fp32);
    CHECK(nemo.recompute == Recompute::none); // written at the top level
    // Without the key nothing changes: the properties' own defaults.
    const auto plain = fx.load(kBase).plans.at(0).parallel;
    CHECK(plain.framework.empty());
    CHECK(plain.sharding == Sharding::dist_opt);
    CHECK_FALSE(plain.list_collectives);
    // A framework with no profile loads as a generic PyTorch eager stack, with a warning at its
    // line (not Megatron-Core's tuned defaults).
    const auto unknown = fx.load(kBase + "parallel:\n  framework: megatron\n");
    REQUIRE(unknown.warnings.size() == 1);
    CHECK_THAT(unknown.warnings.front(), Catch::Contains(":9:14: parallel.framework: unknown framework 'megatron'"));
    CHECK_THAT(unknown.warnings.front(), Catch::Contains("generic PyTorch eager"));
    const auto& gp = unknown.plans.at(0).parallel;
    CHECK(gp.elementwise == Elementwise::eager);
    CHECK(gp.host_dispatch == HostDispatch::eager);
    CHECK(gp.attention == AttentionImpl::flash2);
    CHECK_FALSE(gp.fused_optimizer);
    CHECK(fx.load(kBase).warnings.empty());
    // The warning points to the names that are known and to fitting a stack on one's own runs.
    CHECK_THAT(unknown.warnings.front(), Catch::Contains("docs/accuracy.md \"Framework names\""));
    CHECK_THAT(unknown.warnings.front(),
               Catch::Contains("or fit a stack on a run of yours: trainsim fit-stack (docs/calibration.md)"));
}

TEST_CASE("parallel.framework: a stack's name reads as the family it runs, without a warning", "[loader]") {
    Fixture fx;
    // Megatron-Bridge runs NeMo's Megatron-Core + Transformer Engine stack: NeMo's profile (TP
    // communication overlap), no warning.
    const auto bridge = fx.load(kBase + "parallel:\n  tp: 2\n  framework: Megatron Bridge\n");
    CHECK(bridge.warnings.empty());
    CHECK(bridge.plans.at(0).parallel.tp_comm_overlap);
    CHECK(bridge.plans.at(0).parallel.elementwise == Elementwise::fused);
    // A Hugging Face trainer is the generic eager stack, now known: same behaviours, no warning.
    const auto hf = fx.load(kBase + "parallel:\n  framework: LLaMA-Factory\n");
    CHECK(hf.warnings.empty());
    CHECK(hf.plans.at(0).parallel.elementwise == Elementwise::eager);
    CHECK(hf.plans.at(0).parallel.host_dispatch == HostDispatch::eager);
    // A name no alias covers still warns.
    const auto neox = fx.load(kBase + "parallel:\n  framework: gpt-neox\n");
    REQUIRE(neox.warnings.size() == 1);
    CHECK_THAT(neox.warnings.front(), Catch::Contains("unknown framework 'gpt-neox'"));
    CHECK_THAT(neox.warnings.front(), Catch::Contains("trainsim fit-stack"));
}

TEST_CASE("GPU count different from tp*pp*cp*dp", "[loader]") {
    Fixture fx;
    auto ds = fx.errors(kBase + "parallel:\n  dp: 2\n");
    REQUIRE(ds.size() == 1);
    CHECK(ds[0].key == "parallel.dp");
    check_at(ds[0], 9, 3, "tp*pp*cp*dp = 1*1*1*2 = 2 but the cluster has 8 GPUs (1 nodes x 8)");
}

TEST_CASE("dp: auto that cannot divide the GPUs blames the degree written", "[loader]") {
    Fixture fx;
    auto ds = fx.errors(kBase + "  gpus_per_node: 6\nparallel:\n  tp: 4\n");
    REQUIRE(ds.size() == 1);
    CHECK(ds[0].key == "parallel.tp");
    check_at(ds[0], 10, 3, "dp: auto needs tp*pp*cp = 4*1*1 = 4 to divide the 6 GPUs (1 nodes x 6)");
}

TEST_CASE("global batch not a multiple of micro_batch*dp", "[loader]") {
    Fixture fx;
    auto ds = fx.errors(replace(kBase, "global_batch: 64", "global_batch: 60"));
    REQUIRE(ds.size() == 1);
    CHECK(ds[0].key == "training.global_batch");
    check_at(ds[0], 5, 3, "global batch 60 is not a multiple of micro_batch*dp = 1*8 = 8");
}

TEST_CASE("unknown model preset lists the known ones", "[loader]") {
    Fixture fx;
    auto ds = fx.errors(replace(kBase, "model: tiny", "model: tinyy"));
    REQUIRE(ds.size() == 1);
    CHECK(ds[0].key == "model");
    check_at(ds[0], 1, 8, "unknown model preset 'tinyy' (did you mean 'tiny'?) (known: tiny)");
}

TEST_CASE("unknown hardware profile lists the known ones", "[loader]") {
    Fixture fx;
    auto ds = fx.errors(replace(kBase, "gpu: gpu-fp8", "gpu: gpu-fp9"));
    REQUIRE(ds.size() == 1);
    CHECK(ds[0].key == "cluster.gpu");
    check_at(ds[0], 7, 8, "unknown hardware profile 'gpu-fp9' (did you mean 'gpu-fp8'?) (known: gpu-bf16, gpu-fp8)");
}

TEST_CASE("FP8 on a GPU without FP8 tensor cores is refused with the profile's reason", "[loader]") {
    Fixture fx;
    auto ds = fx.errors(replace(kBase, "gpu: gpu-fp8", "gpu: gpu-bf16") + "precision: fp8\n");
    REQUIRE(ds.size() == 1);
    CHECK(ds[0].key == "precision");
    check_at(ds[0], 8, 1,
             "fp8 is not supported on Test GPU gpu-bf16: Ampere (sm_80) tensor cores have no FP8 data path");
}

TEST_CASE("HF config with a missing field names the file and the field", "[loader]") {
    Fixture fx;
    const fs::path config = fx.dir.write("hf/config.json", replace(kLlamaConfig, "  \"hidden_size\": 512,\n", ""));
    auto ds = fx.errors(replace(kBase, "model: tiny", "model: {hf_config: hf/config.json}"));
    REQUIRE(ds.size() == 2);
    CHECK(ds[0].key == "model.hf_config");
    CHECK(ds[0].file == fx.scenario_name());
    check_at(ds[0], 1, 20, "HF config");
    CHECK(ds[1].file == config.string());
    CHECK(ds[1].key == "hidden_size");
    CHECK(ds[1].message == "missing required field");
}

TEST_CASE("HF config with a number out of range is an input error, not a crash", "[loader]") {
    // nlohmann::json throws out_of_range (406), not parse_error, for "1e584" (found by fuzz_hf_config).
    Fixture fx;
    const fs::path config =
        fx.dir.write("big.json", replace(kLlamaConfig, "\"vocab_size\": 32000", "\"vocab_size\": 1e584"));
    try {
        (void)load_hf_config(config);
        FAIL("expected a ScenarioError");
    } catch (const ScenarioError& e) {
        REQUIRE(e.diagnostics().size() == 1);
        CHECK(e.diagnostics()[0].file == config.string());
        CHECK_THAT(e.diagnostics()[0].message, Catch::Matchers::Contains("not a readable config.json") &&
                                                   Catch::Matchers::Contains("1e584"));
    }
}

TEST_CASE("HF config with an unsupported model_type", "[loader]") {
    Fixture fx;
    const fs::path config = fx.dir.write("gpt2.json", replace(kLlamaConfig, "\"llama\"", "\"gpt2\""));
    try {
        (void)load_hf_config(config);
        FAIL("expected a ScenarioError");
    } catch (const ScenarioError& e) {
        REQUIRE(e.diagnostics().size() == 1);
        const auto& d = e.diagnostics()[0];
        CHECK(d.file == config.string());
        CHECK(d.key == "model_type");
        check_at(d, 3, 3, "unsupported model_type 'gpt2' (supported: llama, mistral, qwen2)");
    }
}

TEST_CASE("YAML syntax error is a ScenarioError with its location", "[loader]") {
    Fixture fx;
    auto ds = fx.errors("model: tiny\ntraining: [1, 2\ncluster:\n  gpu: gpu-fp8\n");
    REQUIRE(ds.size() == 1);
    CHECK(ds[0].key.empty());
    check_at(ds[0], 3, 8, "YAML syntax error");
}

TEST_CASE("duplicate plan names", "[loader]") {
    Fixture fx;
    auto ds = fx.errors(kBase + "plans:\n  - name: a\n  - name: a\n");
    REQUIRE(ds.size() == 1);
    CHECK(ds[0].key == "plans[1].name");
    check_at(ds[0], 10, 11, "duplicate plan name 'a' (first used at line 9)");
}

TEST_CASE("a plan item that is not a map", "[loader]") {
    Fixture fx;
    auto ds = fx.errors(kBase + "plans:\n  - name: a\n  - b\n");
    REQUIRE(ds.size() == 1);
    CHECK(ds[0].key == "plans[1]");
    check_at(ds[0], 10, 5, "a plan is a map with a name and the keys it overrides, got 'b'");
}

TEST_CASE("a plan without a name, and a top-level-only key in a plan", "[loader]") {
    Fixture fx;
    auto ds = fx.errors(kBase + "plans:\n  - precision: bf16\n    title: x\n");
    CHECK(ds.size() == 2);
    check_at(find(ds, "plans[0].name"), 9, 5, "required key is missing");
    check_at(find(ds, "plans[0].title"), 10, 5, "'title' is only allowed at the top level");
}

TEST_CASE("a key written twice", "[loader]") {
    Fixture fx;
    auto ds = fx.errors(kBase + "cluster:\n  nodes: 2\n");
    REQUIRE(ds.size() == 1);
    CHECK(ds[0].key == "cluster");
    check_at(ds[0], 8, 1, "key 'cluster' is written twice (first at line 6)");
}

TEST_CASE("several errors in one file are reported together", "[loader]") {
    Fixture fx;
    const std::string yaml = R"(model: tiny
training:
  tokens: 1B
  seq_len: long
  global_batch: 64
parallel:
  tp: 2
  pp: 5
  recompute: partial
  pipeline: 2
cluster:
  gpu: gpu-fp8
  nic_rate: 400 Gb/s
pricing:
  rate: "2.49 USD"
)";
    auto ds = fx.errors(yaml);
    INFO(listing(ds));
    check_at(find(ds, "training.seq_len"), 4, 12, "expected an integer, got 'long'");
    check_at(find(ds, "parallel.recompute"), 9, 14, "unknown value 'partial' (one of: none, selective, full)");
    check_at(find(ds, "parallel.pipeline"), 10, 3, "unknown key 'pipeline'");
    check_at(find(ds, "cluster.nic_rate"), 13, 13, "unknown unit 'Gb/s' for a bandwidth");
    check_at(find(ds, "pricing.rate"), 15, 9, "expected a plain number, got '2.49 USD'");
    check_at(find(ds, "parallel.pp"), 8, 3,
             "pp*vp = 5*1 = 5 model chunks leave a chunk without a layer of the 4 of Tiny (the embedding and the loss "
             "count as one layer each when the layers do not divide evenly)");
    check_at(find(ds, "parallel.tp", "dp: auto"), 7, 3, "dp: auto needs tp*pp*cp = 2*5*1 = 10 to divide the 8 GPUs");
    CHECK(ds.size() == 7);
}

TEST_CASE("a problem in the default section is reported once for all plans", "[loader]") {
    Fixture fx;
    auto ds = fx.errors(kBase + "parallel:\n  tp: two\nplans:\n  - name: a\n  - name: b\n");
    REQUIRE(ds.size() == 1);
    check_at(find(ds, "parallel.tp"), 9, 7, "expected an integer, got 'two'");
}

TEST_CASE("a layout problem of one plan points at the plan's own key", "[loader]") {
    Fixture fx;
    auto ds = fx.errors(kBase + "plans:\n  - name: ok\n  - name: bad\n    parallel: {tp: 3}\n");
    INFO(listing(ds));
    const auto d = find(ds, "plans[1].parallel.tp", "attention heads");
    check_at(d, 11, 16, "in plan 'bad': tp=3 does not divide the 8 attention heads of Tiny");
}

TEST_CASE("profile entry without a source", "[loader][profile]") {
    TempDir dir;
    const std::string text = replace(profile_yaml("p", true), R"(hbm_capacity: {value: "80 GiB", source: "fixture"})",
                                     R"(hbm_capacity: {value: "80 GiB"})");
    const fs::path file = dir.write("p.yaml", text);
    try {
        (void)load_profile(file);
        FAIL("expected a ProfileError");
    } catch (const ProfileError& e) {
        REQUIRE(e.diagnostics().size() == 1);
        const auto& d = e.diagnostics()[0];
        const auto [line, col] = position_of(text, "hbm_capacity");
        CHECK(d.file == file.string());
        CHECK(d.key == "memory.hbm_capacity");
        check_at(d, line, col, "missing source");
    }
}

TEST_CASE("profile problems: unknown key, ratios out of range, bare number, all together", "[loader][profile]") {
    TempDir dir;
    std::string text = profile_yaml("p", true);
    text = replace(text, "hbm_efficiency: {value: 0.85", "hbm_efficiency: {value: 1.2");
    text = replace(text, "reserved:", "reserverd:");
    text = replace(text, R"(nvlink_bandwidth: {value: "450 GB/s")", R"(nvlink_bandwidth: {value: 450)");
    text += "  host_cpu_speed: {value: 4.5, source: \"fixture\"}\n"; // a speed lies in (0, 4]
    const fs::path file = dir.write("p.yaml", text);
    try {
        (void)load_profile(file);
        FAIL("expected a ProfileError");
    } catch (const ProfileError& e) {
        const auto& ds = e.diagnostics();
        INFO(listing(ds));
        auto [l1, c1] = position_of(text, "1.2");
        check_at(find(ds, "memory.hbm_efficiency"), l1, c1, "must lie in (0, 1], got 1.2");
        auto [l2, c2] = position_of(text, "reserverd");
        check_at(find(ds, "memory.reserverd"), l2, c2, "unknown key 'reserverd' (did you mean 'reserved'?)");
        auto [l3, c3] = position_of(text, "450,");
        check_at(find(ds, "interconnect.nvlink_bandwidth"), l3, c3, "'450' has no unit");
        auto [l4, c4] = position_of(text, "memory:");
        check_at(find(ds, "memory.reserved"), l4, c4, "required key is missing");
        auto [l5, c5] = position_of(text, "4.5, source");
        check_at(find(ds, "node.host_cpu_speed"), l5, c5, "must lie in (0, 4], got 4.5");
        CHECK(ds.size() == 5);
    }
}

TEST_CASE("a broken profile named by a scenario: blamed at cluster.gpu and located in the profile", "[loader]") {
    Fixture fx;
    const std::string text = replace(profile_yaml("broken", true), "sm_count: {value: 132", "sm_count: {value: many");
    const fs::path file = fx.dir.write("hardware/broken.yaml", text);
    auto ds = fx.errors(replace(kBase, "gpu: gpu-fp8", "gpu: broken"));
    REQUIRE(ds.size() == 2);
    CHECK(ds[0].file == fx.scenario_name());
    CHECK(ds[0].key == "cluster.gpu");
    check_at(ds[0], 7, 8, "hardware profile 'broken'");
    CHECK(ds[1].file == file.string());
    CHECK(ds[1].key == "compute.sm_count");
    const auto [line, col] = position_of(text, "many");
    check_at(ds[1], line, col, "expected an integer, got 'many'");
}

TEST_CASE("a broken model preset: blamed at model and located in the preset", "[loader]") {
    Fixture fx;
    const std::string text = replace(replace(kTinyPreset, "layers: 4", "layers: four"), "id: tiny", "id: bad");
    const fs::path file = fx.dir.write("models/bad.yaml", text);
    auto ds = fx.errors(replace(kBase, "model: tiny", "model: bad"));
    REQUIRE(ds.size() == 2);
    check_at(find(ds, "model"), 1, 8, "model preset 'bad'");
    const auto d = find(ds, "layers");
    CHECK(d.file == file.string());
    check_at(d, 4, 9, "expected an integer, got 'four'");
}

TEST_CASE("files that are missing, empty or not a map", "[loader]") {
    Fixture fx;
    SECTION("missing file") {
        const fs::path missing = fx.dir.path() / "nope.yaml";
        try {
            (void)load_scenario(missing, fx.opts);
            FAIL("expected a ScenarioError");
        } catch (const ScenarioError& e) {
            REQUIRE(e.diagnostics().size() == 1);
            CHECK(e.diagnostics()[0].file == missing.string());
            CHECK_THAT(e.diagnostics()[0].message, Contains("cannot open") && Contains("nope.yaml"));
        }
    }
    SECTION("empty file") {
        auto ds = fx.errors("");
        REQUIRE(ds.size() == 1);
        check_at(ds[0], 1, 1, "the file is empty");
    }
    SECTION("a scalar instead of a map") {
        auto ds = fx.errors("just some text\n");
        REQUIRE(ds.size() == 1);
        check_at(ds[0], 1, 1, "a scenario is a map of keys");
    }
    SECTION("odd shapes never crash") {
        for (const char* yaml : {"- a\n- b\n", "model:\n", "training: 3\nmodel: [1]\ncluster: {gpu: [x]}\n",
                                 "plans: {}\n", "plans:\n", "plans: []\n", "parallel: {tp: {x: 1}}\n", "~\n",
                                 "? [a, b]\n: c\n", "model: {preset: tiny, hf_config: x.json}\n",
                                 "model: {layers: 2}\n", "pricing: {discounts: 5%}\n"}) {
            INFO(yaml);
            CHECK_THROWS_AS(fx.load(yaml), ScenarioError);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// What a valid scenario becomes

TEST_CASE("a preset scenario: defaults from the key table, dp auto derived", "[loader]") {
    Fixture fx;
    const Scenario sc = fx.load(kBase);
    CHECK(sc.title == "s");  // no title: the file stem
    REQUIRE(sc.plans.size() == 1);
    const Plan& p = sc.plans[0];
    CHECK(p.name == "s");
    CHECK(p.model.name == "Tiny");
    CHECK(p.model.layers == 4);
    CHECK(p.model.kv_heads == 4);
    CHECK(p.model.head_dim == 32);  // hidden / heads
    CHECK(p.training.tokens == 1e9);
    CHECK(p.training.micro_batch == 1);
    CHECK(p.parallel.tp == 1);
    CHECK(p.parallel.dp == 8);  // auto: 8 GPUs / (1*1*1)
    CHECK(p.parallel.sharding == Sharding::dist_opt);
    CHECK(p.parallel.dp_bucket_params == 40e6);
    CHECK(p.precision == Precision::bf16);
    CHECK(p.cluster.gpus_per_node == 8);  // from the profile's node.gpus_per_node
    CHECK(p.cluster.nic_rate.value() == 50e9);  // 400 Gbit/s
    CHECK(p.hardware.id == "gpu-fp8");
    CHECK(p.hardware.dense_peak.at(Precision::fp8).value() == Approx(1978.9e12));
    CHECK_FALSE(p.pricing.rate.has_value()); // no price unless one is written
    CHECK(p.pricing.currency == "USD");
    CHECK(p.pricing.discounts.at(Commitment::annual) == 0.0);
}

TEST_CASE("the key table's defaults agree with the structs' defaults", "[loader]") {
    Fixture fx;
    const Plan p = fx.load(kBase).plans[0];
    const Parallel par;
    CHECK(p.parallel.tp == par.tp);
    CHECK(p.parallel.pp == par.pp);
    CHECK(p.parallel.vp == par.vp);
    CHECK(p.parallel.cp == par.cp);
    CHECK(p.parallel.sequence_parallel == par.sequence_parallel);
    CHECK(p.parallel.recompute == par.recompute);
    CHECK(p.parallel.overlap_grad_reduce == par.overlap_grad_reduce);
    CHECK(p.parallel.overlap_param_gather == par.overlap_param_gather);
    CHECK(p.parallel.tp_comm_overlap == par.tp_comm_overlap);
    CHECK(p.parallel.fsdp_prefetch == par.fsdp_prefetch);
    const Cluster cl;
    CHECK(p.cluster.nodes == cl.nodes);
    CHECK(p.cluster.intra == cl.intra);
    CHECK(p.cluster.inter == cl.inter);
    CHECK(p.cluster.nics_per_node == cl.nics_per_node);
    CHECK(p.cluster.nic_rate == cl.nic_rate);
    const Pricing pr;
    CHECK(p.pricing.basis == pr.basis);
    CHECK(p.pricing.commitment == pr.commitment);
    const RunSettings run;
    CHECK(p.run.checkpoint_bandwidth_per_node == run.checkpoint_bandwidth_per_node);
    CHECK(p.run.gpu_mtbf_hours == run.gpu_mtbf_hours);
    CHECK(p.run.restart_s == run.restart_s);
    CHECK(p.run.checkpoint_interval_s == run.checkpoint_interval_s);
}

TEST_CASE("the key table: unique paths, a description each, enums with their values", "[loader]") {
    const auto& keys = scenario_keys();
    std::set<std::string> paths;
    for (const auto& k : keys) {
        INFO(k.path);
        CHECK(paths.insert(k.path).second);
        CHECK_FALSE(k.description.empty());
        CHECK(k.allowed.empty() == (k.type != "enum"));
        if (k.type == "enum") {
            CHECK(std::find(k.allowed.begin(), k.allowed.end(), k.default_value) != k.allowed.end());
        }
    }
    for (const char* p : {"model.kv_heads", "pricing.discounts.annual", "parallel.dp", "plans[].name"})
        CHECK(paths.contains(p));
}

TEST_CASE("every key of the table is accepted by the loader", "[loader]") {
    Fixture fx;
    const std::string yaml = R"(title: "All keys"
description: every key written once
model: tiny
training: {tokens: 2T, seq_len: 2048, global_batch: 128, micro_batch: 2}
parallel:
  tp: 2
  pp: 2
  vp: 2
  cp: 1
  dp: 2
  sequence_parallel: true
  sharding: zero1
  recompute: selective
  overlap_grad_reduce: false
  overlap_param_gather: false
  tp_comm_overlap: true
  fsdp_prefetch: false
  dp_bucket_params: 20M
  fsdp_prefetch_bucket_params: 50M
  optimizer_state: bf16
  fsdp_reuse_distance_params: 1B
  fsdp_reduce_scatters_per_layer: 12
  fsdp_gather_sync: true
  list_collectives: true
  main_grads_fp32: false
  overlap_p2p: false
  attention: flash2
  elementwise: eager
  selective_recompute: alternate_matmuls
  fsdp_reduce_fp32: true
  cross_entropy: pytorch
precision: fp8
cluster:
  gpu: gpu-fp8
  nodes: 1
  gpus_per_node: 8
  intra_node: pcie
  inter_node: roce
  nics_per_node: 4
  nic_rate: "200 Gbit/s"
pricing:
  basis: machine_month
  rate: 20000
  currency: EUR
  commitment: annual
  discounts: {monthly: "5%", quarterly: 0.1, annual: "15%"}
run:
  checkpoint_bandwidth: "2 GB/s"
  gpu_mtbf: "20000 h"
  restart: "5 min"
  checkpoint_interval: "1 h"
)";
    const Plan p = fx.load(yaml).plans[0];
    CHECK(p.name == "All keys");
    CHECK(p.training.tokens == 2e12);
    CHECK(p.training.micro_batch == 2);
    CHECK(p.grad_accum() == 32);
    CHECK(p.parallel.vp == 2);
    CHECK(p.parallel.sequence_parallel);
    CHECK(p.parallel.sharding == Sharding::zero1);
    CHECK(p.parallel.recompute == Recompute::selective);
    CHECK_FALSE(p.parallel.overlap_grad_reduce);
    CHECK_FALSE(p.parallel.overlap_param_gather);
    CHECK(p.parallel.tp_comm_overlap);
    CHECK_FALSE(p.parallel.fsdp_prefetch);
    CHECK(p.parallel.dp_bucket_params == 20e6);
    CHECK(p.parallel.fsdp_prefetch_bucket_params == 50e6);
    CHECK(p.parallel.fsdp_reuse_distance_params == 1e9);
    CHECK(p.parallel.optimizer_state == OptimizerState::bf16);
    CHECK(p.parallel.fsdp_reduce_scatters_per_layer == 12);
    CHECK(p.parallel.fsdp_gather_sync);
    CHECK(p.parallel.list_collectives);
    CHECK_FALSE(p.parallel.main_grads_fp32);
    CHECK_FALSE(p.parallel.overlap_p2p);
    CHECK(p.parallel.attention == AttentionImpl::flash2);
    CHECK(p.parallel.elementwise == Elementwise::eager);
    CHECK(p.parallel.selective_recompute == SelectiveRecompute::alternate_matmuls);
    CHECK(p.parallel.fsdp_reduce_fp32);
    CHECK(p.parallel.cross_entropy == CrossEntropy::pytorch);
    CHECK(p.precision == Precision::fp8);
    CHECK(p.cluster.intra == IntraFabric::pcie);
    CHECK(p.cluster.inter == InterFabric::roce);
    CHECK(p.cluster.nics_per_node == 4);
    CHECK(p.cluster.nic_rate.value() == 25e9);
    CHECK(p.pricing.basis == PriceBasis::machine_month);
    CHECK(p.pricing.rate == 20000.0);
    CHECK(p.pricing.currency == "EUR");
    CHECK(p.pricing.commitment == Commitment::annual);
    CHECK(p.pricing.discounts.at(Commitment::monthly) == Approx(0.05));
    CHECK(p.pricing.discounts.at(Commitment::quarterly) == Approx(0.10));
    CHECK(p.pricing.discounts.at(Commitment::annual) == Approx(0.15));
    CHECK(p.run.checkpoint_bandwidth_per_node.value() == 2e9);
    CHECK(p.run.gpu_mtbf_hours == 20000.0);
    CHECK(p.run.restart_s == 300.0);
    CHECK(p.run.checkpoint_interval_s == 3600.0);
}

TEST_CASE("presets merge with inline keys written next to them", "[loader]") {
    Fixture fx;
    const Plan p = fx.load(replace(kBase, "model: tiny", "model: {preset: tiny, layers: 8, name: Tiny-8}")).plans[0];
    CHECK(p.model.name == "Tiny-8");
    CHECK(p.model.layers == 8);     // overridden
    CHECK(p.model.hidden == 256);   // from the preset
    CHECK(p.model.kv_heads == 4);   // from the preset
    CHECK(p.model.source == "test fixture");
    CHECK(load_preset("tiny", fx.dir.path()).layers == 4);  // the preset itself is unchanged
}

TEST_CASE("plans override the defaults key by key, and a plan's model replaces the model", "[loader]") {
    Fixture fx;
    const std::string yaml = R"(title: Compare
model: tiny
training: {tokens: 1B, seq_len: 1024, global_batch: 64}
parallel: {tp: 2, pp: 2}
precision: fp8
cluster: {gpu: gpu-fp8, nodes: 2}
pricing: {rate: 2.5, discounts: {annual: "20%"}}
plans:
  - name: default layout
  - name: wider tp
    parallel: {tp: 4}
    pricing: {discounts: {monthly: "5%"}}
  - name: a100 bf16
    precision: bf16
    cluster: {gpu: gpu-bf16}
    model: {name: inline, layers: 8, hidden: 512, heads: 8, ffn: 1024, vocab: 1000, ffn_type: gelu}
)";
    const Scenario sc = fx.load(yaml);
    CHECK(sc.title == "Compare");
    REQUIRE(sc.plans.size() == 3);
    const Plan& a = sc.plans[0];
    CHECK(a.name == "default layout");
    CHECK(a.parallel.tp == 2);
    CHECK(a.parallel.pp == 2);
    CHECK(a.parallel.dp == 4);  // 16 GPUs / (2*2)
    const Plan& b = sc.plans[1];
    CHECK(b.parallel.tp == 4);
    CHECK(b.parallel.pp == 2);  // kept from the defaults
    CHECK(b.parallel.dp == 2);
    CHECK(b.pricing.rate == 2.5);
    CHECK(b.pricing.discounts.at(Commitment::monthly) == Approx(0.05));
    CHECK(b.pricing.discounts.at(Commitment::annual) == Approx(0.20));  // merged inside the nested map
    const Plan& c = sc.plans[2];
    CHECK(c.precision == Precision::bf16);
    CHECK(c.hardware.id == "gpu-bf16");
    CHECK(c.cluster.nodes == 2);  // kept
    CHECK(c.model.name == "inline");
    CHECK(c.model.layers == 8);
    CHECK(c.model.kv_heads == 8);   // defaults to heads
    CHECK(c.model.head_dim == 64);  // hidden / heads
    CHECK(c.model.ffn_type == FfnType::gelu);
    CHECK_FALSE(c.model.tied_embeddings);
}

TEST_CASE("dp auto derived over several nodes", "[loader]") {
    Fixture fx;
    const Plan p = fx.load(replace(kBase, "gpu: gpu-fp8", "gpu: gpu-fp8\n  nodes: 4\n") +
                           "parallel: {tp: 2, pp: 2, cp: 2}\n")
                       .plans[0];
    CHECK(p.num_gpus() == 32);
    CHECK(p.parallel.dp == 4);  // 32 / (2*2*2)
    CHECK(p.grad_accum() == 16);
}

TEST_CASE("HF config.json loaded, relative to the scenario file", "[loader]") {
    Fixture fx;
    fx.dir.write("hf/config.json", kLlamaConfig);
    const Plan p = fx.load(replace(kBase, "model: tiny", "model: {hf_config: hf/config.json}")).plans[0];
    CHECK(p.model.name == "test/llama-mini");
    CHECK(p.model.layers == 6);
    CHECK(p.model.hidden == 512);
    CHECK(p.model.heads == 8);
    CHECK(p.model.kv_heads == 2);
    CHECK(p.model.head_dim == 64);
    CHECK(p.model.ffn == 1376);
    CHECK(p.model.ffn_type == FfnType::swiglu);
    CHECK(p.model.vocab == 32000);
    CHECK(p.model.tied_embeddings);
}

TEST_CASE("a profile override (--profile) replaces cluster.gpu, which is then not required", "[loader]") {
    Fixture fx;
    LoadOptions opts = fx.opts;
    opts.profile_override = fx.dir.path() / "hardware" / "gpu-bf16.yaml";
    const Scenario sc = load_scenario_text(replace(kBase, "  gpu: gpu-fp8\n", "  nodes: 1\n"), fx.scenario_name(), opts);
    CHECK(sc.plans[0].hardware.id == "gpu-bf16");
}

// ---------------------------------------------------------------------------------------------
// Profiles: resolution, round trip, safe writes

TEST_CASE("resolve_profile by id and by path", "[loader][profile]") {
    Fixture fx;
    CHECK(resolve_profile("gpu-fp8", fx.dir.path(), fx.dir.path()).id == "gpu-fp8");
    CHECK(resolve_profile("hardware/gpu-bf16.yaml", fx.dir.path(), fx.dir.path()).id == "gpu-bf16");
    CHECK(profile_path("x", "/a", "/d") == fs::path("/d/hardware/x.yaml"));
    CHECK(profile_path("p/x.yaml", "/a", "/d") == fs::path("/a/p/x.yaml"));
    CHECK_THROWS_WITH(resolve_profile("nope", fx.dir.path(), fx.dir.path()),
                      Contains("unknown hardware profile 'nope'") && Contains("known: gpu-bf16, gpu-fp8"));
    CHECK(list_ids(fx.dir.path() / "hardware") == std::vector<std::string>{"gpu-bf16", "gpu-fp8"});
    CHECK(list_ids(fx.dir.path() / "absent").empty());
}

TEST_CASE("profile round trip: write then load gives the same profile, and the same text", "[loader][profile]") {
    Fixture fx;
    HardwareProfile p = load_profile(fx.dir.path() / "hardware" / "gpu-fp8.yaml");
    p.provenance = Provenance::calibrated;
    p.sources["compute.sm_count"] = R"(He said "132": 5% \ yes)";  // quoting and escapes survive
    p.kernel_overhead = Time::ps(4'123'457);                          // not a round number of us
    p.hbm_bandwidth = Bandwidth(3.35e12 / 3.0);                       // no short decimal form
    p.gemm_table.push_back({Precision::fp8, 8192, 8192, 8192, parse_duration("1.25 ms")});
    p.gemm_table.push_back({Precision::bf16, 1024, 4096, 512, Time::ps(12'345'678)});
    p.memory_curve[Precision::bf16] = {parse_duration("5 us"), parse_bandwidth("2.9 TB/s")};
    p.collectives.push_back({"all_reduce", 8, "intra_node", {parse_duration("12 us"), parse_bandwidth("370 GB/s")}});
    p.collective_times.push_back({"reduce_scatter", 16, "inter_node", parse_bytes("4 MiB"), Time::ps(107'654'321)});
    p.sources["calibrated"] = "trainsim-calibrate fit of samples.jsonl";
    p.power_compute_busy = Power(687.25); // a measured, not round, board power
    p.power_comm_busy = Power(350);
    p.power_idle = Power(1000.0 / 3.0); // no short decimal form
    p.power_node_overhead = Power(2800);
    for (const char* k : {"power.compute_busy", "power.comm_busy", "power.idle", "power.node_overhead"})
        p.sources[k] = "test";
    p.host_cpu_speed = 0.8 / 0.97; // no short decimal form
    p.sources["node.host_cpu_speed"] = "test";

    const fs::path out = fx.dir.path() / "written.yaml";
    write_profile(p, out, false);
    const HardwareProfile q = load_profile(out);
    CHECK(q.id == p.id);
    CHECK(q.name == p.name);
    CHECK(q.provenance == Provenance::calibrated);
    CHECK(q.sm_count == p.sm_count);
    CHECK(q.dense_peak == p.dense_peak);
    CHECK(q.unsupported_reason == p.unsupported_reason);
    CHECK(q.gemm_efficiency == p.gemm_efficiency);
    CHECK(q.gemm_tile_m == p.gemm_tile_m);
    CHECK(q.gemm_tile_n == p.gemm_tile_n);
    CHECK(q.attention_fwd_efficiency == p.attention_fwd_efficiency);
    CHECK(q.attention_bwd_efficiency == p.attention_bwd_efficiency);
    CHECK(q.kernel_overhead == p.kernel_overhead);
    CHECK(q.hbm_capacity == p.hbm_capacity);
    CHECK(q.hbm_bandwidth == p.hbm_bandwidth);  // exact, not approximate
    CHECK(q.hbm_efficiency == p.hbm_efficiency);
    CHECK(q.reserved_memory == p.reserved_memory);
    CHECK(q.nvlink_bandwidth == p.nvlink_bandwidth);
    CHECK(q.nvlink_efficiency == p.nvlink_efficiency);
    CHECK(q.nvls == p.nvls);
    CHECK(q.nvls_efficiency == p.nvls_efficiency);
    CHECK(q.pcie_bandwidth == p.pcie_bandwidth);
    CHECK(q.pcie_efficiency == p.pcie_efficiency);
    CHECK(q.intra_node_latency == p.intra_node_latency);
    CHECK(q.inter_node_latency == p.inter_node_latency);
    CHECK(q.nic_efficiency == p.nic_efficiency);
    CHECK(q.comm_compute_slowdown == p.comm_compute_slowdown);
    CHECK(q.default_gpus_per_node == p.default_gpus_per_node);
    CHECK(q.power_compute_busy == p.power_compute_busy); // exact, not approximate
    CHECK(q.power_comm_busy == p.power_comm_busy);
    CHECK(q.power_idle == p.power_idle);
    CHECK(q.power_node_overhead == p.power_node_overhead);
    CHECK(q.host_cpu_speed == p.host_cpu_speed); // exact, not approximate
    CHECK(q.sources == p.sources);
    REQUIRE(q.gemm_table.size() == 2);
    CHECK(q.gemm_table[0].precision == Precision::fp8);
    CHECK(q.gemm_table[0].m == 8192);
    CHECK(q.gemm_table[0].time == parse_duration("1.25 ms"));
    CHECK(q.gemm_table[1].time == Time::ps(12'345'678));
    REQUIRE(q.memory_curve.contains(Precision::bf16));
    CHECK(q.memory_curve.at(Precision::bf16).alpha == parse_duration("5 us"));
    CHECK(q.memory_curve.at(Precision::bf16).beta_bw == parse_bandwidth("2.9 TB/s"));
    REQUIRE(q.collectives.size() == 1);
    CHECK(q.collectives[0].op == "all_reduce");
    CHECK(q.collectives[0].group_size == 8);
    CHECK(q.collectives[0].scope == "intra_node");
    CHECK(q.collectives[0].curve.beta_bw == parse_bandwidth("370 GB/s"));
    REQUIRE(q.collective_times.size() == 1);
    CHECK(q.collective_times[0].op == "reduce_scatter");
    CHECK(q.collective_times[0].group_size == 16);
    CHECK(q.collective_times[0].scope == "inter_node");
    CHECK(q.collective_times[0].bytes == parse_bytes("4 MiB"));
    CHECK(q.collective_times[0].time == Time::ps(107'654'321));

    // Writing what was read gives the same text.
    const fs::path again = fx.dir.path() / "again.yaml";
    write_profile(q, again, false);
    auto slurp = [](const fs::path& f) {
        std::ifstream in(f);
        std::stringstream s;
        s << in.rdbuf();
        return s.str();
    };
    CHECK(slurp(again) == slurp(out));

    // And the A100-like profile (unsupported fp8, no NVLS) round-trips too.
    const HardwareProfile a = load_profile(fx.dir.path() / "hardware" / "gpu-bf16.yaml");
    write_profile(a, fx.dir.path() / "a.yaml", false);
    const HardwareProfile b = load_profile(fx.dir.path() / "a.yaml");
    CHECK(b.unsupported_reason == a.unsupported_reason);
    CHECK(b.dense_peak == a.dense_peak);
    CHECK_FALSE(b.nvls);
}

TEST_CASE("write_profile never overwrites unless forced, and never writes a value without a source",
          "[loader][profile]") {
    Fixture fx;
    const HardwareProfile p = load_profile(fx.dir.path() / "hardware" / "gpu-fp8.yaml");
    const fs::path out = fx.dir.path() / "out.yaml";
    write_profile(p, out, false);
    CHECK_THROWS_WITH(write_profile(p, out, false), Contains(out.string()) && Contains("refusing to overwrite"));
    HardwareProfile changed = p;
    changed.sm_count = 100;
    write_profile(changed, out, true);
    CHECK(load_profile(out).sm_count == 100);

    HardwareProfile unsourced = p;
    unsourced.sources.erase("memory.hbm_bandwidth");
    try {
        write_profile(unsourced, fx.dir.path() / "unsourced.yaml", false);
        FAIL("expected a ProfileError");
    } catch (const ProfileError& e) {
        REQUIRE(e.diagnostics().size() == 1);
        CHECK(e.diagnostics()[0].key == "memory.hbm_bandwidth");
        CHECK_THAT(e.diagnostics()[0].message, Contains("no source"));
    }
    CHECK_FALSE(fs::exists(fx.dir.path() / "unsourced.yaml"));
    // No temporary files are left behind.
    for (const auto& entry : fs::directory_iterator(fx.dir.path()))
        CHECK(entry.path().filename().string().find(".tmp-") == std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// The shipped data

TEST_CASE("every shipped hardware profile and model preset loads cleanly", "[data]") {
    const fs::path data = TRAINSIM_TEST_DATA_DIR;
    const auto profiles = list_ids(data / "hardware");
    const auto presets = list_ids(data / "models");
    CHECK(profiles.size() >= 8);
    CHECK(presets.size() >= 12);
    for (const auto& id : profiles) {
        INFO("profile " << id);
        try {
            const HardwareProfile p = resolve_profile(id, data, data);
            CHECK(p.id == id);
        } catch (const InputError& e) {
            FAIL(e.what());
        }
    }
    for (const auto& id : presets) {
        INFO("preset " << id);
        try {
            const ModelArch m = load_preset(id, data);
            CHECK(m.layers > 0);
        } catch (const InputError& e) {
            FAIL(e.what());
        }
    }
}

TEST_CASE("a copied profile with an edited link rate drops the measured tables it contradicts, naming the key",
          "[loader][profile]") {
    // Issue #45: an A100 profile copied to describe an A800 (NVLink 400 GB/s bidirectional, 200 GB/s
    // per direction, instead of the A100's 600 / 300) kept the A100's measured collective table,
    // which overrode the edited rate: the slower link came out faster. The shipped table records
    // the figure it was measured on (calibrated.measured_on), and the loader drops what an edit
    // contradicts.
    const fs::path shipped = fs::path(TRAINSIM_TEST_DATA_DIR) / "hardware" / "a100-sxm-80gb.yaml";
    const auto stock = load_profile(shipped);
    REQUIRE_FALSE(stock.collective_times.empty());
    CHECK(stock.measured_on.at("interconnect.nvlink_bandwidth") == "300 GB/s");
    CHECK(stock.warnings.empty());

    std::ifstream in(shipped);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    const std::string from = "nvlink_bandwidth: {value: \"300 GB/s\"";
    const auto at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), "nvlink_bandwidth: {value: \"200 GB/s\"");
    const fs::path dir = fs::temp_directory_path() / fmt::format("trainsim-a800-{}", std::random_device{}());
    fs::create_directories(dir);
    const fs::path copy = dir / "a800.yaml";
    std::ofstream(copy) << text;
    const auto a800 = load_profile(copy);
    CHECK(a800.nvlink_bandwidth.value() == 200e9);
    CHECK(a800.collective_times.empty()); // every row was intra-node, on the NVLink
    REQUIRE(a800.warnings.size() == 1);
    CHECK(a800.warnings[0].key == "calibrated.measured_on.interconnect.nvlink_bandwidth");
    CHECK(a800.warnings[0].file == copy.string());
    CHECK(a800.warnings[0].line > 0);
    // A scenario on the copy says so among its warnings.
    LoadOptions opts;
    opts.data_dir = TRAINSIM_TEST_DATA_DIR;
    const auto sc = load_scenario_text(
        fmt::format("model: llama2-7b\ntraining: {{tokens: 1B, seq_len: 4096, global_batch: 64, micro_batch: 1}}\n"
                    "parallel: {{tp: 8, pp: 1, dp: auto}}\nprecision: bf16\n"
                    "cluster: {{gpu: \"{}\", nodes: 1, gpus_per_node: 8}}\n",
                    copy.string()),
        "a800 scenario", opts);
    CHECK(std::any_of(sc.warnings.begin(), sc.warnings.end(), [](const std::string& w) {
        return w.find("calibrated.measured_on.interconnect.nvlink_bandwidth") != std::string::npos;
    }));
    // A NIC-rate edit does not touch intra-node tables.
    std::string nic = ss.str();
    const std::string rate = "nic_rate: {value: \"200 Gbit/s\"";
    REQUIRE(nic.find(rate) != std::string::npos);
    nic.replace(nic.find(rate), rate.size(), "nic_rate: {value: \"100 Gbit/s\"");
    std::ofstream(dir / "nic.yaml") << nic;
    const auto slower_nic = load_profile(dir / "nic.yaml");
    CHECK(slower_nic.collective_times.size() == stock.collective_times.size());
    CHECK(slower_nic.warnings.empty());
    // A fingerprint key outside the list, or a figure without its unit, is a load error.
    std::string bad = ss.str();
    bad.replace(bad.find("measured_on: {"), 14, "measured_on: {interconnect.nvlink_rate: \"1 GB/s\", ");
    std::ofstream(dir / "bad.yaml") << bad;
    CHECK_THROWS_AS(load_profile(dir / "bad.yaml"), ProfileError);
    fs::remove_all(dir);
}
