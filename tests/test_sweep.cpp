// trainsim sweep: the grid reader (file:line:key for every problem, a cell's problem at the grid line
// that wrote it), the rows (one per cell and GPU count, in the grid's order), and --resume after a
// kill (the same file as an uninterrupted sweep, no row twice).
#include "cli_runner.hpp"
#include "scratch_dir.hpp"
#include "sweep_fixture.hpp"

#include "trainsim/model/input/loader.hpp"
#include "trainsim/model/input/sweep_grid.hpp"
#include "trainsim/sim/run/estimate.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <map>
#include <sstream>

using namespace trainsim;
using Approx = Catch::Detail::Approx;

namespace {

constexpr const char* kGrid = R"(title: tiny
models: [tiny2.config.json, tiny4.config.json]
gpus: [h100-sxm]
counts: [16, 8]
tokens: [1B]
training: {seq_len: 1024, global_batch: 64}
prices:
  - {name: list, basis: gpu_hour, rate: 2.0, currency: USD}
  - {name: half, basis: gpu_hour, rate: 1.0, currency: USD}
)";

} // namespace

TEST_CASE("sweep grid: problems at file, line and key, a cell's at the grid line that wrote its value",
          "[sweep]") {
    auto problems = [](const std::string& text) {
        try {
            (void)model::load_sweep_grid_text(text, "g.yaml");
        } catch (const model::SweepGridError& e) {
            return e.diagnostics();
        }
        return std::vector<model::Diagnostic>{};
    };
    {
        const auto d = problems("models: [llama2-7b]\ngpus: [h100-sxm]\ncounts: [8]\nmodles: [x]\n");
        REQUIRE(d.size() == 1);
        CHECK(d[0].line == 4);
        CHECK(d[0].message.find("did you mean 'models'") != std::string::npos);
    }
    {
        const auto d = problems("models: [llama2-7b, llama2-7b]\ngpus: []\ncounts: [8, 0]\n");
        REQUIRE(d.size() == 3);
        CHECK(d[0].key == "models[1]");
        CHECK(d[0].message.find("twice") != std::string::npos);
        CHECK(d[1].line == 2);
        CHECK(d[2].key == "counts[1]");
    }
    {
        const auto d = problems("models: [llama2-7b]\ngpus: [h100-sxm]\ncounts: [8]\ntraining: {tokens: 1T}\n"
                                "prices:\n  - {name: x, gpu: a800, rate: 1}\n");
        REQUIRE(d.size() == 2);
        CHECK(d[0].line == 4);
        CHECK(d[0].message.find("tokens axis") == std::string::npos); // says where tokens go
        CHECK(d[0].message.find("tokens: [...]") != std::string::npos);
        CHECK(d[1].message.find("'a800' is not one of the grid's gpus") != std::string::npos);
    }
    // A value the scenario loader refuses is reported at the grid's own line and key.
    const auto g = model::load_sweep_grid_text(
        "models: [llama2-7b]\ngpus: [h100-sxm]\ncounts: [8]\nprices:\n  - name: list\n    basis: gpu_hour\n"
        "    rate: cheap\n",
        "g.yaml");
    model::LoadOptions lo;
    lo.data_dir = TRAINSIM_TEST_DATA_DIR;
    try {
        (void)model::sweep_cell_plan(g, model::sweep_cells(g).front(), lo);
        FAIL("a rate of 'cheap' was accepted");
    } catch (const model::SweepGridError& e) {
        REQUIRE(!e.diagnostics().empty());
        const auto& d = e.diagnostics().front();
        CHECK(d.file == "g.yaml");
        CHECK(d.line == 7);
        CHECK(d.key == "prices.list.rate");
        CHECK(d.message.find("llama2-7b|h100-sxm|bf16|20/param|-|-|list") != std::string::npos);
    }
}

TEST_CASE("a text on which yaml-cpp's LoadAll never returns is read (and refused) at once", "[sweep][loader]") {
    // fuzz_sweep_grid's finding: YAML::LoadAll (yaml-cpp 0.7) loops forever on these two lines;
    // parse_yaml loads one document and finds a second one in the text.
    const std::string text = ", basis: gpu_hour, rate:$2.5, currency: USD}\n 0-sxm-80gb, basis: "
                             "\x99\x8f\x8a\xa0\x97\x90\x8a\x89, rate: 1.2, currency: USD}\n";
    CHECK_THROWS_AS(model::load_sweep_grid_text(text, "g.yaml"), model::SweepGridError);
    model::LoadOptions lo;
    lo.data_dir = TRAINSIM_TEST_DATA_DIR;
    CHECK_THROWS_AS(model::load_scenario_text(text, "s.yaml", lo), model::InputError);
}

