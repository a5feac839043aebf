// --lang (sim/report/lang.hpp): the text tables and the HTML report in Simplified Chinese from the
// catalog sim/i18n/zh_CN.po; English unchanged; JSON and CSV never translated; an unknown language
// refused with the list of those there are.
#include "banded_run.hpp"
#include "cli_runner.hpp"
#include "scratch_dir.hpp"

#include "trainsim/model/core/file_io.hpp"
#include "trainsim/model/input/loader.hpp"
#include "trainsim/sim/report/html_report.hpp"
#include "trainsim/sim/report/lang.hpp"
#include "trainsim/sim/report/report.hpp"
#include "trainsim/sim/run/estimate.hpp"
#include "trainsim/sim/trust/trust.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>

using namespace trainsim;
using trainsim::test::run_trainsim;

namespace {

// Three plans that take every branch of the tables a budget holder reads: priced with an energy
// profile and an error band (H100, FP8), pipelined (pp 2, for the pipeline timeline), and one
// that does not fit (Llama-2 70B on 8 RTX 3090s: the "does not fit" rows and notes).
const char* kScenario = R"(title: "lang test"
model: llama2-7b
training: {tokens: 10B, seq_len: 4096, global_batch: 64, micro_batch: 1}
parallel: {tp: 2, pp: 1, dp: auto, sequence_parallel: true, sharding: dist_opt, recompute: selective}
precision: bf16
cluster: {gpu: h100-sxm, nodes: 1, gpus_per_node: 8}
pricing: {basis: machine_month, rate: 38000, currency: CNY, commitment: monthly}
plans:
  - name: h100 fp8
    precision: fp8
  - name: h100 pp2
    parallel: {tp: 2, pp: 2}
  - name: 70b on 3090
    model: llama2-70b
    cluster: {gpu: rtx-3090}
)";

using Run = test::BandedRun;

const Run& run() {
    static const Run r = test::simulate_with_bands(kScenario, "lang-test.yaml");
    return r;
}

std::vector<std::string> lines_of(const std::string& s) {
    std::vector<std::string> out;
    std::istringstream in(s);
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
}

// The English words left in a table's row label once the words allowed in a Chinese label are
// taken out: units, acronyms and ids (GPU, MFU, TFLOP/s, GiB, kW, CO2, TP/PP/DP/CP, tokens).
std::string english_words(const std::string& label) {
    static const std::vector<std::string_view> kAllowed{"tokens/s", "tokens", "TFLOP/s", "GPU", "MFU", "GiB", "HBM",
                                                        "kWh", "kW",       "CO2",    "FP8",     "TP",  "PP",  "DP",
                                                        "CP",       "tp",     "pp",      "vp",  "cp",  "dp",  "s"};
    std::string words;
    const std::string_view v(label);
    for (std::size_t i = 0; i < v.size();) {
        const auto ok = std::find_if(kAllowed.begin(), kAllowed.end(),
                                     [&](std::string_view a) { return v.substr(i, a.size()) == a; });
        if (ok != kAllowed.end()) {
            i += ok->size();
            continue;
        }
        if (std::isalpha(static_cast<unsigned char>(v[i])) != 0) words.push_back(v[i]);
        ++i;
    }
    return words;
}

} // namespace

TEST_CASE("parse_lang accepts en and zh-CN and refuses others with the list", "[lang]") {
    CHECK(sim::parse_lang("en") == sim::Lang::en);
    CHECK(sim::parse_lang("zh-CN") == sim::Lang::zh_cn);
    CHECK(sim::parse_lang("zh_CN") == sim::Lang::zh_cn); // the gettext spelling
    CHECK(sim::parse_lang("zh-cn") == sim::Lang::zh_cn);
    CHECK_THROWS_WITH(sim::parse_lang("fr"), "unknown language 'fr' (available: en, zh-CN)");
    CHECK_THROWS_AS(sim::parse_lang(""), sim::LangError);
    CHECK(sim::lang_tag(sim::Lang::zh_cn) == "zh-CN");
}

TEST_CASE("display_width counts a CJK character as two columns, as fmt pads", "[lang]") {
    CHECK(sim::display_width("plan") == 4);
    CHECK(sim::display_width("方案") == 4);         // two ideographs (U+65B9, U+6848)
    CHECK(sim::display_width("每 GPU 显存") == 11); // 3 ideographs x 2 + "GPU" + 2 spaces
    CHECK(sim::display_width("\u2014") == 1);       // em dash: narrow
    CHECK(sim::display_width("（") == 2);           // full-width parenthesis U+FF08
    // The same width fmt pads to: "{:>6}" of a 4-column string adds two spaces.
    CHECK(fmt::format("{:>6}", "方案") == "  方案");
}

