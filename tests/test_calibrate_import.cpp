// `trainsim-calibrate import`: published nccl-tests logs (tests/data/nccl-tests/, copied verbatim:
// its README.md gives each file's source) read into samples, every value asserted here being one
// printed in the file; the -J JSON of the same runs and the -I per-iteration columns; the
// refusals (cut or bad JSON, no rows, an op that cannot be told, an inconsistent row, a samples
// file already there); and the whole path: import -> fit -> profile -> the
// simulator's network model gives back each log's busbw from 1 MiB up within 3% (issue's done
// criterion; the fitted profile holds the measured curve, so what is left is print rounding), and
// `trainsim simulate --profile` runs on such a profile. GEMM sweeps as CSV too. Through the
// binary: exit codes, refusals that leave samples.jsonl as it was, --append, fit on the result.
#include "test_calibrate_support.hpp"

#include "trainsim/calibrate/core/calibrate_error.hpp"
#include "trainsim/calibrate/fit/fit.hpp"
#include "trainsim/calibrate/import/import.hpp"
#include "trainsim/calibrate/measure/measure.hpp"
#include "trainsim/model/input/loader.hpp"
#include "trainsim/model/workload/workload.hpp"
#include "trainsim/sim/network/network.hpp"

#include "cli_runner.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <set>

using namespace trainsim;
using namespace trainsim::calibrate;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

namespace fs = std::filesystem;

const std::string kExe = TRAINSIM_CALIBRATE_EXE;
const std::string kData = TRAINSIM_TEST_DATA_DIR;
const fs::path kLogs = fs::path(TRAINSIM_SOURCE_DIR) / "tests" / "data" / "nccl-tests";

std::string log_text(const std::string& name) { return test::read_text(kLogs / name); }

NcclTestsLog parse_log(const std::string& name, const NcclTestsOptions& opts = {}) {
    return parse_nccl_tests_log(log_text(name), (kLogs / name).string(), opts);
}

std::string problems_of(const std::vector<model::Diagnostic>& ps) {
    std::string s;
    for (const auto& p : ps) s += p.format() + "\n";
    return s;
}

// The row of `bytes` (REQUIREd to be there).
const NcclTestsRow& row_at(const NcclTestsLog& log, double bytes) {
    const auto it = std::find_if(log.rows.begin(), log.rows.end(), [&](const auto& r) { return r.bytes == bytes; });
    REQUIRE(it != log.rows.end());
    return *it;
}

// What each published log says, read off the file by eye (tests/data/nccl-tests/README.md lists
// the same 1 MiB and largest rows): op, ranks, hosts, rows with data, and two rows' out-of-place
// time (us) and busbw (GB/s).
struct Expected {
    std::string op;
    int ranks = 0;
    std::vector<std::string> hosts;
    std::size_t rows = 0;
    std::string gpu;
    std::optional<int> iters;
    double b1 = 0, t1 = 0, bw1 = 0;  // a first row: bytes, time, busbw
    double b2 = 0, t2 = 0, bw2 = 0;  // the largest row
};

const std::map<std::string, Expected>& expected_logs() {
    constexpr double MiB = 1048576.0, GiB = 1073741824.0;
    static const std::map<std::string, Expected> e{
        {"a100-8gpu-allreduce-superbench.txt",
         {"all_reduce", 8, {"localhost"}, 32, "A100-SXM4-40GB", 20, MiB, 74.78, 24.54, 8 * GiB, 63896, 235.26}},
        {"a100-8gpu-allgather-superbench.txt",
         {"all_gather", 8, {"localhost"}, 29, "A100-SXM4-40GB", 20, MiB, 72.95, 12.58, 8 * GiB, 33646, 223.39}},
        {"a100-8gpu-reducescatter-superbench.txt",
         {"reduce_scatter", 8, {"localhost"}, 29, "A100-SXM4-40GB", 20, MiB, 72.37, 12.68, 8 * GiB, 32464, 231.52}},
        {"a100-8gpu-alltoall-superbench.txt",
         {"all_to_all", 8, {"localhost"}, 29, "A100-SXM4-40GB", 20, MiB, 87.42, 10.50, 8 * GiB, 33508, 224.31}},
        {"a100-8gpu-allreduce-thanos-blog.txt",
         {"all_reduce", 8, {"thanos"}, 30, "NVIDIA A100-SXM4-80GB", 20, MiB, 52.61, 34.88, 4 * GiB, 32336, 232.44}},
        {"a100-2node-allreduce-aws-dlami-efa.txt",
         {"all_reduce",
          16,
          {"ip-172-31-42-25", "ip-172-31-43-8"},
          28,
          "NVIDIA A100-SXM4-40GB",
          100,
          MiB,
          408.7,
          4.81,
          GiB,
          26416,
          76.21}},
        {"a100-2node-allreduce-aws-workshop-efa.txt",
         {"all_reduce",
          16,
          {"new-st-gpu-1", "new-st-gpu-2"},
          28,
          "NVIDIA A100-SXM4-80GB",
          100,
          MiB,
          307.4,
          6.40,
          GiB,
          25940,
          77.61}},
        {"h100-2node-allreduce-a3mega-ztan.txt",
         {"all_reduce",
          16,
          {"ztan-mig-235z", "ztan-mig-gq73"},
          31,
          "NVIDIA H100 80GB HBM3",
          20,
          MiB,
          203.2,
          9.68,
          8 * GiB,
          47535,
          338.82}},
        {"h100-2node-allreduce-dgx-cnh.txt",
         {"all_reduce",
          16,
          {"dgx-06", "dgx-07"},
          32,
          "NVIDIA H100 80GB HBM3",
          30,
          MiB,
          764.0,
          2.57,
          16 * GiB,
          68195,
          472.35}},
        {"h100-8gpu-allreduce-nccltests290.txt",
         {"all_reduce",
          8,
          {"node005"},
          6,
          "NVIDIA H100 80GB HBM3",
          2,
          128 * MiB,
          613.3,
          382.99,
          4 * GiB,
          15870,
          473.60}},
        {"h100-2node-allreduce-nccltests290-default.txt",
         {"all_reduce",
          16,
          {"node005", "node007"},
          11,
          "NVIDIA H100 80GB HBM3",
          200,
          8 * MiB,
          215.3,
          73.04,
          8 * GiB,
          103530,
          155.57}},
        // Pasted from "# Using devices" on: no header, so no iters.
        {"h100-2node-allreduce-nccltests290-ring.txt",
         {"all_reduce",
          16,
          {"node005", "node007"},
          11,
          "NVIDIA H100 80GB HBM3",
          std::nullopt,
          8 * MiB,
          407.5,
          38.60,
          8 * GiB,
          179148,
          89.90}},
    };
    return e;
}

// The line (1-based) of the first line of `text` that contains `what`.
int line_of(const std::string& text, const std::string& what) {
    const auto at = text.find(what);
    REQUIRE(at != std::string::npos);
    return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
}

// `prefix` before every line of text.
std::string prefix_lines(const std::string& text, const std::string& prefix) {
    std::string out;
    std::size_t pos = 0;
    while (pos < text.size()) {
        const auto nl = text.find('\n', pos);
        out += prefix + text.substr(pos, nl == std::string::npos ? std::string::npos : nl + 1 - pos);
        pos = nl == std::string::npos ? text.size() : nl + 1;
    }
    return out;
}

std::string replace_once(std::string text, const std::string& from, const std::string& to) {
    const auto at = text.find(from);
    REQUIRE(at != std::string::npos);
    return text.replace(at, from.size(), to);
}

model::CollectiveOp op_enum(const std::string& op) {
    for (int i = 0; i < 5; ++i)
        if (model::to_string(static_cast<model::CollectiveOp>(i)) == op) return static_cast<model::CollectiveOp>(i);
    FAIL("unknown op " << op);
    return model::CollectiveOp::all_reduce;
}

} // namespace

// ---- reading the published logs ------------------------------------------------------------------

