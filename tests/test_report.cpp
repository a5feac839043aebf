// `trainsim simulate --trace` (Chrome / Perfetto trace) and `trainsim report --html` as users see
// them: the trace's events add up to the simulated step, the HTML embeds exactly what
// `compare --json` prints, renders in a real browser (headless Chromium) and shows those numbers.
#include "cli_runner.hpp"

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace fs = std::filesystem;
using nlohmann::json;
using trainsim::test::run_trainsim;

namespace {

// A fresh folder per test case, removed at the end.
struct TempDir {
    fs::path path;
    TempDir() {
        static int n = 0;
        path = fs::temp_directory_path() / fmt::format("trainsim-report-test-{}-{}", static_cast<long>(getpid()), n++);
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
};

std::string read_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void write_file(const fs::path& p, const std::string& text) {
    std::ofstream out(p, std::ios::binary);
    out << text;
}

std::string q(const fs::path& p) {
    return fmt::format("'{}'", p.string());
}

std::string data_file(const std::string& rel) {
    return (fs::path(TRAINSIM_TEST_DATA_DIR) / rel).string();
}

// Small enough that a full trace parses quickly; pp 2 gives pipeline streams, tp 2 TP streams,
// dp 2 the data-parallel ones.
const char* const kTraceScenario = R"(title: trace fixture
model: llama2-7b
training: {tokens: 1B, seq_len: 2048, global_batch: 8, micro_batch: 1}
parallel: {tp: 2, pp: 2, sequence_parallel: true, sharding: dist_opt}
precision: bf16
cluster: {gpu: h100-sxm, nodes: 1, gpus_per_node: 8}
pricing: {basis: gpu_hour, rate: 2.0, currency: USD}
)";

const char* const kTwoPlanScenario = R"(title: two plans
model: llama2-7b
training: {tokens: 1B, seq_len: 2048, global_batch: 8, micro_batch: 1}
parallel: {tp: 2, sequence_parallel: true, sharding: dist_opt}
precision: bf16
cluster: {gpu: h100-sxm, nodes: 1, gpus_per_node: 8}
pricing: {basis: gpu_hour, rate: 2.0, currency: USD}
plans:
  - name: first plan
  - name: second plan
    parallel: {tp: 4}
)";

const std::set<std::string> kCategories{"forward", "backward", "recompute", "optimizer", "tp_comm",
                                        "cp_comm", "dp_comm",  "pp_comm",   "host"};

// Checks the structure every trace must have; returns the end of the last event in seconds.
double check_trace(const json& t) {
    REQUIRE(t.contains("traceEvents"));
    REQUIRE(t["traceEvents"].is_array());
    std::set<int> pids_named;
    std::set<std::pair<int, int>> threads_named;
    std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> tracks; // (pid, tid) -> (ts, end)
    double last_us = 0;
    for (const auto& e : t["traceEvents"]) {
        const std::string ph = e.at("ph");
        const int pid = e.at("pid");
        const int tid = e.at("tid");
        if (ph == "M") {
            if (e["name"] == "process_name") pids_named.insert(pid);
            if (e["name"] == "thread_name") threads_named.insert({pid, tid});
            CHECK(e["args"].is_object());
            continue;
        }
        REQUIRE(ph == "X");
        CHECK_FALSE(e.at("name").get<std::string>().empty());
        CHECK(kCategories.count(e.at("cat").get<std::string>()) == 1);
        const double ts = e.at("ts"), dur = e.at("dur");
        CHECK(ts >= 0);
        CHECK(dur >= 0);
        CHECK(e.at("args").contains("kind"));
        tracks[{pid, tid}].emplace_back(ts, ts + dur);
        last_us = std::max(last_us, ts + dur);
    }
    CHECK_FALSE(tracks.empty());
    for (auto& [track, spans] : tracks) {
        CAPTURE(track.first, track.second);
        CHECK(pids_named.count(track.first) == 1);
        CHECK(threads_named.count(track) == 1);
        // One stream runs one op at a time, in program order.
        std::sort(spans.begin(), spans.end());
        for (std::size_t i = 1; i < spans.size(); ++i) CHECK(spans[i].first >= spans[i - 1].second - 1e-6);
    }
    return last_us / 1e6;
}

} // namespace

