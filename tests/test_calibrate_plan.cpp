// Measurement plans (the shapes the simulator needs are the ones measured), collective group
// sizes and scopes, the normalisations, the thread collectives' arithmetic, and the file
// rendezvous that bootstraps multi-process runs.
#include "fixtures.hpp"
#include "test_calibrate_support.hpp"

#include "backends/cpu_collectives.hpp"  // calibrate/src: the CPU backend's thread collectives
#include "trainsim/calibrate/backends/cpu_backend.hpp"
#include "trainsim/calibrate/core/calibrate_error.hpp"
#include "trainsim/calibrate/measure/plan.hpp"
#include "trainsim/calibrate/measure/rendezvous.hpp"
#include "trainsim/model/workload/workload.hpp"

#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <thread>
#include <tuple>

using namespace trainsim;
using namespace trainsim::calibrate;

TEST_CASE("every plan has unique keys and well-formed descriptors", "[calibrate][plan]") {
    for (const char* backend : {"cpu", "cuda"})
        for (auto kind : {PlanKind::tiny, PlanKind::quick, PlanKind::full})
            for (int world : {1, 2, 8}) {
                const auto plan = make_plan(kind, PlanContext{backend, world, {}});
                std::set<std::string> keys;
                for (const auto& d : plan) {
                    INFO(d.key);
                    CHECK(keys.insert(d.key).second);
                    CHECK(d.key == make_key(d));
                    CHECK(d.iters >= 1);
                    if (d.kind == OpKind::collective) {
                        // Whole elements, split evenly over the group (kernels/nccl_comm.hpp).
                        const double unit = Descriptor::element_bytes(d.dtype) * d.group_size;
                        CHECK(std::fmod(d.bytes, unit) == 0.0);
                        CHECK(d.group_size <= world);
                    }
                    if (d.kind == OpKind::gemm && d.dtype.starts_with("fp8")) {
                        // cuBLASLt FP8 needs multiples of 16; a plan shape that is not would only
                        // ever be recorded as unsupported.
                        CHECK(d.m % 16 == 0);
                        CHECK(d.n % 16 == 0);
                        CHECK(d.k % 16 == 0);
                    }
                    if (d.kind == OpKind::memory && d.row > 0) CHECK(d.elements % (32 * d.row) == 0);
                }
            }
}

TEST_CASE("the CUDA plans measure every GEMM shape the simulator builds for their layers", "[calibrate][plan]") {
    // Llama-2 7B at TP 1/2/4/8 with 4096 tokens per micro-batch (the quick plan's reference).
    const auto plan = make_plan(PlanKind::quick, PlanContext{"cuda", 8, {}});
    std::set<std::tuple<std::string, std::int64_t, std::int64_t, std::int64_t>> measured;
    for (const auto& d : plan)
        if (d.kind == OpKind::gemm && d.algo == AlgoChoice::first) measured.insert({d.dtype, d.m, d.n, d.k});
    for (int tp : {1, 2, 4, 8}) {
        model::Plan p = test::small_plan(tp, 1, 1, 8, 1);
        p.model.name = "llama2-7b";
        p.model.hidden = 4096;
        p.model.heads = 32;
        p.model.kv_heads = 32;
        p.model.head_dim = 128;
        p.model.ffn = 11008;
        p.model.ffn_type = model::FfnType::swiglu;
        p.model.vocab = 32000;
        p.training.seq_len = 4096;
        for (auto prec : {model::Precision::bf16, model::Precision::fp8}) {
            p.precision = prec;
            const auto g = model::build_workload(p);
            int gemms = 0;
            for (const auto& op : g.protos) {
                if (op.kind != model::OpKind::gemm) continue;
                ++gemms;
                INFO("tp " << tp << " " << op.name << " " << op.m << "x" << op.n << "x" << op.k);
                const bool bf16 = measured.contains({"bf16", op.m, op.n, op.k});
                const bool fp8 = measured.contains({"fp8_e4m3", op.m, op.n, op.k}) ||
                                 measured.contains({"fp8_e5m2xfp8_e4m3", op.m, op.n, op.k}) ||
                                 measured.contains({"fp8_e4m3xfp8_e5m2", op.m, op.n, op.k});
                CHECK((op.precision == model::Precision::fp8 ? fp8 : bf16));
            }
            CHECK(gemms >= 15);
        }
    }
}