TEST_CASE("every published nccl-tests log is read with its op, ranks, hosts and printed rows", "[calibrate][import]") {
    std::set<std::string> seen;
    for (const auto& entry : fs::directory_iterator(kLogs)) {
        if (entry.path().extension() != ".txt") continue;
        const std::string name = entry.path().filename().string();
        INFO(name);
        // A log added to tests/data/nccl-tests needs its expected values here.
        REQUIRE(expected_logs().contains(name));
        seen.insert(name);
        const Expected& e = expected_logs().at(name);
        const NcclTestsLog log = parse_log(name);
        INFO(problems_of(log.problems));
        REQUIRE(log.problems.empty());
        CHECK(log.op == e.op);
        CHECK(log.group_size == e.ranks);
        CHECK(log.hosts == e.hosts);
        CHECK(log.nodes == static_cast<int>(e.hosts.size()));
        CHECK(log.scope == (e.hosts.size() > 1 ? "inter_node" : "intra_node"));
        CHECK(log.gpu == e.gpu);
        CHECK(log.iters == e.iters);
        CHECK(log.rows.size() == e.rows);
        REQUIRE(log.samples.size() == log.rows.size());
        const auto& r1 = row_at(log, e.b1);
        CHECK(r1.time_us == e.t1);
        CHECK(r1.busbw_gbps == e.bw1);
        const auto& r2 = row_at(log, e.b2);
        CHECK(r2.time_us == e.t2);
        CHECK(r2.busbw_gbps == e.bw2);
        CHECK(std::max_element(log.rows.begin(), log.rows.end(), [](const auto& a, const auto& b) {
                  return a.bytes < b.bytes;
              })->bytes == e.b2);
        // Each row became a sample of our format: the key fit expects, the time in seconds.
        for (std::size_t i = 0; i < log.rows.size(); ++i) {
            const Sample& s = log.samples[i];
            CHECK(s.desc.kind == OpKind::collective);
            CHECK(s.desc.op == e.op);
            CHECK(s.desc.group_size == e.ranks);
            CHECK(s.desc.scope == log.scope);
            CHECK(s.desc.bytes == log.rows[i].bytes);
            CHECK(s.desc.key == make_key(s.desc));
            CHECK(s.backend == "nccl-tests");
            CHECK(s.time.median == Approx(log.rows[i].time_us * 1e-6).epsilon(1e-12));
            CHECK(s.measured_at.empty());  // a log holds no date: the copy's mtime would be a guess
            // The sample's busbw (our normalisation) is the printed one.
            CHECK(s.busbw() / 1e9 == Approx(log.rows[i].busbw_gbps).margin(0.006 + 1e-3 * log.rows[i].busbw_gbps));
        }
        // Every sample survives the samples.jsonl round trip.
        CHECK(to_json_line(sample_from_json_text(to_json_line(log.samples.front()))) ==
              to_json_line(log.samples.front()));
    }
    CHECK(seen.size() == expected_logs().size());
}

TEST_CASE("old superbench tables: no root column, error column, N/A, size-0 rows and a blank redop",
          "[calibrate][import]") {
    const auto ar = parse_log("a100-8gpu-allreduce-superbench.txt");
    REQUIRE(ar.problems.empty());
    CHECK(ar.skipped.at("rows of size 0 (no data)") == 2);
    CHECK(ar.skipped.at("NCCL log lines") == 1);  // "hostname:3442:3442 [0] NCCL INFO Launch mode Parallel"
    CHECK(ar.op_source == "file name");
    CHECK(row_at(ar, 4).time_us == 34.73);  // the first row with data: 4 B
    CHECK(row_at(ar, 4194304).time_us == 112.0);  // printed with one decimal
    CHECK(row_at(ar, 2147483648.0).time_us == 16215);  // and with none
    // all_to_all leaves blank space where redop would be; all_gather has no redop column.
    const auto a2a = parse_log("a100-8gpu-alltoall-superbench.txt");
    REQUIRE(a2a.problems.empty());
    CHECK(a2a.skipped.at("rows of size 0 (no data)") == 5);
    CHECK(row_at(a2a, 32).time_us == 89.00);
    CHECK(row_at(a2a, 8388608).time_us == 121.1);
    const auto ag = parse_log("a100-8gpu-allgather-superbench.txt");
    REQUIRE(ag.problems.empty());
    CHECK(row_at(ag, 32).time_us == 35.03);
    CHECK(ag.samples.front().desc.dtype == "fp32");  // "float"
}

TEST_CASE("rows without in-place columns or with extra columns after them read the same", "[calibrate][import]") {
    const std::string name = "a100-8gpu-allreduce-thanos-blog.txt";
    const std::string text = log_text(name);
    const auto ref = parse_nccl_tests_log(text, name, {});
    REQUIRE(ref.problems.empty());
    // Out-of-place only: each row cut after its first #wrong column (84 characters).
    std::string cut, extra;
    std::size_t pos = 0;
    while (pos < text.size()) {
        const auto nl = text.find('\n', pos);
        const std::string line = text.substr(pos, nl - pos);
        pos = nl == std::string::npos ? text.size() : nl + 1;
        const bool row = !line.empty() && line[0] == ' ';
        cut += (row ? line.substr(0, 84) : line) + "\n";
        // Per-iteration statistics or timestamps printed after the in-place columns.
        extra += (row ? line + "    41.02    52.10    50.00     1.25" : line) + "\n";
    }
    for (const std::string& t : {cut, extra}) {
        const auto log = parse_nccl_tests_log(t, name, {});
        INFO(problems_of(log.problems));
        REQUIRE(log.problems.empty());
        REQUIRE(log.rows.size() == ref.rows.size());
        for (std::size_t i = 0; i < ref.rows.size(); ++i) CHECK(log.rows[i].time_us == ref.rows[i].time_us);
    }
    CHECK(cut.find("     1048576        262144     float     sum      -1    52.61   19.93   34.88      0\n") !=
          std::string::npos);
}

TEST_CASE("the AWS DLAMI log: NCCL INFO lines, '...' and a truncation marker are skipped and counted",
          "[calibrate][import]") {
    const auto log = parse_log("a100-2node-allreduce-aws-dlami-efa.txt");
    REQUIRE(log.problems.empty());
    CHECK(log.skipped.at("NCCL log lines") == 12);
    CHECK(log.skipped.at("'...' or truncation markers") == 4);  // three "..." and the dashed marker
    CHECK(log.nccl_version == "2.23.4+cuda12.5");                // from "NCCL INFO NCCL version ..."
    CHECK(log.samples.front().impl == "nccl-tests, NCCL 2.23.4+cuda12.5");
    CHECK(log.rows.front().bytes == 8);
    CHECK(log.rows.front().time_us == 180.3);
    CHECK(log.rows.back().bytes == 1073741824);
    CHECK(log.samples.front().desc.iters == 100);
    CHECK(log.samples.front().desc.warmup == 5);
    // The AWS workshop page's two joined blocks: "$ head ..." and "tail ..." between header and table.
    const auto ws = parse_log("a100-2node-allreduce-aws-workshop-efa.txt");
    REQUIRE(ws.problems.empty());
    CHECK(ws.skipped.at("command or prompt lines") == 1);
    CHECK(ws.skipped.at("other text") == 1);
    CHECK(row_at(ws, 536870912).time_us == 13605);
}