TEST_CASE("sweep: one row per cell and GPU count, in the grid's order, the bill following the price",
          "[sweep][cli]") {
    test::ScratchDir dir;
    test::write_tiny_models(dir);
    test::write_text(dir.path() / "grid.yaml", kGrid);
    const auto r = test::run_trainsim(fmt::format("sweep {} --json -q", (dir.path() / "grid.yaml").string()));
    REQUIRE(r.rc == 0);
    const auto rows = test::json_lines(r.out);
    // 2 models x 1 GPU x 2 prices = 4 cells, x 2 counts (ascending) = 8 rows.
    REQUIRE(rows.size() == 8);
    const std::vector<std::string> order{"tiny2.config.json|h100-sxm|bf16|1B|-|-|list",
                                         "tiny2.config.json|h100-sxm|bf16|1B|-|-|half",
                                         "tiny4.config.json|h100-sxm|bf16|1B|-|-|list",
                                         "tiny4.config.json|h100-sxm|bf16|1B|-|-|half"};
    for (std::size_t i = 0; i < rows.size(); ++i) {
        INFO(i);
        CHECK(rows[i]["cell"] == order[i / 2]);
        CHECK(rows[i]["num_gpus"] == (i % 2 == 0 ? 8 : 16));
        REQUIRE(rows[i]["status"] == "ok");
        CHECK(rows[i]["tokens"] == 1e9);
    }
    // The same plan at half the hourly rate, billed per second: half the bill (hours x GPUs x rate).
    for (std::size_t i = 0; i < rows.size(); i += 4)
        for (std::size_t k = 0; k < 2; ++k) {
            const auto& list = rows[i + k];
            const auto& half = rows[i + 2 + k];
            CHECK(half["name"] == list["name"]);
            CHECK(half["expected_cost"].get<double>() == Approx(list["expected_cost"].get<double>() / 2).epsilon(1e-6));
            CHECK(list["expected_cost"].get<double>() ==
                  Approx(std::ceil(list["expected_days"].get<double>() * 86400) / 3600 * list["num_gpus"].get<int>() *
                         2.0)
                      .epsilon(1e-6));
        }
}

TEST_CASE("sweep --out: a killed sweep resumed gives the uninterrupted file, and nothing is overwritten unasked",
          "[sweep][cli]") {
    test::ScratchDir dir;
    test::write_tiny_models(dir);
    const auto grid = (dir.path() / "grid.yaml").string();
    test::write_text(grid, kGrid);
    const auto full = (dir.path() / "full.csv").string();
    REQUIRE(test::run_trainsim(fmt::format("sweep {} --out {} -q", grid, full)).rc == 0);
    const std::string text = test::read_text(full);
    // What a kill leaves: the header, the first cell's two rows, and half a row of the next cell.
    std::vector<std::size_t> ends;
    for (std::size_t p = text.find('\n'); p != std::string::npos; p = text.find('\n', p + 1)) ends.push_back(p + 1);
    REQUIRE(ends.size() == 9); // header + 8 rows
    const auto out = (dir.path() / "rows.csv").string();
    test::write_text(out + ".partial", text.substr(0, ends[2] + (ends[3] - ends[2]) / 2));
    // Neither started over nor overwritten without being asked.
    const auto refused = test::run_trainsim(fmt::format("sweep {} --out {} -q", grid, out), true);
    CHECK(refused.rc == 2);
    CHECK(refused.out.find("--resume") != std::string::npos);
    const auto resumed = test::run_trainsim(fmt::format("sweep {} --out {} -q --resume", grid, out), true);
    REQUIRE(resumed.rc == 0);
    CHECK(resumed.out.find("1 of 4 cells done") != std::string::npos);
    CHECK(test::read_text(out) == text);
    CHECK_FALSE(std::filesystem::exists(out + ".partial"));
    CHECK(test::run_trainsim(fmt::format("sweep {} --out {} -q", grid, out)).rc == 2);

    // Rows of another grid are not resumed.
    test::write_text(out + ".partial", text.substr(0, ends[2]));
    test::write_text(grid, std::string(kGrid) + "# edited\n");
    const auto other = test::run_trainsim(fmt::format("sweep {} --out {} -q --resume", grid, out), true);
    CHECK(other.rc == 2);
    CHECK(other.out.find("another grid") != std::string::npos);
    CHECK(test::read_text(out) == text); // the finished file is untouched
}

TEST_CASE("reprice gives the estimate a fresh simulation with the other pricing gives, spot's preemptions included",
          "[sweep][billing]") {
    model::LoadOptions lo;
    lo.data_dir = TRAINSIM_TEST_DATA_DIR;
    const std::string base = "model: llama2-7b\ntraining: {tokens: 10B, seq_len: 4096, global_batch: 256, micro_batch: 1}\n"
                             "parallel: {tp: 1, pp: 1, dp: auto}\nprecision: bf16\n"
                             "cluster: {gpu: h100-sxm, nodes: 1, gpus_per_node: 8}\n";
    auto hourly = model::load_scenario_text(base + "pricing: {basis: gpu_hour, rate: 2.0}\nplans:\n  - name: a\n",
                                            "a.yaml", lo)
                      .plans.front();
    const auto spot = model::load_scenario_text(
                          base + "pricing: {basis: gpu_hour, rate: 2.0, commitment: spot, spot: {rate: 0.9, "
                                 "preemption_rate: 0.01/h, restart_wait: 30 min}}\nplans:\n  - name: a\n",
                          "b.yaml", lo)
                          .plans.front();
    auto e = sim::estimate_plan(hourly);
    const auto fresh = sim::estimate_plan(spot);
    hourly.pricing = spot.pricing;
    sim::reprice(e, hourly);
    CHECK(e.priced);
    CHECK(e.price_per_gpu_hour == Approx(fresh.price_per_gpu_hour));
    CHECK(e.expected_days == Approx(fresh.expected_days).epsilon(1e-12));
    CHECK(e.expected_days > e.days_to_train); // preemptions
    CHECK(e.expected_cost == Approx(fresh.expected_cost).epsilon(1e-12));
    CHECK(e.cost == Approx(fresh.cost).epsilon(1e-12));
    CHECK(e.billing_options.size() == fresh.billing_options.size());
}