TEST_CASE("simulate --trace writes a Chrome trace whose events add up to the simulated step", "[cli][trace]") {
    TempDir tmp;
    const auto scenario = tmp.path / "trace.yaml";
    write_file(scenario, kTraceScenario);
    const auto out = tmp.path / "step.json";
    const auto r = run_trainsim(fmt::format("simulate --json {} --trace {}", q(scenario), q(out)));
    REQUIRE(r.rc == 0);
    const auto sim = json::parse(r.out);
    REQUIRE(fs::exists(out));
    const auto t = json::parse(read_file(out));

    const double step = sim["step_time_s"];
    CHECK(check_trace(t) == Approx(step).epsilon(1e-9));
    CHECK(t["otherData"]["plan"] == sim["name"]);
    CHECK(t["otherData"]["step_time_s"].get<double>() == Approx(step).epsilon(1e-12));
    CHECK(t["otherData"]["all_ranks"] == false);

    // One representative rank per pipeline stage; its streams are named after the executor's.
    std::set<int> pids;
    std::set<std::string> thread_names;
    for (const auto& e : t["traceEvents"]) {
        if (e["ph"] == "X") pids.insert(e["pid"].get<int>());
        if (e["name"] == "thread_name") thread_names.insert(e["args"]["name"].get<std::string>());
    }
    CHECK(pids.size() == 2);
    for (const char* s : {"compute", "dp_reduce", "pp_send_fwd", "pp_recv_fwd", "pp_send_bwd", "pp_recv_bwd"})
        CHECK(thread_names.count(s) == 1);

    // The critical rank's compute-stream kernels by category are the report's breakdown.
    const int crit_stage = sim["critical_stage"];
    const int crit_pid = *std::next(pids.begin(), crit_stage); // stage s has the s-th smallest rank id
    std::map<std::string, double> by_cat;
    bool saw_collective_args = false, saw_gemm_args = false;
    for (const auto& e : t["traceEvents"]) {
        if (e["ph"] != "X") continue;
        const auto& a = e["args"];
        if (a["kind"] == "collective") {
            saw_collective_args = saw_collective_args || (a.contains("group") && a.contains("bytes"));
        }
        if (a["kind"] == "gemm") saw_gemm_args = saw_gemm_args || (a.contains("flops") && a.contains("m"));
        if (e["pid"] != crit_pid || e["tid"] != 0) continue;
        const std::string kind = a["kind"];
        if (kind == "collective" || kind == "send" || kind == "recv") continue;
        by_cat[e["cat"].get<std::string>()] += e["dur"].get<double>() / 1e6;
    }
    CHECK(saw_collective_args);
    CHECK(saw_gemm_args);
    const auto& bd = sim["breakdown"];
    CHECK(by_cat["forward"] == Approx(bd["forward_s"].get<double>()).epsilon(1e-9));
    CHECK(by_cat["backward"] == Approx(bd["backward_s"].get<double>()).epsilon(1e-9));
    CHECK(by_cat["optimizer"] == Approx(bd["optimizer_s"].get<double>()).epsilon(1e-9));

    SECTION("--all-ranks traces every GPU and the same step") {
        const auto all = tmp.path / "all.json";
        REQUIRE(run_trainsim(fmt::format("simulate --all-ranks {} --trace {}", q(scenario), q(all))).rc == 0);
        const auto ta = json::parse(read_file(all));
        CHECK(check_trace(ta) == Approx(step).epsilon(1e-9));
        std::set<int> all_pids;
        for (const auto& e : ta["traceEvents"])
            if (e["ph"] == "X") all_pids.insert(e["pid"].get<int>());
        CHECK(all_pids.size() == 8);
        CHECK(ta["otherData"]["all_ranks"] == true);
    }
}

TEST_CASE("simulate --trace with several plans writes one file per plan in plan order", "[cli][trace]") {
    TempDir tmp;
    const auto scenario = tmp.path / "two.yaml";
    write_file(scenario, kTwoPlanScenario);
    const auto r = run_trainsim(fmt::format("simulate --json {} --trace {}", q(scenario), q(tmp.path / "t.json")));
    REQUIRE(r.rc == 0);
    const auto sim = json::parse(r.out);
    CHECK_FALSE(fs::exists(tmp.path / "t.json"));
    for (int i = 0; i < 2; ++i) {
        const auto f = tmp.path / fmt::format("t.{}.json", i + 1);
        REQUIRE(fs::exists(f));
        const auto t = json::parse(read_file(f));
        const auto& p = sim["plans"][static_cast<std::size_t>(i)];
        CHECK(t["otherData"]["plan"] == p["name"]);
        CHECK(check_trace(t) == Approx(p["step_time_s"].get<double>()).epsilon(1e-9));
    }
}

