// The profiles of the cards renters are offered (issue #42 item 1): A800, A100 PCIe 40GB, H20, L20,
// L40S, RTX 4090, RTX 3090, B200. Each expected value is derived here from a datasheet or
// whitepaper figure (SMs x clock x FLOP per clock, bus width x data rate) or from a closed form of the
// network model (bytes over the slowest link of the route), not read back from the profile.
#include "fixtures.hpp"
#include "cli_runner.hpp"
#include "scratch_dir.hpp"
#include "trainsim/model/input/loader.hpp"
#include "trainsim/model/input/profile_io.hpp"
#include "trainsim/model/workload/workload.hpp"
#include "trainsim/sim/cost/compute_cost.hpp"
#include "trainsim/sim/network/network.hpp"
#include "trainsim/sim/network/topology.hpp"
#include "trainsim/sim/run/estimate.hpp"
#include "trainsim/sim/step/executor.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

using namespace trainsim;
using model::CollectiveOp;
using model::Precision;

namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kNewCards{"a800-sxm-80gb", "a100-pcie-40gb", "h20",       "l20",
                                         "l40s",          "rtx-4090",       "rtx-3090", "b200"};

model::HardwareProfile card(const std::string& id) { return model::resolve_profile(id, ".", TRAINSIM_TEST_DATA_DIR); }

double peak(const model::HardwareProfile& hw, Precision p) { return hw.dense_peak.at(p).value(); }

model::Cluster one_node(const model::HardwareProfile& hw, int gpus = 8) {
    model::Cluster c;
    c.gpus_per_node = gpus;
    c.nodes = 1;
    c.nics_per_node = hw.default_nics_per_node;
    c.nic_rate = hw.default_nic_rate;
    c.intra = hw.nvlink_bridge_pairs ? model::IntraFabric::nvlink_bridge : model::IntraFabric::nvswitch;
    return c;
}

// Kinds of the links on the route from GPU a to GPU b.
std::vector<sim::LinkKind> route_kinds(const sim::Topology& t, int a, int b) {
    std::vector<sim::LinkId> r;
    t.route(a, b, r);
    std::vector<sim::LinkKind> k;
    for (const auto id : r) k.push_back(t.link(id).kind);
    return k;
}

long count_kind(const std::vector<sim::LinkKind>& k, sim::LinkKind x) { return std::count(k.begin(), k.end(), x); }

// Ring all-reduce busbw over one node's 8 GPUs (large messages, Simple protocol), GB/s.
double ring_busbw(const model::HardwareProfile& hw, const model::Cluster& c) {
    const sim::AnalyticNetwork net(hw, c);
    return net.collectives()
               .bus_bandwidth(CollectiveOp::all_reduce, sim::Algorithm::ring, sim::place_group(1, 8, 8))
               .value() /
           1e9;
}

// The topology's fixed socket-interconnect figure (NCCL topo.h SRP_QPI_BW) and its DRAM streaming
// fraction (sim/src/network/topology.cpp).
constexpr double kSocketLink = 22e9;
constexpr double kDramStream = 0.8;

} // namespace

TEST_CASE("every new card profile loads by its id, with a source for every value", "[cards][data]") {
    for (const auto& id : kNewCards) {
        INFO(id);
        const auto hw = card(id);
        CHECK(hw.id == id);
        CHECK(hw.provenance == model::Provenance::datasheet_published);
        CHECK(hw.warnings.empty());
        CHECK(hw.has_power());
        REQUIRE(hw.sources.size() > 30);
        for (const auto& [key, text] : hw.sources) {
            INFO(key);
            CHECK(text.size() > 20);  // a citation or an 'estimated:' with its reasoning, never empty
        }
        // The peaks are dense ones: FP8 where supported is exactly twice BF16 (every Ada, Hopper
        // and Blackwell datasheet), within the datasheets' rounding.
        if (hw.dense_peak.contains(Precision::fp8))
            CHECK(peak(hw, Precision::fp8) == Approx(2 * peak(hw, Precision::bf16)).epsilon(0.015));
        else
            CHECK(hw.unsupported_reason.contains(Precision::fp8));
    }
}