TEST_CASE("srun --label and mpirun --tag-output prefixes read the same as plain lines", "[calibrate][import]") {
    // The issue-290 two-node file has " 0: " on every line (srun --label).
    const std::string name = "h100-2node-allreduce-nccltests290-default.txt";
    const std::string labelled = log_text(name);
    REQUIRE(labelled.starts_with(" 0: #"));
    const auto a = parse_nccl_tests_log(labelled, name, {});
    REQUIRE(a.problems.empty());
    CHECK(row_at(a, 8388608).time_us == 215.3);
    CHECK(row_at(a, 8388608).busbw_gbps == 73.04);
    CHECK(a.iters == 200);
    const std::string plain = std::regex_replace(labelled, std::regex("(^|\n) 0: "), "$1");
    const std::string tagged = prefix_lines(plain, "[1,0]<stdout>:");
    const std::string label_no_space = prefix_lines(plain, "0: ");
    for (const std::string& text : {plain, tagged, label_no_space}) {
        const auto b = parse_nccl_tests_log(text, name, {});
        INFO(problems_of(b.problems));
        REQUIRE(b.problems.empty());
        REQUIRE(b.samples.size() == a.samples.size());
        for (std::size_t i = 0; i < a.samples.size(); ++i)
            CHECK(to_json_line(b.samples[i]) == to_json_line(a.samples[i]));
        CHECK(b.hosts == a.hosts);
    }
}

TEST_CASE("the op comes from --op, the binary named in the log, the file name, or busbw over algbw",
          "[calibrate][import]") {
    // thanos names ./build/all_reduce_perf on its first line.
    CHECK(parse_log("a100-8gpu-allreduce-thanos-blog.txt").op_source == "binary name on line 1");
    const std::string ag = log_text("a100-8gpu-allgather-superbench.txt");
    const std::string ar = log_text("a100-8gpu-allreduce-superbench.txt");
    const std::string rs = log_text("a100-8gpu-reducescatter-superbench.txt");
    // Without a helpful name: all-reduce's 2(n-1)/n and reduce-scatter's (n-1)/n with a redop are
    // unambiguous...
    const auto a = parse_nccl_tests_log(ar, "run1.txt", {});
    REQUIRE(a.problems.empty());
    CHECK(a.op == "all_reduce");
    CHECK_THAT(a.op_source, Contains("busbw / algbw = 1.75"));
    const auto r = parse_nccl_tests_log(rs, "run2.txt", {});
    REQUIRE(r.problems.empty());
    CHECK(r.op == "reduce_scatter");
    // ... all-gather and all-to-all are not: the file is refused, naming it and --op.
    const auto g = parse_nccl_tests_log(ag, "run3.txt", {});
    REQUIRE(g.problems.size() == 1);
    CHECK(g.problems[0].file == "run3.txt");
    CHECK_THAT(g.problems[0].message, Contains("all_gather or all_to_all") && Contains("pass --op"));
    CHECK(g.samples.empty());
    NcclTestsOptions o;
    o.op = "allgather";  // nccl-tests' spelling is accepted
    const auto g2 = parse_nccl_tests_log(ag, "run3.txt", o);
    REQUIRE(g2.problems.empty());
    CHECK(g2.op == "all_gather");
    CHECK(g2.op_source == "--op");
    CHECK(g2.rows.size() == 29);
    // A binary named in the log wins over the file name.
    const auto named =
        parse_nccl_tests_log("# Collective test starting: all_gather_perf_mpi\n" + ag, "allreduce.txt", {});
    REQUIRE(named.problems.empty());
    CHECK(named.op == "all_gather");
    // Binaries of collectives the simulator does not model are refused.
    const auto bc = parse_nccl_tests_log(replace_once(log_text("a100-8gpu-allreduce-thanos-blog.txt"),
                                                      "all_reduce_perf", "broadcast_perf"),
                                         "x.txt", {});
    REQUIRE(bc.problems.size() == 1);
    CHECK_THAT(bc.problems[0].message, Contains("broadcast_perf"));
    o.op = "broadcast";
    CHECK_THAT(parse_nccl_tests_log(ar, "run1.txt", o).problems.at(0).message, Contains("unknown op 'broadcast'"));
}

// ---- nccl-tests -J JSON -------------------------------------------------------------------------

// The -J file nccl-tests would have written for the run a published text log shows, built as its
// src/util.cu writes one (JSON_FILE_VERSION 3): config with one devices entry per process (the
// first rank of each; `per_process` GPUs each), results with out_of_place / in_place objects,
// numbers as "%lf" prints them (6 decimals), alg_bw = size / time and bus_bw = alg_bw x the op's
// factor computed as nccl-tests does, from the printed time. No -J file of a published run was
// found, so the numbers are a real run's and the layout is the writer's.
json as_nccl_tests_json(const NcclTestsLog& log, int per_process) {
    const auto lf = [](double x) { return std::round(x * 1e6) / 1e6; };
    json devices = json::array();
    const int processes = log.group_size / per_process;
    for (int p = 0; p < processes; ++p) {
        const auto host = log.hosts.at(static_cast<std::size_t>(p) * log.hosts.size() / processes);
        devices.push_back({{"rank", p * per_process}, {"group", 0}, {"pid", 4242 + p}, {"hostname", host},
                           {"device", 0}, {"device_hex", "0000:07:00"}, {"device_info", log.gpu}});
    }
    const std::string binary = (log.op == "all_to_all" ? std::string("alltoall") : log.op) + "_perf";
    json results = json::array();
    for (std::size_t i = 0; i < log.samples.size(); ++i) {
        const Sample& s = log.samples[i];
        const double t = log.rows.at(i).time_us;
        const double alg = s.desc.bytes / (t * 1e3);
        const json times{
            {"time", t}, {"alg_bw", lf(alg)}, {"bus_bw", lf(alg * s.desc.bus_factor())}, {"nwrong", 0.0}};
        results.push_back({{"size", s.desc.bytes},
                           {"count", s.desc.bytes / 4},
                           {"type", "float"},
                           {"redop", log.op == "all_reduce" || log.op == "reduce_scatter" ? "sum" : "none"},
                           {"root", "    -1"},
                           {"out_of_place", times},
                           {"in_place", times},
                           {"actual_iterations", log.iters.value_or(20)},
                           {"experiment_name", ""}});
    }
    return {{"version", 3},
            {"start_time", "2025-06-01 10:00:00"},
            {"args", {"./build/" + binary, "-b", "8", "-e", "8G", "-f", "2", "-J", "out.json"}},
            {"env", json::array()},
            {"nccl_version", 22703},
            {"config",
             {{"nthreads", 1},
              {"ngpus", per_process},
              {"minimum_bytes", 8},
              {"maximum_bytes", 8589934592.0},
              {"step_factor", 2},
              {"warmup_iters", 5},
              {"iterations", log.iters.value_or(20)},
              {"aggregated_iterations", 1},
              {"validation", 1},
              {"graph", 0},
              {"blocking_collectives", "false"},
              {"per_iter_timing", "false"},
              {"per_iter_skip", 0},
              {"parallel_init", "false"},
              {"devices", devices}}},
            {"results", results},
            {"out_of_bounds", {{"count", 0}, {"okay", "true"}}},
            {"average_bus_bandwidth", {{"bandwidth", 66.2}, {"okay", "unchecked"}}},
            {"errors", json::array()},
            {"end_time", "2025-06-01 10:01:00"}};
}

TEST_CASE("nccl-tests -J JSON of a run reads to the samples its text output gives", "[calibrate][import][json]") {
    for (const auto& [name, e] : expected_logs()) {
        INFO(name);
        const NcclTestsLog text = parse_log(name);
        REQUIRE(text.problems.empty());
        // One process per node driving its GPUs (-g), and one process per GPU (mpirun -np 16).
        const int per_node = text.group_size / text.nodes;
        for (const int per_process : {per_node, 1}) {
            const std::string doc = as_nccl_tests_json(text, per_process).dump();  // one line, as written
            const NcclTestsLog j = parse_nccl_tests_log(doc, "out.json", {});
            INFO(problems_of(j.problems));
            REQUIRE(j.problems.empty());
            CHECK(j.format == "JSON v3");
            CHECK(j.op == e.op);
            CHECK_THAT(j.op_source, Contains("binary name in args[0]"));
            CHECK(j.group_size == e.ranks);
            CHECK(j.hosts == e.hosts);
            CHECK(j.scope == text.scope);
            CHECK(j.gpu == e.gpu);
            CHECK(j.iters == e.iters.value_or(20));  // a -J file always has its config
            CHECK(j.nccl_version == "2.27.3");
            REQUIRE(j.samples.size() == text.samples.size());
            for (std::size_t i = 0; i < j.samples.size(); ++i) {
                CHECK(j.samples[i].desc.key == text.samples[i].desc.key);
                CHECK(j.samples[i].time.median == text.samples[i].time.median);
                CHECK(j.rows[i].key == fmt::format("results[{}].out_of_place", i));
            }
        }
    }
}

