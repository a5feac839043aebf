// trainsim sweep --html: the market table (one table row per sweep row, in the rows' order), one
// days-vs-cost chart per model whose ringed points are exactly the rows flagged pareto, read from
// a .jsonl and from a .csv output alike; and the order in which an MPI sweep hands out its
// searches (sweep_schedule.hpp) and how it knows it was launched by MPI (sweep_mpi.hpp).
#include "cli_runner.hpp"
#include "sweep_fixture.hpp"

#include "sweep_mpi.hpp"
#include "trainsim/model/input/loader.hpp"
#include "trainsim/model/input/sweep_grid.hpp"
#include "trainsim/sim/cli/sweep_schedule.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <map>
#include <regex>
#include <set>

using namespace trainsim;
using nlohmann::json;

namespace {

std::set<std::size_t> rows_where(const std::vector<json>& rows, bool (*pred)(const json&)) {
    std::set<std::size_t> out;
    for (std::size_t i = 0; i < rows.size(); ++i)
        if (pred(rows[i])) out.insert(i);
    return out;
}

std::vector<std::string> all_matches(const std::string& text, const std::string& pattern) {
    std::vector<std::string> out;
    const std::regex re(pattern);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it)
        out.push_back((*it)[1].str());
    return out;
}

std::set<std::size_t> as_indices(const std::vector<std::string>& v) {
    std::set<std::size_t> out;
    for (const auto& s : v) out.insert(static_cast<std::size_t>(std::stoul(s)));
    return out;
}

// What the page shows of `rows` (read from the output file the page was made with).
void check_page(const std::string& page, const std::vector<json>& rows) {
    // One table row per sweep row, in order.
    const auto table_rows = all_matches(page, "<tr data-row=\"([0-9]+)\"");
    REQUIRE(table_rows.size() == rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) CHECK(table_rows[i] == std::to_string(i));
    // One frontier per model, in the rows' order.
    const auto sections = all_matches(page, "<section class=\"frontier\" data-model=\"([^\"]*)\"");
    CHECK(sections == std::vector<std::string>{"tiny2.config.json", "tiny4.config.json"});
    // The ringed points are exactly the rows flagged pareto; every row with a plan and a cost is a point.
    const auto front = as_indices(all_matches(page, "<circle class=\"pt front\" data-row=\"([0-9]+)\""));
    const auto others = as_indices(all_matches(page, "<circle class=\"pt\" data-row=\"([0-9]+)\""));
    const auto flagged = rows_where(rows, [](const json& r) { return r.value("pareto", false); });
    CHECK(front == flagged);
    CHECK_FALSE(flagged.empty());
    std::set<std::size_t> points = front;
    points.insert(others.begin(), others.end());
    CHECK(points == rows_where(rows, [](const json& r) {
              return r.value("status", "") == "ok" && r.contains("expected_cost") && r["expected_cost"].is_number();
          }));
    CHECK(points.size() == rows.size()); // every cell of this grid has a plan and a price
    // Each cell with two or more points on its front has them joined.
    std::map<std::string, int> front_per_cell;
    for (std::size_t i : flagged) ++front_per_cell[rows[i]["cell"].get<std::string>()];
    std::set<std::string> joined;
    for (const auto& [cell, n] : front_per_cell)
        if (n >= 2) joined.insert(cell);
    const auto lines = all_matches(page, "<polyline class=\"front\" data-cell=\"([^\"]*)\"");
    CHECK(std::set<std::string>(lines.begin(), lines.end()) == joined);
    CHECK(lines.size() == joined.size());
    // Self-contained: nothing fetched, no script to run.
    CHECK(page.find("://") == std::string::npos);
    CHECK(page.find(" src=") == std::string::npos);
    CHECK(page.find("<script>") == std::string::npos);
}

} // namespace