TEST_CASE("GeForce peaks are the FP32-accumulate rate: half the FP16-accumulate headline", "[cards][data]") {
    // Ada whitepaper, RTX 4090: 128 SMs x 2.52 GHz; the headline FP16 tensor figure (FP16
    // accumulate) is 128 x 2.52e9 x 1024 = 330.3 TFLOP/s; with FP32 accumulate (what training GEMMs
    // use) GeForce runs 512 FLOP/clk/SM: 165.2. FP8: 1024 FLOP/clk/SM with FP32 accumulate = 330.3.
    const auto g4 = card("rtx-4090");
    CHECK(g4.sm_count == 128);
    const double headline_4090 = 128 * 2.52e9 * 1024;
    CHECK(peak(g4, Precision::bf16) == Approx(headline_4090 / 2).epsilon(0.001));
    CHECK(peak(g4, Precision::fp16) == Approx(headline_4090 / 2).epsilon(0.001));
    CHECK(peak(g4, Precision::fp8) == Approx(headline_4090).epsilon(0.001));
    // GA102 whitepaper, RTX 3090: 82 SMs x 1.695 GHz; FP16-accumulate headline 142 TFLOP/s,
    // FP32 accumulate 71.
    const auto g3 = card("rtx-3090");
    CHECK(g3.sm_count == 82);
    const double headline_3090 = 82 * 1.695e9 * 1024;
    CHECK(headline_3090 / 1e12 == Approx(142).epsilon(0.005));
    CHECK(peak(g3, Precision::bf16) == Approx(headline_3090 / 2).epsilon(0.005));
    CHECK_FALSE(g3.dense_peak.contains(Precision::fp8));  // Ampere
    // The data-center Ada card runs FP32 accumulation at the full rate: L40S's datasheet 362.05
    // TFLOP/s is 142 SMs x 1024 FLOP/clk/SM at ~2.49 GHz, twice the GeForce per-SM rate.
    const auto l40s = card("l40s");
    CHECK(peak(l40s, Precision::bf16) / (142 * 1024) / 1e9 == Approx(2.49).epsilon(0.01));
    // L20: 92 SMs x 512 FLOP/clk/SM x 2.54 GHz = 119.6 (datasheet 119.5; FP32 59.8 = 92 x 256 x 2.54).
    CHECK(peak(card("l20"), Precision::bf16) == Approx(92 * 512 * 2.54e9).epsilon(0.005));
}

TEST_CASE("capacities, memory rates and board powers follow the datasheets", "[cards][data]") {
    struct Row {
        std::string id;
        double capacity_mib, dram_bytes_per_s, watts;
    };
    // DRAM rates: bus width / 8 x data rate (RTX 4090: 384 bit x 21 Gbps; RTX 3090: 384 x 19.5;
    // B200: 7680 bit x 3996 MHz x 2 per pytorch/ao PR #4002), or the datasheet figure.
    const std::vector<Row> rows{
        {"rtx-4090", 24564, 384 / 8.0 * 21e9, 450},  {"rtx-3090", 24576, 384 / 8.0 * 19.5e9, 350},
        {"l40s", 46068, 864e9, 350},                 {"l20", 46068, 864e9, 275},
        {"h20", 97285, 4.0e12, 400},                 {"b200", 182631, 7680 / 8.0 * 3996e6 * 2, 1000},
        {"a100-pcie-40gb", 40536, 1555e9, 250},      {"a800-sxm-80gb", 81920, 2039e9, 400},
    };
    for (const auto& r : rows) {
        INFO(r.id);
        const auto hw = card(r.id);
        CHECK(hw.hbm_capacity.value() == Approx(r.capacity_mib * model::kMiB));
        CHECK(hw.hbm_bandwidth.value() == Approx(r.dram_bytes_per_s).epsilon(0.001));
        CHECK(hw.power_compute_busy.value() == Approx(r.watts));
        CHECK(hw.default_gpus_per_node == 8);
    }
}