TEST_CASE("nccl-tests -J per-iteration blocks give each sample its spread, per call", "[calibrate][import][json]") {
    const NcclTestsLog text = parse_log("a100-8gpu-allreduce-thanos-blog.txt");
    REQUIRE(text.problems.empty());
    json doc = as_nccl_tests_json(text, 8);
    // 1 MiB row (52.61 us): five iterations, the first skipped by the summary (-I with a skip).
    auto& row = doc["results"][17];
    REQUIRE(row["size"] == 1048576.0);
    const json per_iter{{"skipped_iterations", 1}, {"min_us", 50.0},  {"max_us", 58.0},
                        {"avg_us", 52.6},          {"p50_us", 51.0},  {"p95_us", 58.0},
                        {"p99_us", 58.0},          {"stdev_us", 2.9}, {"cv_pct", 5.5},
                        {"times_us", {900.0, 50.0, 51.0, 58.0, 51.5}}};
    row["out_of_place_per_iter"] = per_iter;
    auto log = parse_nccl_tests_log(doc.dump(), "out.json", {});
    INFO(problems_of(log.problems));
    REQUIRE(log.problems.empty());
    const Sample& s = log.samples[17];
    REQUIRE(log.rows[17].per_iter.has_value());
    CHECK(log.rows[17].per_iter->times_us == std::vector<double>{50.0, 51.0, 58.0, 51.5});  // the warm-up left out
    CHECK(s.time.min == Approx(50e-6));
    CHECK(s.time.max == Approx(58e-6));
    CHECK(s.time.median == Approx(51.25e-6));  // of 50, 51, 51.5, 58
    CHECK(s.time.p90 > s.time.p10);
    CHECK_FALSE(log.rows[16].per_iter.has_value());
    CHECK(log.samples[16].time.median == text.samples[16].time.median);

    // -m 4: an iteration is four calls; its times (about 4 x 52.61 us) are divided back per call.
    doc["config"]["aggregated_iterations"] = 4;
    json per_group = per_iter;
    per_group["avg_us"] = 210.4;
    per_group["p50_us"] = 205.0;
    per_group["min_us"] = 200.0;
    per_group["p99_us"] = 232.0;
    per_group["max_us"] = 232.0;
    per_group["times_us"] = {3600.0, 200.0, 204.0, 232.0, 206.0};
    row["out_of_place_per_iter"] = per_group;
    log = parse_nccl_tests_log(doc.dump(), "out.json", {});
    REQUIRE(log.problems.empty());
    CHECK(log.samples[17].time.median == Approx(51.25e-6));
    CHECK(log.samples[17].time.calls_per_sample == 4);
    CHECK(log.samples[17].desc.calls_per_sample == 4);
}

TEST_CASE("a bad -J file is refused at the JSON path of the value, a cut one at its end", "[calibrate][import][json]") {
    const NcclTestsLog text = parse_log("h100-2node-allreduce-dgx-cnh.txt");
    REQUIRE(text.problems.empty());
    const json good = as_nccl_tests_json(text, 8);
    const auto one = [](const json& doc) {
        auto log = parse_nccl_tests_log(doc.dump(), "out.json", {});
        INFO(problems_of(log.problems));
        REQUIRE(log.problems.size() == 1);
        CHECK(log.samples.empty());
        return log.problems[0];
    };
    json d = good;
    d["results"][20]["out_of_place"]["bus_bw"] = d["results"][20]["out_of_place"]["bus_bw"].get<double>() * 1.1;
    auto p = one(d);
    CHECK(p.key == "results[20].out_of_place.bus_bw");
    CHECK(p.line == 0);
    CHECK_THAT(p.format(), Contains("out.json: results[20].out_of_place.bus_bw:") && Contains("inconsistent"));
    d = good;
    d["results"][3]["out_of_place"]["time"] = "nan";
    CHECK(one(d).key == "results[3].out_of_place");
    d = good;
    d["results"][3]["out_of_place"]["nwrong"] = 12.0;
    CHECK(one(d).key == "results[3].out_of_place.nwrong");
    d = good;
    d["results"][5]["type"] = "float128";
    CHECK(one(d).key == "results[5].type");
    d = good;
    d["results"][5]["out_of_place_per_iter"] = {{"min_us", 9.0}, {"max_us", 5.0}, {"p99_us", 7.0}, {"avg_us", 6.0}};
    CHECK(one(d).key == "results[5].out_of_place_per_iter");
    d = good;
    d["config"]["devices"][1].erase("rank");
    CHECK(one(d).key == "config.devices");
    d = good;  // 10^12 ranks per process: refused, not enumerated
    d["config"]["nthreads"] = 1000000;
    d["config"]["ngpus"] = 1000000;
    CHECK(one(d).key == "config.devices");
    // Trace replay writes out_of_place: null; the in-place times are read and the skip is said.
    d = good;
    for (auto& r : d["results"]) r["out_of_place"] = nullptr;
    auto in_place = parse_nccl_tests_log(d.dump(), "out.json", {});
    REQUIRE(in_place.problems.empty());
    CHECK(in_place.skipped.at("rows with in-place times only (read those)") == static_cast<int>(text.rows.size()));
    CHECK(in_place.rows[0].key == "results[0].in_place");

    // Cut mid-file: nccl-tests streams -J output, so a killed run leaves it open.
    const std::string full = good.dump(2);  // pretty-printed: the cut is at a line and column
    const std::string cut = full.substr(0, full.size() / 2);
    const auto c = parse_nccl_tests_log(cut, "out.json", {});
    REQUIRE(c.problems.size() == 1);
    CHECK(c.problems[0].line == static_cast<int>(std::count(cut.begin(), cut.end(), '\n')) + 1);
    CHECK_THAT(c.problems[0].message, Contains("ends before it is complete") && Contains("stopped early"));
    const auto bad = parse_nccl_tests_log("{\"version\": 3,, \"results\": []}", "out.json", {});
    REQUIRE(bad.problems.size() == 1);
    CHECK(bad.problems[0].col == 15);
    CHECK_THAT(bad.problems[0].message, Contains("not valid JSON"));
}