TEST_CASE("a failed trace or report leaves the previous file whole and exits 2", "[cli][trace][report]") {
    TempDir tmp;
    const auto scenario = tmp.path / "trace.yaml";
    write_file(scenario, kTraceScenario);
    const auto bad = tmp.path / "bad.yaml";
    write_file(bad, "model: llama2-7b\nno_such_key: 1\n");
    for (const std::string cmd : {"simulate {} --trace {}", "report {} --html {}"}) {
        CAPTURE(cmd);
        const auto out = tmp.path / "previous.out";
        write_file(out, "GOOD");
        CHECK(run_trainsim(fmt::format(fmt::runtime(cmd), q(bad), q(out))).rc == 2);
        CHECK(read_file(out) == "GOOD");
        // An output folder that does not exist: bad input, and nothing left behind.
        const auto missing = tmp.path / "no-such-dir" / "x.out";
        CHECK(run_trainsim(fmt::format(fmt::runtime(cmd), q(scenario), q(missing))).rc == 2);
        CHECK_FALSE(fs::exists(missing.parent_path()));
        // The output is a folder.
        CHECK(run_trainsim(fmt::format(fmt::runtime(cmd), q(scenario), q(tmp.path))).rc == 2);
    }
    std::vector<std::string> left;
    for (const auto& e : fs::directory_iterator(tmp.path)) left.push_back(e.path().filename().string());
    std::sort(left.begin(), left.end());
    CHECK(left == std::vector<std::string>{"bad.yaml", "previous.out", "trace.yaml"});
    CHECK(run_trainsim(fmt::format("report {}", q(scenario))).rc == 2); // --html is required
}

namespace {

// The contents of <script type="application/json" id="ID"> ... </script>.
std::string script_block(const std::string& html, const std::string& id) {
    const std::string open = fmt::format("<script type=\"application/json\" id=\"{}\">", id);
    const auto b = html.find(open);
    if (b == std::string::npos) return {};
    const auto e = html.find("</script>", b);
    if (e == std::string::npos) return {};
    return html.substr(b + open.size(), e - b - open.size());
}

std::size_t count(const std::string& s, const std::string& what) {
    std::size_t n = 0;
    for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + what.size())) ++n;
    return n;
}

json plans_of(const json& j) {
    return j.contains("plans") ? j["plans"] : json::array({j});
}

} // namespace

