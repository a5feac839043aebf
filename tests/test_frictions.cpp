// What new users tripped on (issue #45 items 5, 6 and 8): the HTML report's money as a budget
// holder reads it and its band whiskers explained; profile values documented as "none" (no NVLink,
// no NICs) that work as documented; token counts, money and wide comparisons readable in text; and
// CPU offload naming every profile key it lacks at once.
#include "cli_runner.hpp"
#include "scratch_dir.hpp"

#include "trainsim/model/core/text_format.hpp"
#include "trainsim/model/core/units.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using trainsim::test::run_trainsim;
using trainsim::test::ScratchDir;

std::string q(const fs::path& p) {
    return fmt::format("'{}'", p.string());
}

std::string write(const ScratchDir& dir, const std::string& name, const std::string& text) {
    const auto path = dir / name;
    trainsim::test::write_text(path, text);
    return path.string();
}

std::string shipped_profile(const std::string& id) {
    return trainsim::test::read_text(fs::path(TRAINSIM_TEST_DATA_DIR) / "hardware" / (id + ".yaml"));
}

// `text` with the value of its `  key: {value: ...` entry replaced by `value` (the source kept).
std::string with_profile_value(std::string text, const std::string& key, const std::string& value) {
    const auto at = text.find("  " + key + ": {value: ");
    REQUIRE(at != std::string::npos);
    const auto begin = text.find("{value: ", at) + 8;
    const auto end = text.find(", source", begin);
    REQUIRE(end != std::string::npos);
    return text.replace(begin, end - begin, value);
}

std::vector<json> plans_of(const json& j) {
    std::vector<json> out;
    if (j.contains("plans"))
        for (const auto& p : j["plans"]) out.push_back(p);
    else
        out.push_back(j);
    return out;
}

// The number a cell shows: "1,020,000 CNY" -> 1020000, "87.0%" -> 87.0, with its decimals.
std::pair<double, int> shown_number(const std::string& text) {
    static const std::regex num(R"(^(-?[0-9,]+)(\.([0-9]+))?)");
    std::smatch m;
    REQUIRE(std::regex_search(text, m, num));
    std::string digits;
    for (char c : m[1].str())
        if (c != ',') digits += c;
    if (m[3].matched) {
        digits.push_back('.');
        digits.append(m[3].first, m[3].second);
    }
    return {std::stod(digits), m[3].matched ? static_cast<int>(m[3].length()) : 0};
}

// A number as shown rounds the value: within half its last digit.
void check_shows(const std::string& text, double value) {
    CAPTURE(text, value);
    const auto [shown, decimals] = shown_number(text);
    CHECK(std::fabs(shown - value) <= 0.5 * std::pow(10.0, -decimals) * (1 + 1e-9) + 1e-9 * std::fabs(value));
}

// "304,000 CNY": whole currency units grouped by threes, then the currency (written here
// independently of the code under test).
std::string money_text(double v, const std::string& currency) {
    const std::string digits = std::to_string(std::llround(v));
    std::string out;
    for (std::size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
        out += digits[i];
    }
    return out + " " + currency;
}

// A small Llama-2 7B plan on one 8x H100 node (32 sequences per step, 10B tokens: a few days),
// paid three ways: a monthly commitment on machine-months, an annual one at 15% off, and on
// demand per started hour.
const char* const kMoneyScenario = R"(title: money fixture
model: llama2-7b
training: {tokens: 10B, seq_len: 4096, global_batch: 32, micro_batch: 1}
parallel: {tp: 2, sequence_parallel: true, sharding: dist_opt}
precision: bf16
cluster: {gpu: h100-sxm, nodes: 1, gpus_per_node: 8}
pricing: {basis: machine_month, rate: 100000, currency: CNY, commitment: monthly, discounts: {annual: "15%"}}
plans:
  - name: monthly
  - name: annual
    pricing: {commitment: annual}
  - name: hourly
    pricing: {basis: gpu_hour, rate: 2.5, increment: hour, commitment: on_demand}
)";