// -I in text: i_min i_max i_p99 i_cv% after the out-of-place #wrong (src/util.cu, v2.17+).
TEST_CASE("text logs with -I per-iteration columns keep min, max and spread", "[calibrate][import]") {
    const std::string header =
        "# nThread 1 nGpus 8 minBytes 1048576 maxBytes 2097152 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
        "validation: 1 graph: 0 unalign: 0\n"
        "#                                                              out-of-place (+ per-iteration)                   "
        "             in-place (+ per-iteration)\n"
        "#       size         count      type   redop    root     time   algbw   busbw  #wrong    i_min    i_max    "
        "i_p99    i_cv%     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%\n";
    const std::string rows =
        "     1048576        262144     float     sum      -1    52.61   19.93   34.88       0    50.12    61.40    "
        "60.02     4.10    53.03   19.77   34.60       0    50.80    60.11    59.90     3.90\n"
        "     2097152        524288     float     sum      -1    59.30   35.37   61.89       0    57.01    66.25    "
        "65.80     2.75    71.33   29.40   51.45       0    69.00    75.10    74.90     2.00\n";
    auto log = parse_nccl_tests_log(header + rows, "allreduce.txt", {});
    INFO(problems_of(log.problems));
    REQUIRE(log.problems.empty());
    REQUIRE(log.rows.size() == 2);
    REQUIRE(log.rows[0].per_iter.has_value());
    CHECK(log.rows[0].per_iter->min_us == 50.12);
    CHECK(log.rows[0].per_iter->p99_us == 60.02);
    CHECK(log.samples[0].time.min == Approx(50.12e-6));
    CHECK(log.samples[0].time.max == Approx(61.40e-6));
    CHECK(log.samples[0].time.stddev == Approx(0.041 * 52.61e-6));
    CHECK(log.samples[0].time.median == Approx(52.61e-6));  // the printed mean: text has no p50
    CHECK(log.samples[1].time.max == Approx(66.25e-6));
    // -m 4: each iteration is four calls; its figures (about 4 x the per-call mean) come back per call.
    const std::string agg4 = replace_once(header, "agg iters: 1", "agg iters: 4") +
                             replace_once(rows, "50.12    61.40    60.02     4.10", "200.48   245.60   240.08     4.10");
    log = parse_nccl_tests_log(agg4, "allreduce.txt", {});
    INFO(problems_of(log.problems));
    REQUIRE(log.problems.empty());
    CHECK(log.rows[0].per_iter->min_us == Approx(50.12));
    CHECK(log.rows[0].per_iter->max_us == Approx(61.40));
    CHECK(log.samples[0].time.calls_per_sample == 4);
    // i_min above i_p99: refused at its column.
    const std::string bad = replace_once(rows, "50.12    61.40    60.02", "62.12    61.40    60.02");
    log = parse_nccl_tests_log(header + bad, "allreduce.txt", {});
    REQUIRE(log.problems.size() == 1);
    CHECK(log.problems[0].line == 4);
    CHECK(log.problems[0].col == 90);
    CHECK_THAT(log.problems[0].message, Contains("out of order"));
}

TEST_CASE("a row whose busbw contradicts its algbw is reported at file, line and column", "[calibrate][import]") {
    const std::string ok = log_text("a100-8gpu-allreduce-superbench.txt");
    const std::string good_row = "     1048576        262144   float     sum    74.78   14.02   24.54    N/A";
    const std::string bad_row = "     1048576        262144   float     sum    74.78   14.02   26.54    N/A";
    const std::string text = replace_once(ok, good_row, bad_row);
    const auto log = parse_nccl_tests_log(text, "corrupt.txt", {{"all_reduce"}, {}, {}});
    REQUIRE(log.problems.size() == 1);
    const auto& p = log.problems[0];
    CHECK(p.file == "corrupt.txt");
    CHECK(p.line == line_of(ok, good_row));
    CHECK(p.col == static_cast<int>(bad_row.find("26.54")) + 1);
    CHECK_THAT(p.message, Contains("26.54 GB/s") && Contains("inconsistent"));
    CHECK(log.samples.empty());  // nothing of a file with a problem is imported

    // An algbw that is not size / time: no out-of-place pair can be found in the row.
    const auto cut = parse_nccl_tests_log(
        replace_once(ok, good_row, "     1048576        262144   float     sum    74.78   1"), "cut.txt", {});
    REQUIRE(cut.problems.size() == 1);
    CHECK(cut.problems[0].line == line_of(ok, good_row));
    CHECK_THAT(cut.problems[0].message, Contains("no out-of-place time"));

    // The wrong op or group size makes every row disagree: one problem, saying what to pass.
    const auto wrong = parse_nccl_tests_log(ok, "a100-8gpu-allreduce-superbench.txt", {{"all_gather"}, {}, {}});
    REQUIRE(wrong.problems.size() == 1);
    CHECK_THAT(wrong.problems[0].message, Contains("1.75 in every row") && Contains("--op"));
    const auto wrong_n = parse_nccl_tests_log(ok, "a100-8gpu-allreduce-superbench.txt", {{}, 16, {}});
    REQUIRE(wrong_n.problems.size() == 1);
    CHECK_THAT(wrong_n.problems[0].message, Contains("over 16 ranks"));

    // Wrong elements counted by nccl-tests' data check (#wrong > 0): not a clean measurement.
    const std::string thanos = log_text("a100-8gpu-allreduce-thanos-blog.txt");
    const std::string row = "     1048576        262144     float     sum      -1    52.61   19.93   34.88      0";
    const auto failed =
        parse_nccl_tests_log(replace_once(thanos, row, row.substr(0, row.size() - 1) + "7"), "t.txt", {});
    REQUIRE(failed.problems.size() == 1);
    CHECK(failed.problems[0].line == line_of(thanos, row));
    CHECK_THAT(failed.problems[0].message, Contains("7 wrong elements"));
}

TEST_CASE("a log without rows, rows of size 0 only and a second run in one file are refused",
          "[calibrate][import]") {
    const auto j = parse_nccl_tests_log(
        "\n{\"version\": 2, \"start_time\": \"2025-06-01 10:00:00\", \"results\": []}\n", "out.json", {});
    REQUIRE(j.problems.size() == 1);
    CHECK(j.problems[0].file == "out.json");
    CHECK_THAT(j.problems[0].message, Contains("no readable row"));
    const auto list = parse_nccl_tests_log("[{\"size\": 8}]", "a.json", {});
    REQUIRE(list.problems.size() == 1);
    CHECK_THAT(list.problems[0].message, Contains("not nccl-tests -J output"));

    // The header and device list without the table (a paste cut after "# Using devices").
    const std::string thanos = log_text("a100-8gpu-allreduce-thanos-blog.txt");
    const std::string head = thanos.substr(0, thanos.find("#                 "));
    const auto none = parse_nccl_tests_log(head, "head.txt", {});
    REQUIRE(none.problems.size() == 1);
    CHECK(none.problems[0].line == 0);  // about the file, not a line
    CHECK_THAT(none.problems[0].message, Contains("no readable row"));
    CHECK(parse_nccl_tests_log("", "empty.txt", {}).problems.size() == 1);

    std::string zeros;
    for (const std::string line :
         {"# nThread 1 nGpus 8 minBytes 0 maxBytes 0 step: 2(factor) warmup iters: 5 iters: 20",
          "           0             0   float     sum    35.20    0.00    0.00    N/A"})
        zeros += line + "\n";
    const auto z = parse_nccl_tests_log(zeros, "allreduce-zeros.txt", {});
    REQUIRE(z.problems.size() == 1);
    CHECK_THAT(z.problems[0].message, Contains("every table row has size 0"));

    const std::string two = thanos + log_text("a100-8gpu-allreduce-superbench.txt");
    const auto t = parse_nccl_tests_log(two, "two.txt", {});
    REQUIRE(t.problems.size() == 1);
    CHECK(t.problems[0].line == static_cast<int>(std::count(thanos.begin(), thanos.end(), '\n')) + 1);
    CHECK_THAT(t.problems[0].message, Contains("a second nccl-tests run"));
}

TEST_CASE("the group size comes from the Rank lines, else the header, else --group-size", "[calibrate][import]") {
    const std::string thanos = log_text("a100-8gpu-allreduce-thanos-blog.txt");
    // Without its Rank lines: nThread 1 x nGpus 8 of the header, one process on one host.
    const std::string no_ranks = std::regex_replace(thanos, std::regex("#  Rank [^\n]*\n"), "");
    const auto a = parse_nccl_tests_log(no_ranks, "allreduce.txt", {});
    REQUIRE(a.problems.empty());
    CHECK(a.group_size == 8);
    CHECK_THAT(a.group_size_source, Contains("nThread 1 x nGpus 8"));
    CHECK(a.nodes == 1);
    // Without the header either: --group-size is needed, then --nodes.
    const std::string bare = std::regex_replace(no_ranks, std::regex("# nThread[^\n]*\n"), "");
    const auto b = parse_nccl_tests_log(bare, "allreduce.txt", {});
    REQUIRE(b.problems.size() == 1);
    CHECK_THAT(b.problems[0].message, Contains("pass --group-size"));
    const auto c = parse_nccl_tests_log(bare, "allreduce.txt", {{}, 8, {}});
    REQUIRE(c.problems.size() == 1);
    CHECK_THAT(c.problems[0].message, Contains("pass --nodes"));
    const auto d = parse_nccl_tests_log(bare, "allreduce.txt", {{}, 8, 1});
    REQUIRE(d.problems.empty());
    CHECK(d.rows.size() == 30);
    CHECK(d.iters == std::nullopt);
    CHECK(d.samples.front().desc.iters == 1);
    // --nodes overrides the hosts of the Rank lines (a log whose hosts all read "localhost").
    const auto e = parse_log("h100-2node-allreduce-a3mega-ztan.txt", {{}, {}, 1});
    REQUIRE(e.problems.empty());
    CHECK(e.scope == "intra_node");
}