TEST_CASE("layer GEMMs follow the simulator's (m, n, k) convention", "[calibrate][plan]") {
    // Llama-2 70B (GQA, 8 KV heads) at TP 8, 4096 tokens: QKV width (64 + 2*8) * 128 / 8 = 1280.
    const LayerModel m{"llama2-70b", 8192, 64, 8, 128, 28672, 32000, true};
    const auto g = layer_gemms(m, 8, 4096);
    REQUIRE(g.size() == 15);
    auto find = [&](const std::string& name) {
        return *std::find_if(g.begin(), g.end(), [&](const LayerGemm& x) { return x.name == name; });
    };
    CHECK(std::tuple(find("qkv").m, find("qkv").n, find("qkv").k) == std::tuple(4096, 1280, 8192));
    CHECK(std::tuple(find("fc1").m, find("fc1").n, find("fc1").k) == std::tuple(4096, 2 * 3584, 8192));
    CHECK(std::tuple(find("fc2_dgrad").m, find("fc2_dgrad").n, find("fc2_dgrad").k) == std::tuple(4096, 3584, 8192));
    CHECK(std::tuple(find("qkv_wgrad").m, find("qkv_wgrad").n, find("qkv_wgrad").k) == std::tuple(1280, 8192, 4096));
    CHECK(find("lm_head").n == 4000);
    CHECK(find("qkv_wgrad").pass == LayerGemm::Pass::wgrad);
}

TEST_CASE("normalisations: FLOPs, bytes moved and nccl-tests bus factors", "[calibrate][plan]") {
    Descriptor g = test::gemm_desc(8192, 8192, 8192, "bf16");
    CHECK(g.flops() == 2.0 * 8192.0 * 8192.0 * 8192.0);
    CHECK(g.bytes_moved() == 3.0 * 2.0 * 8192.0 * 8192.0);
    Descriptor a;
    a.kind = OpKind::attention;
    a.op = "attention_fwd";
    a.dtype = "bf16";
    a.batch_heads = 32;
    a.seq = 4096;
    a.head_dim = 128;
    // FlashAttention convention, causal: 4 * bh * d * s(s+1)/2 (model/workload.cpp).
    CHECK(a.flops() == 4.0 * 32 * 128 * 4096.0 * 4097.0 / 2.0);
    a.op = "attention_bwd";
    CHECK(a.flops() == 2.5 * 4.0 * 32 * 128 * 4096.0 * 4097.0 / 2.0);
    CHECK(test::memory_desc("copy", 1000, "bf16").bytes_moved() == 4000);
    CHECK(test::memory_desc("triad", 1000, "bf16").bytes_moved() == 6000);
    CHECK(test::memory_desc("adam", 1000, "bf16").bytes_moved() == 26000);
    CHECK(test::collective_desc("all_reduce", 8, 1e6).bus_factor() == Approx(2.0 * 7 / 8));
    CHECK(test::collective_desc("all_gather", 8, 1e6).bus_factor() == Approx(7.0 / 8));
    CHECK(test::collective_desc("reduce_scatter", 4, 1e6).bus_factor() == Approx(3.0 / 4));
    CHECK(test::collective_desc("all_to_all", 2, 1e6).bus_factor() == Approx(0.5));
    CHECK(test::collective_desc("send_recv", 8, 1e6).bus_factor() == 1.0);
}

TEST_CASE("collective group sizes and scopes", "[calibrate][plan]") {
    CHECK(group_sizes(1).empty());
    CHECK(group_sizes(2) == std::vector<int>{2});
    CHECK(group_sizes(6) == std::vector<int>{2, 4, 6});
    CHECK(group_sizes(8) == std::vector<int>{2, 4, 8});
    // A single GPU: nothing to communicate with; the overlap GEMMs run alone only.
    for (const auto& d : make_plan(PlanKind::quick, PlanContext{"cuda", 1, {}})) {
        CHECK(d.kind != OpKind::collective);
        if (d.kind == OpKind::overlap) CHECK_FALSE(d.under_all_reduce());
    }
    // Two hosts of two GPUs: pairs stay on a host, the group of four crosses hosts.
    const auto plan = make_plan(PlanKind::tiny, PlanContext{"cuda", 4, {"a", "a", "b", "b"}});
    int seen = 0;
    for (const auto& d : plan) {
        if (d.kind != OpKind::collective) continue;
        ++seen;
        CHECK(d.scope == (d.group_size == 2 ? "intra_node" : "inter_node"));
    }
    CHECK(seen > 0);
}

TEST_CASE("the CPU backend refuses what a CPU cannot compute, with the reason", "[calibrate][plan]") {
    const auto be = make_cpu_backend(2);
    const auto why = be->unsupported(test::gemm_desc(64, 64, 64, "fp8_e4m3"));
    REQUIRE(why);
    CHECK_THAT(*why, Catch::Matchers::Contains("fp32 only"));
    CHECK_FALSE(be->unsupported(test::gemm_desc(64, 64, 64, "fp32")));
    Descriptor c = test::collective_desc("all_reduce", 4, 4096);
    c.dtype = "fp32";
    CHECK(be->unsupported(c));  // 4 ranks, 2 threads
}