// One plan of Llama-2 7B (tp 2) on one node of `gpu`, with `extra` appended to the cluster.
std::string small_scenario(const std::string& gpu, const std::string& cluster_extra, int nodes = 1,
                           const std::string& parallel_extra = "") {
    return fmt::format("model: llama2-7b\n"
                       "training: {{tokens: 10B, seq_len: 4096, global_batch: 32, micro_batch: 1}}\n"
                       "parallel: {{tp: 2, sequence_parallel: true, sharding: dist_opt{}}}\n"
                       "precision: bf16\n"
                       "cluster: {{gpu: {}, nodes: {}, gpus_per_node: 8{}}}\n",
                       parallel_extra, gpu, nodes, cluster_extra);
}

} // namespace

TEST_CASE("report html shows each plan's bill, pro-rated cost, unused share and why, as compare json bills it",
          "[frictions][report]") {
    ScratchDir dir;
    const auto file = write(dir, "money.yaml", kMoneyScenario);
    const auto html_path = dir / "report.html";
    const auto cmp = run_trainsim("compare --json " + q(file));
    REQUIRE(cmp.rc == 0);
    REQUIRE(run_trainsim(fmt::format("report {} --no-scaling --html {}", q(file), q(html_path))).rc == 0);
    const std::string html = trainsim::test::read_text(html_path);
    const auto plans = plans_of(json::parse(cmp.out));
    REQUIRE(plans.size() == 3);

    // Every cell of the plans table by (plan, JSON key), and the why row by plan.
    std::map<std::pair<std::size_t, std::string>, std::string> cell;
    static const std::regex td(R"re(<td[^>]*data-plan="([0-9]+)"[^>]*data-key="([^"]+)"[^>]*>([^<]*)</td>)re");
    for (auto it = std::sregex_iterator(html.begin(), html.end(), td); it != std::sregex_iterator(); ++it)
        cell[{std::stoul((*it)[1].str()), (*it)[2].str()}] = (*it)[3].str();
    std::map<std::size_t, std::string> why;
    static const std::regex why_td(R"re(<td[^>]*data-plan="([0-9]+)"[^>]*data-note="bill_why"[^>]*>([^<]*)</td>)re");
    for (auto it = std::sregex_iterator(html.begin(), html.end(), why_td); it != std::sregex_iterator(); ++it)
        why[std::stoul((*it)[1].str())] = (*it)[2].str();
    REQUIRE(why.size() == plans.size());

    for (std::size_t i = 0; i < plans.size(); ++i) {
        const auto& p = plans[i];
        CAPTURE(p["name"]);
        REQUIRE(p["fits"] == true);
        // The steady run's bill: the hours paid for and the hours used decide everything shown.
        const auto& st = p["billing"]["steady"];
        const double billed_h = st["billed_hours"].get<double>(), used_h = st["used_hours"].get<double>();
        const double cost = st["cost"].get<double>();
        REQUIRE(billed_h >= used_h);
        for (const char* k : {"cost", "billed_units", "cost_prorated", "unused_fraction", "expected_cost"})
            REQUIRE(cell.count(std::pair<std::size_t, std::string>(i, k)) == 1);
        auto at = [&](const char* k) { return cell[std::pair<std::size_t, std::string>(i, k)]; };
        check_shows(at("cost"), cost);
        CHECK(at("cost") == money_text(cost, "CNY"));
        check_shows(at("cost_prorated"), cost * used_h / billed_h);
        check_shows(at("unused_fraction"), 100.0 * (billed_h - used_h) / billed_h);
        CHECK_THAT(at("unused_fraction"), Catch::EndsWith("%"));
        check_shows(at("expected_cost"), p["expected_cost"].get<double>());
        const std::string unit = st["unit"].get<std::string>();
        check_shows(at("billed_units"), st["billed_units"].get<double>());
        CHECK_THAT(at("billed_units"),
                   Catch::EndsWith(" " + unit + (st["billed_units"].get<double>() == 1 ? "" : "s")));
        // Why, in the plan's own terms: the whole terms or months paid, or the started hours.
        const std::string w = why[i];
        CAPTURE(w);
        if (p["name"] == "monthly") {
            // A run of under a month on a monthly term: one 730 h month of one machine.
            CHECK(billed_h == Approx(730.0));
            CHECK(st["billed_units"].get<double>() == Approx(1.0));
            CHECK(w == fmt::format("a monthly commitment is paid in whole 1-month terms: 1 term ({:.1f} days) paid "
                                   "for the {:.1f} days the run takes",
                                   billed_h / 24, used_h / 24));
        } else if (p["name"] == "annual") {
            // A year paid for a run of days: most of the bill unused.
            CHECK(billed_h == Approx(12 * 730.0));
            CHECK(w == fmt::format("an annual commitment is paid in whole 12-month terms: 1 term ({:.1f} days) paid "
                                   "for the {:.1f} days the run takes",
                                   billed_h / 24, used_h / 24));
        } else {
            CHECK(unit == "GPU-hour");
            CHECK(billed_h == Approx(std::ceil(used_h)));
            CHECK(w == fmt::format("on demand, billed per started hour: {:.1f} hours paid for the {:.1f} hours the "
                                   "run takes",
                                   billed_h, used_h));
        }
    }

    // The whiskers of the days and cost charts, named in each chart's legend and explained above.
    for (const char* id : {"chart-days", "chart-cost"}) {
        CAPTURE(id);
        const auto begin = html.find(fmt::format("<svg id=\"{}\"", id));
        REQUIRE(begin != std::string::npos);
        const std::string svg = html.substr(begin, html.find("</svg>", begin) - begin);
        CHECK(svg.find("class=\"band\"") != std::string::npos); // there are whiskers to explain
        CHECK(svg.find("class=\"legend-whisker\"") != std::string::npos);
        CHECK(svg.find(">whisker: 80% band (p10 to p90), trainsim&#39;s error on published runs like the plan<") !=
              std::string::npos);
    }
    const auto note = html.find("<p class=\"note\" id=\"band-legend\">");
    REQUIRE(note != std::string::npos);
    const std::string legend = html.substr(note, html.find("</p>", note) - note);
    CHECK_THAT(legend, Catch::Contains("80% band, p10 to p90") && Catch::Contains("docs/trust.md"));
}

TEST_CASE("a profile with nvlink_bandwidth 0 GB/s loads and its GPUs talk over PCIe", "[frictions][network]") {
    ScratchDir dir;
    // h100-pcie without its NVLink bridges: "0 GB/s", as documented for none.
    const auto none = write(dir, "h100-pcie-no-nvlink.yaml",
                            with_profile_value(shipped_profile("h100-pcie"), "nvlink_bandwidth", "\"0 GB/s\""));
    const auto bridged = write(dir, "bridge.yaml", small_scenario("h100-pcie", ", intra_node: nvlink-bridge"));
    const auto pcie = write(dir, "pcie.yaml", small_scenario("h100-pcie", ", intra_node: pcie"));
    const auto a = run_trainsim(fmt::format("simulate --json {} --profile {}", q(bridged), q(none)));
    REQUIRE(a.rc == 0);
    const auto b = run_trainsim("simulate --json " + q(pcie));
    REQUIRE(b.rc == 0);
    // Without NVLink no bridge is built: the same step as the shipped card over PCIe only.
    const auto ja = json::parse(a.out), jb = json::parse(b.out);
    CHECK(ja["step_time_s"].get<double>() == Approx(jb["step_time_s"].get<double>()).epsilon(1e-12));
    CHECK(ja["breakdown"]["tp_exposed_s"].get<double>() ==
          Approx(jb["breakdown"]["tp_exposed_s"].get<double>()).epsilon(1e-12));
    // With the bridges it is another step (else the comparison above would prove nothing).
    const auto c = json::parse(run_trainsim("simulate --json " + q(bridged)).out);
    CHECK(c["step_time_s"].get<double>() < jb["step_time_s"].get<double>());

    // NVLS runs over NVLink: a profile that has none cannot claim it.
    const auto nvls = write(dir, "h100-sxm-no-nvlink.yaml",
                            with_profile_value(shipped_profile("h100-sxm"), "nvlink_bandwidth", "\"0 GB/s\""));
    const auto r = run_trainsim(fmt::format("simulate {} --profile {}", q(pcie), q(nvls)), true);
    CHECK(r.rc == 2);
    CHECK_THAT(r.out, Catch::Contains("h100-sxm-no-nvlink.yaml:") && Catch::Contains("interconnect.nvls") &&
                          Catch::Contains("nvls: false"));
    // Below the physical range, and not 0, is still refused.
    const auto tiny = write(dir, "h100-pcie-tiny.yaml",
                            with_profile_value(shipped_profile("h100-pcie"), "nvlink_bandwidth", "\"1 kB/s\""));
    CHECK(run_trainsim(fmt::format("simulate {} --profile {}", q(pcie), q(tiny))).rc == 2);
}

TEST_CASE("node.nics_per_node 0 is a single node, and plan says one node is the most it can use",
          "[frictions][plan-search]") {
    ScratchDir dir;
    // h100-pcie: it has no host-memory keys, so that the fit advice below has no offload knob to
    // simulate (fast).
    const auto profile = write(dir, "h100-pcie-no-nics.yaml",
                               with_profile_value(shipped_profile("h100-pcie"), "nics_per_node", "0"));
    // One node needs no NIC: it runs, with the same step as with the shipped profile's 2 NICs.
    const auto one = write(dir, "one.yaml", small_scenario("h100-pcie", ""));
    const auto r1 = run_trainsim(fmt::format("simulate --json {} --profile {}", q(one), q(profile)));
    REQUIRE(r1.rc == 0);
    const auto shipped = json::parse(run_trainsim("simulate --json " + q(one)).out);
    CHECK(json::parse(r1.out)["step_time_s"].get<double>() ==
          Approx(shipped["step_time_s"].get<double>()).epsilon(1e-12));
    // Two nodes cannot talk: refused, naming the key, the profile it came from, and the limit.
    const auto two = write(dir, "two.yaml", small_scenario("h100-pcie", "", 2));
    const auto r2 = run_trainsim(fmt::format("simulate {} --profile {}", q(two), q(profile)), true);
    CHECK(r2.rc == 2);
    CHECK_THAT(r2.out, Catch::Contains("cluster.nics_per_node") && Catch::Contains("h100-pcie-no-nics.yaml") &&
                           Catch::Contains("one node of 8 GPUs is the most the cluster can use"));

    // A plan search that nothing fits on one node: it says why it does not look further.
    const std::string search =
        fmt::format("plan --model llama2-70b --gpu {} --gpus 8 --tokens 100B --no-offload --top 1 -q", q(profile));
    const auto text = run_trainsim(search, true);
    CHECK(text.rc == 3);
    CHECK_THAT(text.out, Catch::Contains("this cluster has no NICs: one node of 8 GPUs is the most it can use"));
    CHECK_THAT(text.out, !Catch::Contains("up to 64x"));
    const auto js = run_trainsim(search + " --json");
    CHECK(js.rc == 3);
    const auto j = json::parse(js.out);
    CHECK(j["fit_advice"]["no_nics"] == true);
    CHECK(j["fit_advice"]["more_gpus"].is_null());
    // Several nodes asked for: refused with the same words (exit 2), not "no valid layout".
    const auto many =
        run_trainsim(fmt::format("plan --model llama2-7b --gpu {} --gpus 16 --tokens 10B -q", q(profile)), true);
    CHECK(many.rc == 2);
    CHECK_THAT(many.out, Catch::Contains("this cluster has no NICs") && Catch::Contains("one node of 8 GPUs"));
}

TEST_CASE("token counts print as 1T or 300B and parse back", "[frictions][units]") {
    using trainsim::model::format_count;
    using trainsim::model::parse_count;
    const std::vector<std::pair<double, std::string>> cases{
        {1e12, "1T"}, {3e11, "300B"}, {1.5e12, "1.5T"}, {6.74e9, "6.74B"}, {15.6e12, "15.6T"},
        {4e7, "40M"}, {8e3, "8k"},    {512, "512"},     {0, "0"},          {2.5e15, "2500T"}};
    for (const auto& [n, text] : cases) {
        CAPTURE(n);
        CHECK(format_count(n) == text);
        CHECK(parse_count(text) == Approx(n).epsilon(1e-12));
    }
    // Three significant digits: 20 tokens per parameter of a 6.74e9-parameter model.
    CHECK(format_count(134.8e9) == "135B");
    CHECK(trainsim::model::format_money(304000, "CNY") == "304,000 CNY");
    CHECK(trainsim::model::format_grouped(-1234567.891, 2) == "-1,234,567.89");
}

TEST_CASE("text output writes token counts as written, never 1e+12", "[frictions][cli]") {
    ScratchDir dir;
    auto text = small_scenario("h100-sxm", "");
    text.replace(text.find("tokens: 10B"), 11, "tokens: 300B");
    const auto file = write(dir, "t.yaml", text);
    const auto r = run_trainsim("simulate " + q(file));
    REQUIRE(r.rc == 0);
    CHECK_THAT(r.out, Catch::Contains("\n  300B tokens: "));
    CHECK_THAT(r.out, !Catch::Contains("e+"));
    const auto p =
        run_trainsim("plan --model llama2-7b --gpu h100-sxm --gpus 8 --global-batch 32 --tokens 1T --top 1 -q");
    REQUIRE(p.rc == 0);
    CHECK_THAT(p.out, Catch::Contains(", 1T tokens, global batch 32 x 4096 tokens"));
    CHECK_THAT(p.out, !Catch::Contains("e+"));
}

TEST_CASE("plan tables show the money with its currency and thousands separators", "[frictions][plan-search]") {
    const std::string args =
        "plan --model llama2-7b --gpu h100-sxm --gpus 8,16 --global-batch 32 --tokens 300B --price 2.5 --currency CNY "
        "--top 3 --max-micro-batch 1 -q";
    const auto js = run_trainsim(args + " --json");
    REQUIRE(js.rc == 0);
    const auto j = json::parse(js.out);
    const auto text = run_trainsim(args);
    REQUIRE(text.rc == 0);
    REQUIRE(j["plans"].size() >= 2);
    // The ranked table: between "ranked by" and the "'=': tied" line, one row per plan in rank order.
    const auto top = text.out.find("ranked by");
    REQUIRE(top != std::string::npos);
    std::istringstream lines(text.out.substr(top, text.out.find("'=': tied", top) - top));
    std::string line;
    std::size_t rows = 0;
    static const std::regex row(R"(^ *([0-9]+)[= ] +([0-9]+)  )");
    while (std::getline(lines, line)) {
        std::smatch m;
        if (!std::regex_search(line, m, row)) continue;
        CAPTURE(line);
        REQUIRE(std::stoul(m[1].str()) == rows + 1);
        const auto& p = j["plans"][rows];
        CHECK(std::stoi(m[2].str()) == p["num_gpus"].get<int>());
        CHECK(p["expected_cost"].get<double>() >= 1000); // so that a separator must show
        CHECK(line.find(money_text(p["expected_cost"].get<double>(), "CNY")) != std::string::npos);
        ++rows;
    }
    CHECK(rows == j["plans"].size());
    // The per-count table too: each count's best with its bill.
    REQUIRE(j["frontier"].size() == 2);
    for (const auto& f : j["frontier"]) {
        CAPTURE(f["num_gpus"]);
        CHECK(text.out.find(money_text(f["best"]["expected_cost"].get<double>(), "CNY")) != std::string::npos);
    }
}

TEST_CASE("compare of 12 plans wraps its table at the terminal width", "[frictions][cli]") {
    ScratchDir dir;
    std::string yaml = R"(model: llama2-7b
training: {tokens: 10B, seq_len: 4096, global_batch: 16, micro_batch: 1}
parallel: {tp: 8, sequence_parallel: true, sharding: dist_opt}
precision: bf16
cluster: {gpu: h100-sxm, nodes: 1, gpus_per_node: 8}
pricing: {basis: gpu_hour, rate: 2.0, currency: USD}
plans:
)";
    for (int i = 1; i <= 12; ++i)
        yaml += fmt::format("  - name: plan {:02d} at {:.2f} USD per GPU-hour\n    pricing: {{rate: {:.2f}}}\n", i,
                            1.0 + 0.25 * i, 1.0 + 0.25 * i);
    const auto file = write(dir, "twelve.yaml", yaml);
    const auto j = json::parse(run_trainsim("compare --json " + q(file)).out);
    REQUIRE(j["plans"].size() == 12);
    for (const std::size_t width : {100u, 120u}) {
        CAPTURE(width);
        if (width == 120u)
            unsetenv("COLUMNS"); // the default
        else
            setenv("COLUMNS", std::to_string(width).c_str(), 1);
        const auto r = run_trainsim("compare " + q(file));
        unsetenv("COLUMNS");
        REQUIRE(r.rc == 0);
        // The side-by-side table: up to the first plan's details.
        const std::string table = r.out.substr(0, r.out.find("\n== "));
        std::istringstream lines(table);
        std::string line;
        std::set<std::string> named;
        std::size_t blocks = 0;
        std::vector<std::string> header_names; // the current block's plans, in column order
        while (std::getline(lines, line)) {
            CAPTURE(line);
            CHECK(line.size() <= width);
            if (line.rfind("plan ", 0) == 0 && line.find(" at ") != std::string::npos) {
                ++blocks;
                header_names.clear();
                std::vector<std::pair<std::size_t, std::string>> at;
                for (const auto& p : j["plans"]) {
                    const std::string name = p["name"].get<std::string>();
                    if (const auto pos = line.find(name); pos != std::string::npos) at.emplace_back(pos, name);
                }
                std::sort(at.begin(), at.end());
                for (const auto& [pos, name] : at) {
                    CHECK(named.insert(name).second); // each plan heads exactly one column
                    header_names.push_back(name);
                }
            } else if (line.rfind("days ", 0) == 0) {
                // The block's days, in its plans' order, as compare --json gives them.
                std::istringstream cells(line.substr(5));
                for (const auto& name : header_names) {
                    std::string v;
                    cells >> v;
                    for (const auto& p : j["plans"])
                        if (p["name"] == name) CHECK(v == fmt::format("{:.1f}", p["days_to_train"].get<double>()));
                }
            }
        }
        CHECK(named.size() == 12);
        CHECK(blocks > 1);
    }
}

TEST_CASE("offload names every profile key it lacks at once, with the profile file", "[frictions][offload]") {
    ScratchDir dir;
    // The shipped h100-pcie profile gives no host memory, host memory bandwidth or CPU Adam
    // efficiency.
    const std::string profile_text = shipped_profile("h100-pcie");
    for (const char* key : {"host_memory:", "host_memory_bandwidth:", "cpu_adam_efficiency:"})
        REQUIRE(profile_text.find(key) == std::string::npos);
    const auto file = write(dir, "offload.yaml", small_scenario("h100-pcie", "", 1, ", offload: optimizer"));
    const auto r = run_trainsim("simulate " + q(file), true);
    CHECK(r.rc == 2);
    // One message, on the offload key, with all three and the profile file.
    std::istringstream lines(r.out);
    std::string line, found;
    while (std::getline(lines, line))
        if (line.find("parallel.offload") != std::string::npos) found += line + "\n";
    CAPTURE(r.out);
    CHECK(std::count(found.begin(), found.end(), '\n') == 1);
    CHECK_THAT(found, Catch::Contains("node.host_memory_bandwidth") && Catch::Contains("node.cpu_adam_efficiency") &&
                          Catch::Contains("node.host_memory (or the scenario's cluster.host_memory)") &&
                          Catch::Contains((fs::path("hardware") / "h100-pcie.yaml").string()));
    // With the host memory written in the scenario, only the profile's two keys are missing.
    const auto with_host =
        write(dir, "host.yaml", small_scenario("h100-pcie", ", host_memory: \"1 TB\"", 1, ", offload: optimizer"));
    const auto r2 = run_trainsim("simulate " + q(with_host), true);
    CHECK(r2.rc == 2);
    CHECK_THAT(r2.out, Catch::Contains("node.host_memory_bandwidth, node.cpu_adam_efficiency: add them"));
    CHECK_THAT(r2.out, !Catch::Contains("node.host_memory (or"));
}