TEST_CASE("host and GPU names that are not UTF-8 come out with '?' and the samples still write",
          "[calibrate][import]") {
    // Found by fuzz_nccl_tests: a byte 0xC2 in a host name made the JSON summary throw.
    std::string text = log_text("a100-8gpu-allreduce-thanos-blog.txt");
    text = std::regex_replace(text, std::regex("thanos"), "than\xc2s");
    text = replace_once(text, "NVIDIA A100-SXM4-80GB", "NVIDIA \xff A100");
    const auto log = parse_nccl_tests_log(text, "allreduce-\xe9.txt", {});
    REQUIRE(log.problems.empty());
    CHECK(log.hosts == std::vector<std::string>{"than?s"});
    CHECK(log.gpu == "NVIDIA ? A100");
    CHECK(to_json(log).at("file") == "allreduce-?.txt");
    test::ScratchDir dir;
    (void)write_imported_samples(dir / "run", log.samples, ImportMode::create, {{"command_line", "import \xe9"}});
    const auto back = read_samples(dir / "run" / kSamplesFile);
    REQUIRE(back.samples.size() == 30);
    CHECK_THAT(back.samples[0].desc.label, Contains("allreduce-?.txt"));
    CHECK(json::parse(test::read_text(dir / "run" / "run.json")).at("command_line") == "import \xef\xbf\xbd");
}

// ---- merging and writing -----------------------------------------------------------------------

TEST_CASE("two logs of the same shape: the later file wins, size by size", "[calibrate][import]") {
    const auto dflt = parse_log("h100-2node-allreduce-nccltests290-default.txt");
    const auto ring = parse_log("h100-2node-allreduce-nccltests290-ring.txt");
    REQUIRE(dflt.samples.size() == 11);
    REQUIRE(ring.samples.size() == 11);
    std::vector<std::size_t> replaced;
    const auto merged = merge_imported({dflt.samples, ring.samples}, &replaced);
    CHECK(replaced == std::vector<std::size_t>{0, 11});
    REQUIRE(merged.size() == 11);
    CHECK(merged.front().desc.bytes == 8388608);
    CHECK(merged.front().time.median == Approx(407.5e-6));  // the ring run's
    const auto other = merge_imported({ring.samples, dflt.samples});
    CHECK(other.front().time.median == Approx(215.3e-6));
}

TEST_CASE("writing refuses an existing samples.jsonl unless --append or --force, and leaves it as it was",
          "[calibrate][import]") {
    test::ScratchDir dir;
    const fs::path out = dir / "run";
    const auto ar = parse_log("a100-8gpu-allreduce-superbench.txt");
    const auto ag = parse_log("a100-8gpu-allgather-superbench.txt");
    const ImportWrite w = write_imported_samples(out, ar.samples, ImportMode::create, {{"tool", "test"}});
    CHECK(w.written == 32);
    CHECK(w.run_info == out / "run.json");
    const std::string before = test::read_text(out / kSamplesFile);
    CHECK(read_samples(out / kSamplesFile).samples.size() == 32);

    CHECK_THROWS_AS(write_imported_samples(out, ag.samples, ImportMode::create, {}), CalibrationInputError);
    CHECK(test::read_text(out / kSamplesFile) == before);
    // --append with a key already there: refused, nothing written.
    try {
        (void)write_imported_samples(out, ar.samples, ImportMode::append, {});
        FAIL("appending the same samples again must be refused");
    } catch (const CalibrationInputError& e) {
        REQUIRE(e.diagnostics().size() == 32);
        CHECK(e.diagnostics()[0].line == 1);
        CHECK_THAT(e.diagnostics()[0].message, Contains("never replaces"));
    }
    CHECK(test::read_text(out / kSamplesFile) == before);
    // --append of new keys: the old lines as they were, then the new ones.
    const ImportWrite a = write_imported_samples(out, ag.samples, ImportMode::append, {});
    CHECK(a.kept == 32);
    CHECK(a.written == 29);
    CHECK(a.run_info == out / "run-2.json");
    const std::string appended = test::read_text(out / kSamplesFile);
    CHECK(appended.starts_with(before));
    CHECK(read_samples(out / kSamplesFile).samples.size() == 61);
    // --force replaces it.
    (void)write_imported_samples(out, ag.samples, ImportMode::force, {});
    CHECK(read_samples(out / kSamplesFile).samples.size() == 29);
    // A torn samples file is not appended to (it is not ours to fix).
    test::write_text(out / kSamplesFile, before + "{\"schema\": 1, \"key\"");
    CHECK_THROWS_AS(write_imported_samples(out, ag.samples, ImportMode::append, {}), SampleError);
    CHECK(test::read_text(out / kSamplesFile) == before + "{\"schema\": 1, \"key\"");
    // No temporary file is left behind.
    for (const auto& e : fs::directory_iterator(out)) CHECK_FALSE(e.path().filename().string().ends_with(".tmp"));
}

TEST_CASE("an import into a directory that a measure holds locked is refused", "[calibrate][import][lock]") {
    test::ScratchDir dir;
    const fs::path out = dir / "run";
    fs::create_directories(out);
    // What measure's writing rank holds (open_run_dir): flock on DIR/.lock.
    const RunDir held = open_run_dir(out, false, /*repair=*/true);
    const auto ar = parse_log("a100-8gpu-allreduce-superbench.txt");
    try {
        (void)write_imported_samples(out, ar.samples, ImportMode::create, {});
        FAIL("the locked directory must be refused");
    } catch (const CalibrationInputError& e) {
        CHECK_THAT(e.what(), Contains("another measure or import is writing to this directory"));
        CHECK_THAT(e.what(), Contains("pid"));
    }
    CHECK_FALSE(fs::exists(out / kSamplesFile));
}

// ---- the whole path: import -> fit -> profile -> the simulator ------------------------------------