TEST_CASE("the A800 profile is the A100 SXM4 80GB one with the 400 GB/s NVLink, nothing else", "[cards][data]") {
    auto a100 = card("a100-sxm-80gb");
    auto a800 = card("a800-sxm-80gb");
    // NVLink 600 vs 400 GB/s bidirectional (A100 / A800 datasheets): 300 vs 200 per direction.
    CHECK(a100.nvlink_bandwidth.value() == Approx(300e9));
    CHECK(a800.nvlink_bandwidth.value() == Approx(200e9));
    CHECK(a800.collective_times.empty());  // the A100's tables were measured at 300 GB/s
    // Everything else is equal: copy the two differences over and compare whole profiles.
    a100.nvlink_bandwidth = a800.nvlink_bandwidth;
    a100.collective_times.clear();
    a100.collectives.clear();
    a100.measured_on.clear();
    CHECK(a100.dense_peak == a800.dense_peak);
    CHECK(a100.gemm_efficiency == a800.gemm_efficiency);
    CHECK(a100.sm_count == a800.sm_count);
    CHECK(a100.hbm_capacity == a800.hbm_capacity);
    CHECK(a100.hbm_bandwidth == a800.hbm_bandwidth);
    CHECK(a100.nvlink_efficiency == a800.nvlink_efficiency);
    CHECK(a100.attention_fwd_efficiency == a800.attention_fwd_efficiency);
    CHECK(a100.attention_bwd_efficiency == a800.attention_bwd_efficiency);
    CHECK(a100.sustained_clock_ratio == a800.sustained_clock_ratio);
    CHECK(a100.kernel_overhead == a800.kernel_overhead);
    CHECK(a100.comm_compute_slowdown == a800.comm_compute_slowdown);
    CHECK(a100.default_nic_rate == a800.default_nic_rate);
    CHECK(a100.power_compute_busy == a800.power_compute_busy);
}

TEST_CASE("8x A800 vs 8x A100, TP 8: every kernel takes the same time, the NVLink collectives follow 200 vs 300 "
          "GB/s",
          "[cards][data]") {
    auto a100 = card("a100-sxm-80gb");
    // The A100's measured nccl-tests curves are a measurement of A100 hardware: compare the two
    // profiles through the same analytic model.
    a100.collective_times.clear();
    a100.collectives.clear();
    const auto a800 = card("a800-sxm-80gb");

    // The fabric alone: ring busbw = link rate x nvlink_efficiency on both, so the ratio is 300 / 200.
    const double bw100 = ring_busbw(a100, one_node(a100)), bw800 = ring_busbw(a800, one_node(a800));
    CHECK(bw100 == Approx(300 * 0.77).epsilon(1e-6));
    CHECK(bw800 == Approx(200 * 0.77).epsilon(1e-6));

    // A whole simulated step of the same TP 8 plan.
    auto plan = test::small_plan(8, 1, 1, 8, 2);
    plan.cluster = one_node(a100);
    plan.hardware = a100;
    const auto graph = model::build_workload(plan);
    sim::ExecOptions opt;
    opt.record_trace = true;
    auto run = [&](model::HardwareProfile hw, bool contention) {
        if (!contention) hw.comm_compute_slowdown = 0;
        auto p = plan;
        p.hardware = hw;
        const sim::ComputeCost cc(hw);
        const sim::AnalyticNetwork net(hw, p.cluster);
        return sim::execute_step(p, graph, cc, net, opt);
    };
    auto is_collective = [&](const sim::TraceEvent& e) {
        return graph.protos[graph.stages[0].ops[e.op].proto].kind == model::OpKind::collective;
    };
    auto durations = [](const sim::StepResult& r) {
        std::map<std::tuple<int, int, std::uint32_t>, double> t;
        for (const auto& e : r.trace) t[{e.rank, static_cast<int>(e.stream), e.op}] += (e.end - e.start).seconds();
        return t;
    };
    for (const bool contention : {false, true}) {
        INFO("comm_compute_slowdown " << (contention ? "as shipped" : "0"));
        const auto r100 = run(a100, contention), r800 = run(a800, contention);
        const auto t100 = durations(r100);
        int compute_ops = 0, nvlink_ops = 0;
        double min_ratio = 10, max_ratio = 0;
        for (const auto& e : r800.trace) {
            const auto key = std::make_tuple(e.rank, static_cast<int>(e.stream), e.op);
            REQUIRE(t100.contains(key));
            const double d800 = (e.end - e.start).seconds(), d100 = t100.at(key);
            if (is_collective(e)) {
                ++nvlink_ops;
                min_ratio = std::min(min_ratio, d800 / d100);
                max_ratio = std::max(max_ratio, d800 / d100);
            } else {
                ++compute_ops;
                if (!contention) {
                    CHECK(d800 == Approx(d100).epsilon(1e-12));
                } else {
                    // A kernel that overlaps a collective runs at 1 / (1 + slowdown) while it does
                    // (docs/model.md): a longer collective can slow it by at most that factor.
                    CHECK(d800 >= d100 * (1 - 1e-12));
                    CHECK(d800 <= d100 * (1 + a100.comm_compute_slowdown) * (1 + 1e-12));
                }
            }
        }
        CHECK(compute_ops > 0);
        REQUIRE(nvlink_ops > 0);
        // t = latency + bytes / busbw with the same latency terms: the ratio lies in (1, 300/200],
        // near 1.5 where the bytes dominate.
        CHECK(min_ratio > 1.0);
        CHECK(max_ratio <= 1.5 + 1e-9);
        CHECK(max_ratio > 1.3);
        CHECK(r800.step_time > r100.step_time);
        CHECK(r800.breakdown.forward == r100.breakdown.forward);
        if (!contention) CHECK(r800.breakdown.backward == r100.breakdown.backward);
    }
}