TEST_CASE("report --html embeds what compare --json prints and draws its charts without external resources",
          "[cli][report]") {
    TempDir tmp;
    for (const std::string& scenario :
         {data_file("examples/default.yaml"), data_file("questions/70b-1t-8-vs-64-h100.yaml")}) {
        CAPTURE(scenario);
        const auto out = tmp.path / "report.html";
        const auto cmp = run_trainsim(fmt::format("compare --json {}", q(scenario)));
        const auto rep = run_trainsim(fmt::format("report --json {} --html {}", q(scenario), q(out)));
        CHECK(rep.rc == cmp.rc); // 3 when a plan does not fit: the report is still written
        REQUIRE(fs::exists(out));
        const std::string html = read_file(out);
        const auto expected = json::parse(cmp.out);
        CHECK(json::parse(rep.out) == expected);
        CHECK(json::parse(script_block(html, "trainsim-data")) == expected);

        // Self-contained: no script but the JSON data blocks, nothing fetched.
        CHECK(count(html, "<script") == count(html, "<script type=\"application/json\""));
        for (const char* ext : {"http://", "https://", "src=", "href=", "url(", "@import", "<link", "<img", "<iframe"})
            CHECK(count(html, ext) == 0);
        // Breakdown, memory, days, cost and the two scaling charts; the days-vs-cost chart where
        // two or more plans fit and have a cost, its Pareto points ringed: a plan is on the front
        // iff no other is at least as fast and as cheap and better on one (from the JSON).
        std::vector<std::pair<double, double>> dc;
        for (const auto& p : plans_of(expected))
            if (p["fits"].get<bool>() && p["cost"].is_number() && p["cost"].get<double>() > 0)
                dc.emplace_back(p["days_to_train"].get<double>(), p["cost"].get<double>());
        std::size_t front = 0;
        for (const auto& a : dc)
            front += std::none_of(dc.begin(), dc.end(), [&](const auto& b) {
                return &b != &a && b.first <= a.first && b.second <= a.second &&
                       (b.first < a.first || b.second < a.second);
            });
        const bool frontier = dc.size() >= 2;
        // And a pipeline timeline per simulated plan with pp > 1 (docs/report.md "Pipeline schedule").
        std::size_t pipelined = 0;
        for (const auto& p : plans_of(expected))
            if (p["pp"].get<int>() > 1 && p["fits"].get<bool>()) ++pipelined;
        CHECK(count(html, "class=\"pipeline\" data-plan") == pipelined);
        CHECK(count(html, "<svg") == (frontier ? 7u : 6u) + pipelined);
        for (const char* id : {"chart-breakdown", "chart-memory", "chart-days", "chart-cost",
                               "chart-scaling-throughput", "chart-scaling-days"})
            CHECK(count(html, fmt::format("id=\"{}\"", id)) == 1);
        CHECK(count(html, "id=\"chart-frontier\"") == (frontier ? 1u : 0u));
        CHECK(count(html, "<circle class=\"plan") == (frontier ? dc.size() : 0u));
        CHECK(count(html, "<circle class=\"plan front\"") == (frontier ? front : 0u));
        // Error bars (docs/trust.md): the days and the cost chart draw each fitting plan's band.
        std::size_t fitting = 0;
        for (const auto& p : plans_of(expected)) {
            if (!p["fits"].get<bool>()) continue;
            ++fitting;
            CHECK(count(html,
                        fmt::format("<title>80% band: {:.4g} to {:.4g} days</title>",
                                    p["days_to_train_p10"].get<double>(), p["days_to_train_p90"].get<double>())) == 1);
        }
        CHECK(count(html, "class=\"band\"") == 2 * fitting);

        // Scaling: each scenario plan that fits appears at its own GPU count with its own figures
        // (the same plan, simulated again); ideal lines and points come from these.
        const auto scaling = json::parse(script_block(html, "trainsim-scaling"));
        REQUIRE(scaling.is_array());
        const auto plans = plans_of(expected);
        for (const auto& p : plans) {
            if (!p["fits"].get<bool>()) continue;
            bool found = false;
            for (const auto& s : scaling) {
                if (std::find(s["plans"].begin(), s["plans"].end(), p["name"]) == s["plans"].end()) continue;
                for (const auto& pt : s["points"]) {
                    if (pt["gpus"] != p["num_gpus"]) continue;
                    found = true;
                    CHECK(pt["fits"] == true);
                    CHECK(pt["tokens_per_s_per_gpu"].get<double>() ==
                          Approx(p["tokens_per_s_per_gpu"].get<double>()).epsilon(1e-12));
                }
            }
            CAPTURE(p["name"]);
            CHECK(found);
        }
        for (const auto& s : scaling) {
            int prev = 0;
            for (const auto& pt : s["points"]) {
                CHECK(pt["gpus"].get<int>() > prev);
                prev = pt["gpus"];
                if (pt["fits"].get<bool>())
                    CHECK(pt["tokens_per_s_per_gpu"].get<double>() > 0);
                else
                    CHECK_FALSE(pt["reason"].get<std::string>().empty());
            }
        }
    }
    CHECK(run_trainsim(fmt::format("report /nonexistent/file.yaml --html {}", q(tmp.path / "x.html"))).rc == 2);
    CHECK_FALSE(fs::exists(tmp.path / "x.html"));
}