TEST_CASE("imported logs fitted into a profile give back each log's busbw from 1 MiB up within 3%",
          "[calibrate][import][pipeline]") {
    // (logs imported together into one directory, base profile, nodes x GPUs per node)
    struct Case {
        std::vector<std::string> logs;
        std::string base;
        int nodes = 1, gpus_per_node = 8;
    };
    const std::vector<Case> cases{
        {{"a100-8gpu-allreduce-superbench.txt", "a100-8gpu-allgather-superbench.txt",
          "a100-8gpu-reducescatter-superbench.txt", "a100-8gpu-alltoall-superbench.txt"},
         "a100-sxm-40gb"},
        {{"a100-8gpu-allreduce-thanos-blog.txt"}, "a100-sxm-80gb"},
        {{"h100-8gpu-allreduce-nccltests290.txt"}, "h100-sxm"},
        {{"a100-2node-allreduce-aws-dlami-efa.txt"}, "a100-sxm-40gb", 2},
        {{"a100-2node-allreduce-aws-workshop-efa.txt"}, "a100-sxm-80gb", 2},
        {{"h100-2node-allreduce-a3mega-ztan.txt"}, "h100-sxm", 2},
        {{"h100-2node-allreduce-dgx-cnh.txt"}, "h100-sxm", 2},
        {{"h100-2node-allreduce-nccltests290-default.txt"}, "h100-sxm", 2},
        {{"h100-2node-allreduce-nccltests290-ring.txt"}, "h100-sxm", 2},
    };
    // Each log as printed, and as the -J JSON of the same run.
    for (const auto& [c, via_json] : [&] {
             std::vector<std::pair<Case, bool>> v;
             for (const auto& c : cases)
                 for (const bool j : {false, true}) v.emplace_back(c, j);
             return v;
         }()) {
        INFO((via_json ? "as -J JSON" : "as text"));
        test::ScratchDir dir;
        std::vector<NcclTestsLog> logs;
        std::vector<std::vector<Sample>> per_file;
        for (const auto& name : c.logs) {
            logs.push_back(parse_log(name));
            if (via_json) {
                const auto& t = logs.back();
                logs.back() = parse_nccl_tests_log(as_nccl_tests_json(t, t.group_size / t.nodes).dump(),
                                                   name + ".json", {});
            }
            REQUIRE(logs.back().problems.empty());
            per_file.push_back(logs.back().samples);
        }
        (void)write_imported_samples(dir / "run", merge_imported(per_file), ImportMode::create, {});
        const SampleFile file = read_samples(dir / "run" / kSamplesFile);
        const auto base = model::load_profile(fs::path(kData) / "hardware" / (c.base + ".yaml"));
        const FitResult fr = fit(file, base, default_fit_options());
        const fs::path prof = dir / "calibrated.yaml";
        model::write_profile(fr.profile, prof, false);
        const auto hw = model::load_profile(prof);
        model::Cluster cl;
        cl.nodes = c.nodes;
        cl.gpus_per_node = c.gpus_per_node;
        const sim::AnalyticNetwork net(hw, cl);
        for (const auto& log : logs) {
            INFO(log.file);
            const auto g = sim::place_group(1, log.group_size, c.gpus_per_node);
            REQUIRE(g.nodes == log.nodes);
            double worst = 0;
            std::size_t checked = 0;
            for (const auto& r : log.rows) {
                if (r.bytes < 1048576) continue;
                const auto cost = net.collective(op_enum(log.op), g, model::Bytes(r.bytes));
                CHECK(cost.algorithm == "measured");
                const double resid = std::abs(cost.busbw.value() / 1e9 / r.busbw_gbps - 1.0);
                INFO("size " << r.bytes << ": predicted " << cost.busbw.value() / 1e9 << " GB/s, log " << r.busbw_gbps);
                CHECK(resid < 0.03);
                worst = std::max(worst, resid);
                ++checked;
            }
            CHECK(checked >= 6);
            CAPTURE(log.file, worst);
            CHECK(worst < 0.03);
        }
    }
}

TEST_CASE("trainsim simulate runs on a profile fitted from an imported log", "[calibrate][import][pipeline]") {
    test::ScratchDir dir;
    const auto log = parse_log("h100-8gpu-allreduce-nccltests290.txt");
    REQUIRE(log.problems.empty());
    (void)write_imported_samples(dir / "run", log.samples, ImportMode::create, {});
    const FitResult fr = fit(read_samples(dir / "run" / kSamplesFile), test::h100(), default_fit_options());
    const fs::path prof = dir / "h100-node.yaml";
    model::write_profile(fr.profile, prof, false);
    REQUIRE(model::load_profile(prof).collective_times.size() == 6);
    // scenarios/examples/default.yaml: 8 x H100 SXM in one node, TP over the node's all-reduce.
    const std::string scenario = kData + "/examples/default.yaml";
    const auto calibrated = test::run_trainsim("simulate '" + scenario + "' --json --profile '" + prof.string() + "'");
    REQUIRE(calibrated.rc == 0);
    const auto datasheet =
        test::run_trainsim("simulate '" + scenario + "' --json --profile '" + kData + "/hardware/h100-sxm.yaml'");
    REQUIRE(datasheet.rc == 0);
    const json jc = json::parse(calibrated.out), jd = json::parse(datasheet.out);
    REQUIRE(jc.at("plans").size() == jd.at("plans").size());
    const auto& pc = jc.at("plans").at(0);
    const auto& pd = jd.at("plans").at(0);
    CHECK(pc.at("step_time_s").get<double>() > 0);
    // The measured all-reduce times, not the datasheet model's, decide the exposed TP time.
    CHECK(pc.at("breakdown").at("tp_exposed_s").get<double>() != pd.at("breakdown").at("tp_exposed_s").get<double>());
}

// ---- GEMM sweeps -------------------------------------------------------------------------------

TEST_CASE("a GEMM sweep CSV becomes GEMM samples, times with a unit or in seconds", "[calibrate][import][gemm]") {
    const std::string text =
        "# MAMF-finder style sweep, 8 x H100\n"
        "m,n,k,dtype,time\n"
        "8192,8192,8192,bf16,1.5 ms\n"
        "4096, 4096, 4096, bf16, 0.000205\n"
        "\n"
        "2048,2048,2048,bf16,30 us\n"
        "8192,8192,8192,fp8_e4m3,0.9 ms\n";
    const auto csv = parse_gemm_csv(text, "sweep.csv");
    INFO(problems_of(csv.problems));
    REQUIRE(csv.problems.empty());
    REQUIRE(csv.samples.size() == 4);
    CHECK(csv.lines == std::vector<int>{3, 4, 6, 7});
    CHECK(csv.skipped.at("comment lines") == 1);
    const Sample& s = csv.samples[0];
    CHECK(s.desc.kind == OpKind::gemm);
    CHECK(s.desc.m == 8192);
    CHECK(s.desc.dtype == "bf16");
    CHECK(s.desc.key == "gemm/bf16/m=8192,n=8192,k=8192/first");
    CHECK(s.time.median == Approx(1.5e-3).epsilon(1e-12));
    CHECK(csv.samples[1].time.median == Approx(205e-6).epsilon(1e-12));
    CHECK(csv.samples[2].time.median == Approx(30e-6).epsilon(1e-12));
    CHECK_FALSE(csv.samples[3].desc.fast_accum);  // torch._scaled_mm's default: the split accumulator
    // Columns in any order, with fast_accum.
    const auto b = parse_gemm_csv("dtype,time,k,n,m,fast_accum\nfp8_e4m3,1 ms,1024,2048,4096,true\n", "b.csv");
    REQUIRE(b.problems.empty());
    CHECK(b.samples[0].desc.m == 4096);
    CHECK(b.samples[0].desc.k == 1024);
    CHECK(b.samples[0].desc.fast_accum);
    // Fitted like measured GEMMs: 2 * 8192^3 / 1.5 ms = 733 TFLOP/s of the H100's BF16 peak.
    SampleFile f;
    f.path = "sweep.csv";
    f.samples = csv.samples;
    f.lines = csv.lines;
    const FitResult fr = fit(f, test::h100(), default_fit_options());
    const auto bf16 = std::find_if(fr.report.gemm.begin(), fr.report.gemm.end(),
                                   [](const GemmFit& g) { return g.precision == "bf16"; });
    REQUIRE(bf16 != fr.report.gemm.end());
    CHECK(bf16->table_rows == 3);
    CHECK(bf16->rate_8192 == Approx(2.0 * 8192.0 * 8192.0 * 8192.0 / 1.5e-3).epsilon(1e-9));
}