TEST_CASE("without PCIe peer-to-peer, intra-node traffic is staged in host memory", "[cards][network][data]") {
    // RTX 4090 (GeForce): every GPU-to-GPU route goes up to a CPU socket, through its DRAM (written,
    // then read: the DRAM link twice) and down to the receiver.
    const auto g4 = card("rtx-4090");
    REQUIRE(g4.pcie_p2p_disabled);
    const sim::Topology t4(g4, one_node(g4));
    CHECK(t4.via_host_memory());
    for (int b = 1; b < 8; ++b) {
        INFO("0 -> " << b);
        const auto k = route_kinds(t4, 0, b);
        CHECK(count_kind(k, sim::LinkKind::host_memory) == 2);
        CHECK(count_kind(k, sim::LinkKind::nvlink) == 0);
    }
    // The same two GPUs under one PCIe switch on a card with peer-to-peer (L40S): no host memory.
    const auto l40s = card("l40s");
    const sim::Topology tl(l40s, one_node(l40s));
    CHECK_FALSE(tl.via_host_memory());
    CHECK(count_kind(route_kinds(tl, 0, 1), sim::LinkKind::host_memory) == 0);
    CHECK(count_kind(route_kinds(tl, 0, 1), sim::LinkKind::cpu_interconnect) == 0);

    // RTX 3090 with bridges: the two cards of a bridge talk over NVLink, every other pair via host memory.
    const auto g3 = card("rtx-3090");
    REQUIRE(g3.nvlink_bridge_pairs);
    const sim::Topology t3(g3, one_node(g3));
    CHECK(t3.has_nvlink_bridges());
    const auto bridged = route_kinds(t3, 0, 1);
    CHECK(std::all_of(bridged.begin(), bridged.end(), [](sim::LinkKind k) { return k == sim::LinkKind::nvlink; }));
    CHECK(count_kind(route_kinds(t3, 1, 2), sim::LinkKind::host_memory) == 2);
    CHECK(count_kind(route_kinds(t3, 0, 5), sim::LinkKind::host_memory) == 2);
}