namespace {

// Chromium from $TRAINSIM_CHROMIUM, else the first of the usual names on PATH; empty if none.
std::string find_chromium() {
    if (const char* env = std::getenv("TRAINSIM_CHROMIUM"); env != nullptr && *env != '\0') return env;
    const char* path = std::getenv("PATH");
    std::stringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
    std::string dir;
    std::vector<fs::path> search;
    while (std::getline(dirs, dir, ':'))
        if (!dir.empty()) search.emplace_back(dir);
    for (const char* name : {"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"})
        for (const auto& d : search)
            if (access((d / name).c_str(), X_OK) == 0) return (d / name).string();
    return {};
}

struct Run {
    int rc = -1;
    std::string out;
};

Run run_command(const std::string& cmd) {
    Run r;
    std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
    if (!pipe) return r;
    std::array<char, 4096> buf{};
    while (std::fgets(buf.data(), buf.size(), pipe.get()) != nullptr) r.out += buf.data();
    const int status = pclose(pipe.release());
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

std::string unescape_html(std::string s) {
    const std::pair<const char*, const char*> ents[] = {{"&lt;", "<"},  {"&gt;", ">"},   {"&quot;", "\""},
                                                        {"&#39;", "'"}, {"&nbsp;", " "}, {"&amp;", "&"}};
    for (const auto& [from, to] : ents)
        for (auto p = s.find(from); p != std::string::npos; p = s.find(from, p + std::strlen(to)))
            s.replace(p, std::strlen(from), to);
    return s;
}

const json* lookup(const json& plan, const std::string& dotted) {
    const json* j = &plan;
    std::stringstream parts(dotted);
    std::string part;
    while (std::getline(parts, part, '.')) {
        if (!j->is_object() || !j->contains(part)) return nullptr;
        j = &(*j)[part];
    }
    return j;
}

// Checks one rendered table cell against the JSON value it shows: the number as printed (commas
// grouping thousands, a trailing % meaning x100, a currency after it) must be the JSON value
// rounded to the printed decimals.
void check_cell(const std::string& text, const json& v) {
    CAPTURE(text, v.dump());
    if (v.is_null()) {
        CHECK(text == "\u2014");
        return;
    }
    if (v.is_boolean()) {
        CHECK(text == (v.get<bool>() ? "yes" : "no"));
        return;
    }
    if (v.is_string()) {
        CHECK(text == v.get<std::string>());
        return;
    }
    REQUIRE(v.is_number());
    std::string digits;
    for (char c : text)
        if (c != ',') digits += c;
    static const std::regex num(R"(^(-?[0-9]+)(\.([0-9]+))?(%?)(.*)$)");
    std::smatch m;
    REQUIRE(std::regex_match(digits, m, num));
    const int decimals = m[3].matched ? static_cast<int>(m[3].length()) : 0;
    const double shown = std::stod(fmt::format("{}.{}", m[1].str(), m[3].matched ? m[3].str() : "0"));
    const double value = v.get<double>() * (m[4].length() > 0 ? 100.0 : 1.0);
    CHECK(std::fabs(shown - value) <= 0.5 * std::pow(10.0, -decimals) * (1 + 1e-9) + 1e-12 * std::fabs(value));
}

} // namespace

TEST_CASE("the report's table shows how many layers block recompute covers when a plan uses it", "[cli][report]") {
    TempDir tmp;
    const auto scenario = tmp.path / "block.yaml";
    {
        std::ofstream f(scenario);
        f << "title: block recompute\nmodel: llama2-70b\n"
             "training: {tokens: 1T, seq_len: 4096, global_batch: 1024, micro_batch: 1}\n"
             "parallel: {tp: 8, pp: 2, sequence_parallel: true, recompute: full, recompute_layers: 10}\n"
             "cluster: {gpu: h100-sxm, nodes: 4, gpus_per_node: 8}\n"
             "plans:\n  - name: block\n  - name: every layer\n    parallel: {recompute_layers: all}\n";
    }
    const auto out = tmp.path / "block.html";
    const auto rep = run_trainsim(fmt::format("report --json {} --html {}", q(scenario), q(out)));
    REQUIRE(rep.rc == 0);
    const auto plans = plans_of(json::parse(rep.out));
    REQUIRE(plans.size() == 2);
    CHECK(plans[0]["recompute_layers"] == 10);
    CHECK(plans[1]["recompute_layers"] == 40); // 80 layers / pp 2, all of them
    const std::string html = read_file(out);
    CHECK(count(html, "<th>layers recomputed per chunk</th>") == 1);
    CHECK(count(html, "data-key=\"recompute_layers\">10<") == 1);
    CHECK(count(html, "data-key=\"recompute_layers\">40<") == 1);
    // Without block recompute the row is left out, as vp and cp are.
    const auto plain = tmp.path / "plain.html";
    REQUIRE(run_trainsim(fmt::format("report {} --html {}", q(data_file("examples/default.yaml")), q(plain))).rc == 0);
    CHECK(count(read_file(plain), "data-key=\"recompute_layers\"") == 0);
}

TEST_CASE("report html renders in headless Chromium and its table shows the compare json numbers",
          "[cli][report][chromium]") {
    const std::string chromium = find_chromium();
    if (chromium.empty())
        FAIL(
            "headless Chromium not found (set TRAINSIM_CHROMIUM or install the Debian package `chromium`, "
            "which scripts/setup does); deselect with '~[chromium]' to run the other tests without it");
    TempDir tmp;
    for (const std::string& scenario :
         {data_file("examples/default.yaml"), data_file("questions/70b-1t-8-vs-64-h100.yaml")}) {
        CAPTURE(scenario);
        const auto html = fs::absolute(tmp.path / "report.html");
        const auto cmp = run_trainsim(fmt::format("compare --json {}", q(scenario)));
        REQUIRE(run_trainsim(fmt::format("report {} --html {}", q(scenario), q(html))).rc == cmp.rc);
        const auto expected = json::parse(cmp.out);

        const std::string flags = fmt::format(
            "--headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run --user-data-dir={} "
            "--window-size=1100,2400",
            q(tmp.path / "profile"));
        const auto dom = run_command(fmt::format("timeout 60 '{}' {} --dump-dom 'file://{}' 2>{}", chromium, flags,
                                                 html.string(), q(tmp.path / "chromium.log")));
        if (dom.rc != 0) FAIL(fmt::format("chromium exited {}: {}", dom.rc, read_file(tmp.path / "chromium.log")));
        // The browser built the page: the charts are SVG elements in its DOM (both scenarios
        // have two plans with a cost, so the days-vs-cost chart too), and a pipeline timeline per
        // plan with pp > 1 that fits.
        std::size_t pipelined = 0;
        for (const auto& p : plans_of(expected))
            if (p["pp"].get<int>() > 1 && p["fits"].get<bool>()) ++pipelined;
        CHECK(count(dom.out, "<svg") == 7 + pipelined);
        CHECK(count(dom.out, "class=\"pipeline\"") == pipelined);
        CHECK(count(dom.out, "id=\"chart-frontier\"") == 1);
        CHECK(count(dom.out, "<rect") > 10);
        CHECK(count(dom.out, "<polyline") >= 2);
        CHECK(count(dom.out, "<circle") >= 2);
        CHECK(count(dom.out, "</html>") == 1);
        // The data block as the browser holds it.
        CHECK(json::parse(unescape_html(script_block(dom.out, "trainsim-data"))) == expected);

        // Every cell of the plans table, read from the rendered DOM, shows its JSON field.
        const auto plans = plans_of(expected);
        static const std::regex cell(R"re(<td[^>]*data-plan="([0-9]+)"[^>]*data-key="([^"]+)"[^>]*>([^<]*)</td>)re");
        std::map<std::string, int> cells_per_key;
        for (auto it = std::sregex_iterator(dom.out.begin(), dom.out.end(), cell); it != std::sregex_iterator(); ++it) {
            const auto& m = *it;
            const auto i = static_cast<std::size_t>(std::stoul(m[1].str()));
            REQUIRE(i < plans.size());
            const std::string key = m[2].str();
            CAPTURE(plans[i]["name"], key);
            const json* v = lookup(plans[i], key);
            REQUIRE(v != nullptr);
            check_cell(unescape_html(m[3].str()), *v);
            ++cells_per_key[key];
        }
        for (const char* key :
             {"num_gpus", "gpu", "precision", "fits", "memory_per_gpu_gib", "step_time_s", "tokens_per_s_per_gpu",
              "mfu", "days_to_train", "gpu_hours", "cost", "cost_per_million_tokens"}) {
            CAPTURE(key);
            CHECK(cells_per_key[key] == static_cast<int>(plans.size()));
        }

        // And it paints: a PNG screenshot of the page.
        const auto png = tmp.path / "report.png";
        const auto shot = run_command(fmt::format("timeout 60 '{}' {} --screenshot={} 'file://{}' >/dev/null 2>&1",
                                                  chromium, flags, q(png), html.string()));
        CHECK(shot.rc == 0);
        const std::string img = read_file(png);
        CHECK(img.size() > 20000);
        CHECK(img.substr(0, 8) == std::string("\x89PNG\r\n\x1a\n", 8));
        fs::remove(png);
    }
}