TEST_CASE("a bad GEMM CSV cell is reported at file, line and column", "[calibrate][import][gemm]") {
    const auto csv = parse_gemm_csv(
        "m,n,k,dtype,time\n8192,8192,8192,bf16,1.5 ms\n4096,40x6,4096,bf16,1 ms\n"
        "1024,1024,1024,bf17,2 us\n1024,1024,1024,bf16,2 parsecs\n8192,8192,8192,bf16,1.6 ms\n",
        "bad.csv");
    REQUIRE(csv.problems.size() == 4);
    CHECK(csv.problems[0].format() == "bad.csv:3:6: n: expected a positive whole number (at most 2^24), got '40x6'");
    CHECK(csv.problems[1].line == 4);
    CHECK(csv.problems[1].col == 16);
    CHECK(csv.problems[1].key == "dtype");
    CHECK(csv.problems[2].line == 5);
    CHECK(csv.problems[2].col == 21);
    CHECK_THAT(csv.problems[2].message, Contains("unknown unit 'parsecs'"));
    CHECK_THAT(csv.problems[3].message, Contains("the same GEMM as line 2"));
    CHECK(csv.samples.empty());
    const auto hdr = parse_gemm_csv("m,n,k,dtype,seconds\n", "h.csv");
    REQUIRE(hdr.problems.size() == 2);
    CHECK(hdr.problems[0].format() == "h.csv:1:13: unknown column 'seconds' (m, n, k, dtype, time, and optionally "
                                      "fast_accum)");
    CHECK_THAT(hdr.problems[1].message, Contains("missing column 'time'"));
    const auto fields = parse_gemm_csv("m,n,k,dtype,time\n1,2,3,bf16\n", "f.csv");
    REQUIRE(fields.problems.size() == 1);
    CHECK(fields.problems[0].line == 2);
    CHECK_THAT(fields.problems[0].message, Contains("4 fields, the header has 5"));
    CHECK(parse_gemm_csv("m,n,k,dtype,time,fast_accum\n1,2,3,bf16,1 ms,true\n", "f.csv").problems.size() == 1);
    CHECK(parse_gemm_csv("", "e.csv").problems.size() == 1);
}

// ---- through the binary ------------------------------------------------------------------------

TEST_CASE("trainsim-calibrate import nccl-tests writes samples fit reads, refuses to overwrite them",
          "[calibrate][import][cli]") {
    test::ScratchDir dir;
    const std::string out = (dir / "run").string();
    const std::string log = (kLogs / "a100-8gpu-allreduce-thanos-blog.txt").string();
    const std::vector<std::string> args{"import", "nccl-tests", log, "--out", out, "--json"};
    auto r = test::run_child(kExe, args, dir.path());
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const json j = json::parse(r.out);
    CHECK(j.at("samples") == 30);
    CHECK(j.at("kept") == 0);
    REQUIRE(j.at("files").size() == 1);
    CHECK(j.at("files")[0].at("op") == "all_reduce");
    CHECK(j.at("files")[0].at("group_size") == 8);
    CHECK(j.at("files")[0].at("nodes") == 1);
    CHECK(j.at("files")[0].at("gpu") == "NVIDIA A100-SXM4-80GB");
    CHECK(j.at("files")[0].at("min_bytes") == 8);
    CHECK(j.at("files")[0].at("max_bytes") == 4294967296.0);
    CHECK(j.at("files")[0].at("skipped").at("command or prompt lines") == 1);
    CHECK(read_samples(dir / "run" / kSamplesFile).samples.size() == 30);
    const json run = json::parse(test::read_text(dir / "run" / "run.json"));
    CHECK(run.at("provenance").at("device") == "NVIDIA A100-SXM4-80GB");
    CHECK(run.at("tool") == "trainsim-calibrate import nccl-tests");
    const std::string before = test::read_text(dir / "run" / kSamplesFile);

    // Again: refused without --append / --force (exit 2), the file unchanged; --append of the
    // same keys refused too; --append with --force is a usage error.
    r = test::run_child(kExe, args, dir.path());
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("already holds samples") && Contains("--append") && Contains("--force"));
    auto again = args;
    again.emplace_back("--append");
    r = test::run_child(kExe, again, dir.path());
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("never replaces a sample"));
    auto both = again;
    both.emplace_back("--force");
    CHECK(test::run_child(kExe, both, dir.path()).exit_code == 2);
    CHECK(test::read_text(dir / "run" / kSamplesFile) == before);

    // A second op into the same directory with --append; fit (base from run.json's device).
    auto more = std::vector<std::string>{
        "import", "nccl-tests", (kLogs / "a100-8gpu-allgather-superbench.txt").string(), "--out", out, "--append"};
    r = test::run_child(kExe, more, dir.path());
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Contains("Wrote 29 samples") && Contains("after the 30 already there"));
    CHECK(read_samples(dir / "run" / kSamplesFile).samples.size() == 59);
    CHECK(test::read_text(dir / "run" / kSamplesFile).starts_with(before));

    auto forced = args;
    forced.emplace_back("--force");
    REQUIRE(test::run_child(kExe, forced, dir.path()).exit_code == 0);
    const std::string prof = (dir / "a100.yaml").string();
    r = test::run_child(kExe, {"fit", out, "--out", prof, "--data-dir", kData, "--json"}, dir.path());
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const json fj = json::parse(r.out);
    CHECK(fj.at("base") == "a100-sxm-80gb");
    CHECK(fj.at("backend") == "nccl-tests");
    REQUIRE(fj.at("collectives").size() == 1);
    CHECK(fj.at("collectives")[0].at("group_size") == 8);
    CHECK(model::load_profile(prof).collective_times.size() == 30);
}

TEST_CASE("trainsim-calibrate import refuses cut JSON, unknown ops and bad CSV cells with exit 2",
          "[calibrate][import][cli]") {
    test::ScratchDir dir;
    const std::string out = (dir / "run").string();
    // A -J file cut where the run was killed (nccl-tests streams it).
    test::write_text(dir / "results.json", "{\"version\":3,\"results\":[{\"size\":8,\"count\":2,\"type\":\"fl");
    auto r = test::run_child(kExe, {"import", "nccl-tests", (dir / "results.json").string(), "--out", out}, dir.path());
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains((dir / "results.json").string() + ":1:") &&
                          Contains("the JSON ends before it is complete"));
    CHECK_FALSE(fs::exists(dir / "run" / kSamplesFile));

    // An all-gather log under a neutral name: the op cannot be told (exit 2), --op says it.
    test::write_text(dir / "node3.log", log_text("a100-8gpu-allgather-superbench.txt"));
    r = test::run_child(kExe, {"import", "nccl-tests", (dir / "node3.log").string(), "--out", out}, dir.path());
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("node3.log") && Contains("pass --op"));
    CHECK_FALSE(fs::exists(dir / "run" / kSamplesFile));
    r = test::run_child(kExe, {"import", "nccl-tests", (dir / "node3.log").string(), "--out", out, "--op", "all_gather",
                               "--json"},
                        dir.path());
    REQUIRE(r.exit_code == 0);
    CHECK(json::parse(r.out).at("files")[0].at("op_source") == "--op");
    // One bad file among good ones: nothing is written.
    test::ScratchDir other;
    r = test::run_child(kExe, {"import", "nccl-tests", (kLogs / "a100-8gpu-allreduce-superbench.txt").string(),
                               (dir / "results.json").string(), "--out", (other / "run").string()},
                        dir.path());
    CHECK(r.exit_code == 2);
    CHECK_FALSE(fs::exists(other / "run" / kSamplesFile));
    CHECK(test::run_child(kExe, {"import", "nccl-tests", (dir / "missing.txt").string(), "--out", out}, dir.path())
              .exit_code == 2);

    test::write_text(dir / "sweep.csv", "m,n,k,dtype,time\n8192,8192,8192,bf16,1.5 ms\n4096,4096,4096,bf16,fast\n");
    r = test::run_child(kExe, {"import", "gemm", (dir / "sweep.csv").string(), "--out", (dir / "g").string()},
                        dir.path());
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains((dir / "sweep.csv").string() + ":3:21: time:"));
    CHECK_FALSE(fs::exists(dir / "g" / kSamplesFile));
    test::write_text(dir / "sweep.csv", "m,n,k,dtype,time\n8192,8192,8192,bf16,1.5 ms\n4096,4096,4096,bf16,0.0002\n");
    r = test::run_child(kExe, {"import", "gemm", (dir / "sweep.csv").string(), "--out", (dir / "g").string(), "--json"},
                        dir.path());
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(json::parse(r.out).at("samples") == 2);
    const auto g = read_samples(dir / "g" / kSamplesFile);
    REQUIRE(g.samples.size() == 2);
    CHECK(g.samples[1].time.median == Approx(2e-4));
}