TEST_CASE("8x RTX 4090 ring all-reduce: busbw is the closed form of the host-memory route", "[cards][network][data]") {
    // Ring 0 -> 1 -> ... -> 7 -> 0 on 2 sockets x 2 PCIe switches x 2 GPUs. Per byte on each hop:
    // - a switch's up-link carries the hops sent by its 2 GPUs: PCIe x eff / 2;
    // - a socket's DRAM holds the buffers of its 4 receivers, each byte written and read: DRAM per
    //   socket x 0.8 / (4 x 2);
    // - the socket link carries one hop each way (3 -> 4, 7 -> 0): 22 GB/s.
    const auto g4 = card("rtx-4090");
    const double pcie = g4.pcie_bandwidth.value() * g4.pcie_efficiency;
    const double dram = g4.host_memory_bandwidth.value() / 2 * kDramStream;
    const double expected = std::min({pcie / 2, dram / 8, kSocketLink}) / 1e9;
    CHECK(expected == Approx(12.8));  // 32 GB/s x 0.8 / 2: the switch up-links bind
    CHECK(ring_busbw(g4, one_node(g4)) == Approx(expected).epsilon(1e-6));

    // With peer-to-peer (the same card, the flag cleared) a hop inside a switch stays in it, so each
    // up-link carries only the hop that leaves its switch (1 -> 2, 3 -> 4, ...): pcie x eff per byte,
    // and the 22 GB/s socket link binds. The staging costs this card 22 -> 12.8 GB/s.
    auto p2p = g4;
    p2p.pcie_p2p_disabled = false;
    CHECK(ring_busbw(p2p, one_node(p2p)) == Approx(std::min(pcie, kSocketLink) / 1e9).epsilon(1e-6));

    // RTX 3090, bridged pairs: hops 0->1, 2->3, ... on NVLink; 1->2, 3->4, 5->6, 7->0 via host
    // memory (one per switch up- and down-link, two DRAM-staged hops per socket, 3->4 and 7->0
    // across the sockets).
    const auto g3 = card("rtx-3090");
    const double nv = g3.nvlink_bandwidth.value() * g3.nvlink_efficiency;
    const double pcie3 = g3.pcie_bandwidth.value() * g3.pcie_efficiency;
    const double dram3 = g3.host_memory_bandwidth.value() / 2 * kDramStream;
    const double expected3 = std::min({nv, pcie3, dram3 / 4, kSocketLink}) / 1e9;
    CHECK(ring_busbw(g3, one_node(g3)) == Approx(expected3).epsilon(1e-6));
}

TEST_CASE("trainsim collective says where each new card's intra-node traffic goes", "[cards][cli][data]") {
    const std::map<std::string, std::string> path{
        {"rtx-4090", "host_memory"}, {"rtx-3090", "host_memory"}, {"l40s", "pcie"},   {"l20", "pcie"},
        {"a800-sxm-80gb", "nvlink"},  {"h20", "nvlink"},           {"b200", "nvlink"}, {"a100-pcie-40gb", "pcie"},
    };
    for (const auto& [id, where] : path) {
        INFO(id);
        const auto r = test::run_trainsim("collective --gpu " + id + " --op all_reduce --gpus 8 --size 256MiB --json");
        REQUIRE(r.rc == 0);
        const auto j = nlohmann::json::parse(r.out);
        CHECK(j.at("intra_node_path") == where);
        CHECK(j.at("busbw_gbps").get<double>() > 0);
    }
    // A bridged pair of 3090s is all NVLink.
    const auto pair = test::run_trainsim("collective --gpu rtx-3090 --op all_reduce --gpus 2 --size 256MiB --json");
    REQUIRE(pair.rc == 0);
    CHECK(nlohmann::json::parse(pair.out).at("intra_node_path") == "nvlink");
    // The text output names the route.
    const auto text = test::run_trainsim("collective --gpu rtx-4090 --op all_reduce --gpus 8 --size 256MiB");
    REQUIRE(text.rc == 0);
    CHECK(text.out.find("host memory") != std::string::npos);
}

TEST_CASE("trainsim plan answers for 8x RTX 4090", "[cards][cli][data]") {
    // The done-when question of issue #42, on the GeForce card.
    const auto plan = test::run_trainsim("plan --model llama2-7b --gpu rtx-4090 --gpus 8 --tokens 100B --json");
    REQUIRE(plan.rc == 0);
    const auto pj = nlohmann::json::parse(plan.out);
    REQUIRE(pj.contains("plans"));
    CHECK_FALSE(pj.at("plans").empty());
}