TEST_CASE("thread collectives compute what NCCL's do", "[calibrate][plan]") {
    for (int n : {2, 3, 4}) {
        INFO("ranks " << n);
        detail::ThreadTeam team(n);
        const std::size_t bytes = 4 * 12 * 5;  // 60 floats: 12 x 5 splits evenly over 2, 3, 4
        // all_reduce: every rank ends with the element-wise sum of every rank's input.
        team.prepare("all_reduce", bytes);
        std::vector<float> sum(team.input(0).size(), 0.0f);
        for (int r = 0; r < n; ++r)
            for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += team.input(r)[i];
        team.run();
        for (int r = 0; r < n; ++r)
            for (std::size_t i = 0; i < sum.size(); ++i) CHECK(team.input(r)[i] == Approx(sum[i]));
        // all_gather: every rank ends with every rank's first part, in rank order.
        team.prepare("all_gather", bytes);
        team.run();
        const std::size_t part = team.input(0).size() / static_cast<std::size_t>(n);
        for (int r = 0; r < n; ++r)
            for (int src = 0; src < n; ++src)
                for (std::size_t i = 0; i < part; ++i)
                    CHECK(team.output(r)[static_cast<std::size_t>(src) * part + i] == team.input(src)[i]);
        // all_to_all: rank r's part p is rank p's part r.
        team.prepare("all_to_all", bytes);
        team.run();
        for (int r = 0; r < n; ++r)
            for (int p = 0; p < n; ++p)
                for (std::size_t i = 0; i < part; ++i)
                    CHECK(team.output(r)[static_cast<std::size_t>(p) * part + i] ==
                          team.input(p)[static_cast<std::size_t>(r) * part + i]);
    }
}

TEST_CASE("file rendezvous: every rank gets rank 0's id and every host", "[calibrate][plan][rendezvous]") {
    test::ScratchDir dir;
    constexpr int kWorld = 3;
    std::vector<RendezvousResult> got(kWorld);
    std::vector<std::thread> ranks;
    for (int r = 0; r < kWorld; ++r)
        ranks.emplace_back([&, r] {
            got[static_cast<std::size_t>(r)] =
                rendezvous(dir.path(), "s1", r, kWorld, [] { return std::vector<unsigned char>{0xde, 0xad, 0x00, 0x7f}; },
                           std::chrono::seconds(20));
        });
    for (auto& t : ranks) t.join();
    for (const auto& g : got) {
        CHECK(g.id == std::vector<unsigned char>{0xde, 0xad, 0x00, 0x7f});
        CHECK(g.hosts.size() == kWorld);
        CHECK(g.hosts[0] == host_name());
    }
}

TEST_CASE("file rendezvous times out naming the missing ranks", "[calibrate][plan][rendezvous]") {
    test::ScratchDir dir;
    try {
        (void)rendezvous(dir.path(), "s2", 0, 3, [] { return std::vector<unsigned char>{1}; },
                         std::chrono::milliseconds(100));
        FAIL("expected a timeout");
    } catch (const CalibrationInputError& e) {
        CHECK_THAT(e.diagnostics().at(0).message, Catch::Matchers::Contains("ranks 1, 2 did not show up"));
    }
}

TEST_CASE("the GEMM is also timed after sustained load, alone and under an all-reduce", "[calibrate][plan]") {
    // Same shape and group as the short pair, after a long untimed load: 20,000 calls of 8192^3
    // BF16 (~30 s on an H100) in the quick plan, 40,000 in the full one; a fifth of that under the
    // all-reduce, which runs right after and whose calls each wait for a background all-reduce.
    for (auto [kind, calls] : {std::pair{PlanKind::quick, 20000}, std::pair{PlanKind::full, 40000}}) {
        const auto plan = make_plan(kind, PlanContext{"cuda", 8, {}});
        std::map<std::string, const Descriptor*> by_op;
        for (const auto& d : plan)
            if (d.kind == OpKind::overlap) by_op[d.op] = &d;
        REQUIRE(by_op.size() == 4);
        const auto& alone = *by_op.at("gemm_alone");
        for (const char* op : {"gemm_sustained_alone", "gemm_sustained_under_all_reduce"}) {
            INFO(op);
            const auto& d = *by_op.at(op);
            CHECK(d.sustained());
            CHECK(d.warmup == (d.under_all_reduce() ? calls / 5 : calls));
            CHECK(std::tie(d.m, d.n, d.k, d.group_size, d.dtype) ==
                  std::tie(alone.m, alone.n, alone.k, alone.group_size, alone.dtype));
            CHECK(d.under_all_reduce() == (d.comm_bytes > 0));
        }
        CHECK_FALSE(alone.sustained());
        CHECK(alone.warmup < 10);
    }
    // One GPU: the GEMM alone, short and after sustained load (enough for the clock ratio).
    std::set<std::string> single;
    for (const auto& d : make_plan(PlanKind::quick, PlanContext{"cuda", 1, {}}))
        if (d.kind == OpKind::overlap) single.insert(d.op);
    CHECK(single == std::set<std::string>{"gemm_alone", "gemm_sustained_alone"});
}