TEST_CASE("sweep --html: a table row per sweep row and per model a frontier whose ringed points are the pareto rows",
          "[sweep-html][sweep][cli]") {
    test::ScratchDir dir;
    test::write_tiny_models(dir);
    const auto grid = (dir.path() / "grid.yaml").string();
    test::write_text(grid, test::kTinyMarketGrid);

    const auto jsonl = (dir.path() / "rows.jsonl").string(), page = (dir.path() / "market.html").string();
    const auto r = test::run_trainsim(fmt::format("sweep {} --out {} --html {} -q", grid, jsonl, page), true);
    INFO(r.out);
    REQUIRE(r.rc == 0);
    const auto rows = test::json_lines(test::read_text(jsonl));
    REQUIRE(rows.size() == 16); // 8 cells x 2 counts
    const std::string html = test::read_text(page);
    check_page(html, rows);
    // The rows are embedded as they are in the file.
    const std::string open = "<script type=\"application/json\" id=\"trainsim-sweep\">\n";
    const auto from = html.find(open);
    REQUIRE(from != std::string::npos);
    const auto to = html.find("\n</script>", from);
    REQUIRE(to != std::string::npos);
    CHECK(json::parse(html.substr(from + open.size(), to - from - open.size())) == json(rows));

    {
        // From a CSV output, read back by column type: the same table and the same front.
        const auto csv = (dir.path() / "rows.csv").string(), page2 = (dir.path() / "market2.html").string();
        REQUIRE(test::run_trainsim(fmt::format("sweep {} --out {} --html {} -q -j 3", grid, csv, page2)).rc == 0);
        check_page(test::read_text(page2), rows);
        // Searches one at a time on 2 threads write the same file as 3 at once on 1 thread each;
        // --html - prints the page on standard output.
        const auto serial = (dir.path() / "serial.csv").string();
        const auto out = test::run_trainsim(fmt::format("sweep {} --out {} -q -j 1 --threads 2 --html -", grid, serial));
        REQUIRE(out.rc == 0);
        CHECK(test::read_text(serial) == test::read_text(csv));
        check_page(out.out, rows);
    }
    {
        // A page that cannot be written is refused before any search.
        const auto bad = test::run_trainsim(fmt::format("sweep {} --html {} -q", grid, dir.path().string()), true);
        CHECK(bad.rc == 2);
        CHECK(bad.out.find("--html") != std::string::npos);
        const auto missing = test::run_trainsim(
            fmt::format("sweep {} --html {} -q", grid, (dir.path() / "no-such-folder" / "p.html").string()), true);
        CHECK(missing.rc == 2);
        CHECK(missing.out.find("does not exist") != std::string::npos);
    }
}

TEST_CASE("sweep queue: the costliest task near the first unwritten one goes first, and no rank idles while work is left",
          "[sweep]") {
    // Costs as given; window 2: candidates are the tasks not yet handed out in [first unwritten,
    // first unwritten + 2), else the earliest task not yet handed out.
    sim::cli::SweepQueue q({1, 5, 2, 9, 3, 3}, 2);
    CHECK(q.next(0) == std::optional<std::size_t>(1)); // 5 > 1
    CHECK(q.next(0) == std::optional<std::size_t>(0));
    CHECK(q.next(0) == std::optional<std::size_t>(2)); // window [0, 2) handed out: the earliest left
    CHECK(q.next(2) == std::optional<std::size_t>(3)); // 9 > 2 in [2, 4)
    CHECK(q.next(4) == std::optional<std::size_t>(4)); // equal costs: the earlier
    CHECK_FALSE(q.empty());
    CHECK(q.next(4) == std::optional<std::size_t>(5));
    CHECK(q.empty());
    CHECK_FALSE(q.next(6).has_value());
    CHECK_THROWS_AS(sim::cli::SweepQueue({1.0}, 0), std::invalid_argument);

    // The estimate: layers x sum of sqrt(count), e.g. 2 x (sqrt(4) + sqrt(16)) = 12; it orders
    // issue #43's two timings (405B, 126 layers, over 1,024..16,384 GPUs: 66 s; 70B, 80 layers,
    // over 8..1,024: 6 s) as they were measured.
    CHECK(sim::cli::sweep_search_cost(2, {4, 16}) == Approx(12.0));
    CHECK(sim::cli::sweep_search_cost(126, {1024, 2048, 4096, 8192, 16384}) >
          sim::cli::sweep_search_cost(80, {8, 16, 32, 64, 128, 256, 512, 1024}));
}

TEST_CASE("sweep under a launcher: Open MPI, MPICH and PMIx launches are recognised, a Slurm batch step alone is not",
          "[sweep]") {
    using Env = std::map<std::string, std::string>;
    auto check = [](const Env& vars, bool launched, int size) {
        const auto env = [&](const char* k) -> const char* {
            const auto it = vars.find(k);
            return it == vars.end() ? nullptr : it->second.c_str();
        };
        CHECK(sim::cli::launched_by_mpi(env) == launched);
        CHECK(sim::cli::launcher_world_size(env) == size);
    };
    check({}, false, 1);
    check({{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "1"}}, true, 4);
    check({{"PMI_SIZE", "3"}, {"PMI_RANK", "0"}}, true, 3);
    check({{"PMIX_RANK", "0"}}, true, 1); // a PMIx launch states its size only through MPI
    check({{"SLURM_NTASKS", "4"}, {"SLURM_PROCID", "0"}}, false, 1);
    check({{"OMPI_COMM_WORLD_SIZE", "many"}}, true, 1);
}

TEST_CASE("the shipped example grid builds every cell's plan (what a sweep checks before its first search)",
          "[sweep][data]") {
    const auto grid = model::load_sweep_grid(std::string(TRAINSIM_TEST_DATA_DIR) + "/sweeps/market-7b-13b.yaml");
    model::LoadOptions lo;
    lo.data_dir = TRAINSIM_TEST_DATA_DIR;
    const auto cells = model::sweep_cells(grid);
    // 2 models x 2 token counts x (H100: list; A100: list and its own deal) = 12 cells.
    REQUIRE(cells.size() == 12);
    for (const auto& c : cells) {
        INFO(model::sweep_cell_key(grid, c));
        CHECK_NOTHROW(model::sweep_cell_plan(grid, c, lo));
    }
}