TEST_CASE("trainsim simulate runs on every new card id, and its trace says where intra-node traffic goes",
          "[cards][cli][data]") {
    test::ScratchDir dir;
    // simulate, with a trace, of one plan per card (Llama-2 7B, TP 4 x DP 2: fits 24 GB).
    for (const auto& id : kNewCards) {
        INFO(id);
        const auto scen = dir / (id + ".yaml");
        {
            std::ofstream out(scen);
            out << "title: \"" << id << "\"\nmodel: llama2-7b\n"
                << "training: {tokens: 1B, seq_len: 2048, global_batch: 16, micro_batch: 1}\n"
                << "parallel: {tp: 4, pp: 1, dp: auto, sequence_parallel: true, sharding: dist_opt, recompute: full}\n"
                << "precision: bf16\ncluster: {gpu: " << id << ", nodes: 1, gpus_per_node: 8}\n";
        }
        const auto trace = dir / (id + ".trace.json");
        const auto r = test::run_trainsim("simulate '" + scen.string() + "' --json --trace '" + trace.string() + "'");
        REQUIRE(r.rc == 0);
        std::ifstream in(trace);
        const auto t = nlohmann::json::parse(in);
        const auto& other = t.at("otherData");
        CHECK(other.at("gpu") == id);
        // The trace says where intra-node collectives go on a card without PCIe peer-to-peer.
        const bool geforce = id == "rtx-4090" || id == "rtx-3090";
        CHECK(other.contains("intra_node_path") == geforce);
        if (geforce) CHECK(other.at("intra_node_path") == "host_memory");
    }

}

TEST_CASE("trainsim validate accepts a row on every new card id", "[cards][cli][data]") {
    test::ScratchDir dir;
    // A row per card, resolved by its profile id.
    const auto csv = dir / "cards.csv";
    {
        std::ofstream out(csv);
        out << "id,source_group,source,model,layers,hidden,heads,kv_heads,ffn,ffn_type,vocab,seq_len,gpu,num_gpus,tp,"
               "pp,vp,cp,dp,sequence_parallel,sharding,micro_batch,global_batch,recompute,precision,framework,kind,"
               "tokens_per_s_per_gpu,derivation,notes\n";
        int n = 0;
        for (const auto& id : kNewCards)
            out << ++n << ",cards,test row,GPT-1.3B,24,2048,16,16,8192,gelu,51200,2048," << id
                << ",8,1,1,1,1,8,false,dist_opt,1,64,full,bf16,megatron-core,step,1000,,\n";
    }
    const auto v = test::run_trainsim("validate '" + csv.string() + "' --json");
    REQUIRE(v.rc == 0);
    const auto vj = nlohmann::json::parse(v.out);
    REQUIRE(vj.contains("rows"));
    REQUIRE(vj.at("rows").size() == kNewCards.size());
    for (const auto& row : vj.at("rows")) {
        INFO(row.dump());
        CHECK(row.at("predicted_tokens_per_s_per_gpu").get<double>() > 0);
    }
}

TEST_CASE("a profile without peer-to-peer needs the host memory rate, and a bridged node needs NVLink", "[cards][loader]") {
    test::ScratchDir dir;
    const auto src = test::read_text(fs::path(TRAINSIM_TEST_DATA_DIR) / "hardware" / "rtx-4090.yaml");
    auto without = src;
    const auto at = without.find("  host_memory_bandwidth:");
    REQUIRE(at != std::string::npos);
    without.erase(at, without.find('\n', at) - at + 1);
    std::ofstream(dir / "no-host.yaml") << without;
    try {
        (void)model::load_profile(dir / "no-host.yaml");
        FAIL("loaded a no-P2P profile without node.host_memory_bandwidth");
    } catch (const model::InputError& e) {
        CHECK(std::string(e.what()).find("node.host_memory_bandwidth") != std::string::npos);
    }
    // The flags read back exactly as written (profile writer and reader share one table).
    const auto g3 = card("rtx-3090");
    CHECK(g3.pcie_p2p_disabled);
    CHECK(g3.nvlink_bridge_pairs);
    CHECK_FALSE(card("l40s").pcie_p2p_disabled);
    CHECK_FALSE(card("h20").nvlink_bridge_pairs);
}