TEST_CASE("the translator is the identity in English and records what the catalog lacks", "[lang]") {
    std::vector<std::string> missing;
    const sim::Translator en(sim::Lang::en, &missing);
    CHECK(en("memory/GPU") == "memory/GPU");
    const sim::Translator zh(sim::Lang::zh_cn, &missing);
    CHECK(zh("memory/GPU") == "每 GPU 显存");
    CHECK(missing.empty());
    CHECK(zh("not a catalog key") == "not a catalog key");
    CHECK(missing == std::vector<std::string>{"not a catalog key"});
    // The catalog is the .po's entries, sorted for binary search (po_to_cpp).
    const auto keys = sim::catalog_keys(sim::Lang::zh_cn);
    CHECK(keys.size() > 150);
    CHECK(std::is_sorted(keys.begin(), keys.end()));
    CHECK(sim::catalog_keys(sim::Lang::en).empty());
}

TEST_CASE("zh-CN text tables use only catalog strings and leave no English word in a row label", "[lang]") {
    const auto& r = run();
    REQUIRE(r.results.size() == 3);
    REQUIRE(r.results[0].estimate.band.has_value());
    REQUIRE_FALSE(r.results[2].estimate.fits);
    std::vector<std::string> missing;
    const sim::Translator zh(sim::Lang::zh_cn, &missing);
    const std::string table = sim::format_comparison(r.results, 200, zh);
    std::string details;
    for (const auto& x : r.results) details += sim::format_plan(*x.plan, x.estimate, zh);
    CHECK(missing.empty());
    for (const auto& m : missing) UNSCOPED_INFO("untranslated: " << m);

    // The table's first column: its header and row labels, in Chinese.
    const auto rows = lines_of(table);
    REQUIRE(rows.size() >= 15);
    CHECK(rows[0].rfind("方案", 0) == 0);
    std::set<std::string> labels;
    for (const auto& line : rows) {
        const auto end = line.find("  ");
        const std::string label = line.substr(0, end);
        labels.insert(label);
        INFO("row label: " << label);
        CHECK(english_words(label).empty());
    }
    for (const char* want : {"GPU 数", "精度", "并行布局", "每 GPU 显存", "步时", "天数", "GPU 小时", "费用", "每百万 tokens"})
        CHECK(labels.count(want) == 1);
    CHECK(table.find(" 放不下") != std::string::npos); // the 70B plan's memory cell
    // Numbers, units and ids as in English.
    const std::string en_table = sim::format_comparison(r.results, 200);
    CHECK(en_table.rfind("plan ", 0) == 0);
    CHECK(en_table.find("memory/GPU") != std::string::npos);
    CHECK(en_table.find("NO FIT") != std::string::npos);
    for (const auto& x : r.results) {
        const auto& e = x.estimate;
        CHECK(table.find(fmt::format("{:.1f}/{:.1f} GiB", model::to_gib(e.memory.total()), model::to_gib(e.capacity))) !=
              std::string::npos);
    }
    // The columns line up by display width: every line of a block is as wide as its header.
    const auto width = sim::display_width(rows[0]);
    for (std::size_t i = 1; i < rows.size() && !rows[i].empty(); ++i) CHECK(sim::display_width(rows[i]) == width);

    CHECK(details.find("  每 GPU 显存（流水线阶段 0）") != std::string::npos);
    CHECK(details.find("80% 区间") != std::string::npos);
    CHECK(details.find("显存放不下") != std::string::npos);
    CHECK(details.find("memory per GPU") == std::string::npos);
}

TEST_CASE("zh-CN HTML report: lang attribute, CJK fonts, catalog strings only, same embedded data", "[lang]") {
    const auto& r = run();
    std::vector<std::string> missing;
    const sim::Translator zh(sim::Lang::zh_cn, &missing);
    const std::string zh_page = sim::html_report("lang test", "lang-test.yaml", r.results, {}, zh);
    const std::string en_page = sim::html_report("lang test", "lang-test.yaml", r.results, {});
    CHECK(missing.empty());
    for (const auto& m : missing) UNSCOPED_INFO("untranslated: " << m);

    CHECK(zh_page.find("<html lang=\"zh-CN\">") != std::string::npos);
    CHECK(zh_page.find("\"PingFang SC\"") != std::string::npos);
    CHECK(zh_page.find("<h2>方案对比</h2>") != std::string::npos);
    CHECK(zh_page.find("<tr><th>每 GPU 显存（GiB）</th>") != std::string::npos);
    CHECK(zh_page.find("<tr><th>按账单费用（整计费单位）</th>") != std::string::npos);
    CHECK(zh_page.find("Plans side by side") == std::string::npos);
    CHECK(zh_page.find("@import") == std::string::npos); // no fetched font
    CHECK(zh_page.find("url(") == std::string::npos);

    CHECK(en_page.find("<html lang=\"en\">") != std::string::npos);
    CHECK(en_page.find("<h2>Plans side by side</h2>") != std::string::npos);
    CHECK(en_page.find("PingFang") == std::string::npos);

    // The page's data block (the plans' JSON) is the same in both languages.
    auto data = [](const std::string& page) {
        const std::string open = "<script type=\"application/json\" id=\"trainsim-data\">\n";
        const auto b = page.find(open);
        const auto e = page.find("</script>", b);
        return page.substr(b + open.size(), e - b - open.size());
    };
    CHECK(data(zh_page) == data(en_page));
    // Every row header of the plans table is translated: no English word in a <th> of zh_page's
    // plans table but units, acronyms and ids.
    const auto t0 = zh_page.find("<table id=\"plans-table\">");
    const auto t1 = zh_page.find("</table>", t0);
    REQUIRE(t0 != std::string::npos);
    const std::string table = zh_page.substr(t0, t1 - t0);
    int headers = 0;
    for (auto at = table.find("<tr><th>"); at != std::string::npos; at = table.find("<tr><th>", at + 1)) {
        const auto b = at + 8;
        const std::string label = table.substr(b, table.find("</th>", b) - b);
        INFO("row header: " << label);
        CHECK(english_words(label).empty());
        ++headers;
    }
    CHECK(headers >= 25);
}

TEST_CASE("JSON and CSV are the same with --lang zh-CN, and an unknown language is refused", "[lang]") {
    const std::string file = fmt::format("'{}/questions/7b-monthly-vs-annual-rental-cny.yaml'", TRAINSIM_TEST_DATA_DIR);
    const auto json_en = run_trainsim("simulate --json " + file);
    const auto json_zh = run_trainsim("simulate --json --lang zh-CN " + file);
    REQUIRE(json_en.rc == 0);
    CHECK(json_zh.rc == 0);
    CHECK(json_zh.out == json_en.out);
    const auto csv_en = run_trainsim("compare --csv " + file);
    const auto csv_zh = run_trainsim("compare --csv --lang zh-CN " + file);
    REQUIRE(csv_en.rc == 0);
    CHECK(csv_zh.out == csv_en.out);

    const auto text_en = run_trainsim("compare " + file);
    const auto text_zh = run_trainsim("compare --lang zh-CN " + file);
    CHECK(text_en.out.find("\nplan ") != std::string::npos);
    CHECK(text_zh.out.find("\n方案 ") != std::string::npos);

    const auto bad = run_trainsim("compare --lang xx " + file, true);
    CHECK(bad.rc == 2);
    CHECK(bad.out.find("unknown language 'xx' (available: en, zh-CN)") != std::string::npos);
    CHECK(bad.out.find("plan") == std::string::npos); // refused before anything was simulated
    CHECK(run_trainsim("plan --model llama2-7b --gpu h100-sxm --gpus 8 --lang de", true).rc == 2);
}

TEST_CASE("report --lang zh-CN writes the Chinese page and leaves an existing page alone on a bad tag", "[lang]") {
    test::ScratchDir tmp;
    const std::string file = fmt::format("'{}/questions/7b-monthly-vs-annual-rental-cny.yaml'", TRAINSIM_TEST_DATA_DIR);
    const auto out = tmp.path() / "r.html";
    REQUIRE(run_trainsim(fmt::format("report --no-scaling --lang zh-CN {} --html '{}'", file, out.string())).rc == 0);
    const std::string page = model::read_regular_file(out, model::kMaxInputBytes);
    CHECK(page.find("<html lang=\"zh-CN\">") != std::string::npos);
    CHECK(run_trainsim(fmt::format("report --no-scaling --lang xx {} --html '{}'", file, out.string())).rc == 2);
    CHECK(model::read_regular_file(out, model::kMaxInputBytes) == page);
}
