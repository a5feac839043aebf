// Issue #43 item 3: the plan search's enumeration over several GPU counts side by side is the serial
// one; and the leftovers: `sweep --resume` on an output that is already a complete sweep says so
// and exits 0 without searching again or rewriting the file; one that is not complete (and has no
// partial file beside it) is an error that leaves it untouched.
#include "cli_runner.hpp"
#include "fixtures.hpp"
#include "scratch_dir.hpp"
#include "sweep_fixture.hpp"

#include "trainsim/sim/search/plan_search.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

using namespace trainsim;

namespace {

// 2 models x 1 GPU x 1 price = 2 cells, 2 GPU counts each: 4 rows.
constexpr const char* kTinyGrid = R"(title: tiny
models: [tiny2.config.json, tiny4.config.json]
gpus: [h100-sxm]
counts: [16, 8]
tokens: [1B]
training: {seq_len: 1024, global_batch: 64}
prices:
  - {name: list, basis: gpu_hour, rate: 2.0, currency: USD}
)";

} // namespace

TEST_CASE("sweep --resume on a complete output: exit 0, nothing searched or rewritten, the page still made",
          "[search-exact][sweep][cli]") {
    test::ScratchDir dir;
    test::write_tiny_models(dir);
    const auto grid = (dir.path() / "grid.yaml").string();
    test::write_text(grid, kTinyGrid);
    for (const char* ext : {"csv", "jsonl"}) {
        const auto out = (dir.path() / fmt::format("rows.{}", ext)).string();
        REQUIRE(test::run_trainsim(fmt::format("sweep {} --out {} -q", grid, out)).rc == 0);
        const std::string text = test::read_text(out);
        // A time well before now: a rewrite of the file would move it.
        const auto old_time = std::filesystem::file_time_type::clock::now() - std::chrono::hours(24);
        std::filesystem::last_write_time(out, old_time);

        const auto html = (dir.path() / fmt::format("page-{}.html", ext)).string();
        const auto again = test::run_trainsim(fmt::format("sweep {} --out {} -q --resume --html {}", grid, out, html), true);
        CHECK(again.rc == 0);
        CHECK(test::read_text(out) == text);
        CHECK(std::filesystem::last_write_time(out) == old_time);  // not rewritten
        CHECK_FALSE(std::filesystem::exists(out + ".partial"));
        // The page is made from the file's rows: every model of the grid appears in it.
        const std::string page = test::read_text(html);
        CHECK(page.find("tiny2") != std::string::npos);
        CHECK(page.find("tiny4") != std::string::npos);
        // Its rows as compact JSON: one line between the tags, the file's rows.
        const std::string open = "<script type=\"application/json\" id=\"trainsim-sweep\">\n";
        const auto from = page.find(open);
        REQUIRE(from != std::string::npos);
        const auto to = page.find("\n</script>", from);
        REQUIRE(to != std::string::npos);
        const std::string block = page.substr(from + open.size(), to - from - open.size());
        CHECK(block.find('\n') == std::string::npos);
        const auto rows = nlohmann::json::parse(block);
        REQUIRE(rows.is_array());
        CHECK(rows.size() == 4);  // 2 cells x 2 GPU counts

        // The same file without its last row (no partial file beside it): not a complete sweep of
        // this grid, exit 2 naming --resume, the file left as it was.
        const auto cut_at = text.rfind('\n', text.size() - 2) + 1;
        test::write_text(out, text.substr(0, cut_at));
        const auto cut = test::run_trainsim(fmt::format("sweep {} --out {} -q --resume", grid, out), true);
        CHECK(cut.rc == 2);
        CHECK(cut.out.find("--resume") != std::string::npos);
        CHECK(test::read_text(out) == text.substr(0, cut_at));
        CHECK_FALSE(std::filesystem::exists(out + ".partial"));
    }
}

TEST_CASE("enumerate_layouts over several GPU counts is each count's own enumeration, concatenated in the counts' order",
          "[search-exact][plan-search]") {
    // The counts are enumerated side by side (issue #43); the list, and with it every tie-break by
    // enumeration index, must be the one a loop over the counts gives.
    const auto base = test::small_plan(1, 1, 8, 32);
    sim::SearchSpace space;
    space.gpu_counts = {8, 2, 4, 1};
    space.pp_schedules = {model::PpSchedule::one_f_one_b, model::PpSchedule::interleaved, model::PpSchedule::zb_h1,
                          model::PpSchedule::zb_v, model::PpSchedule::dualpipe_v};
    const auto all = sim::enumerate_layouts(base, space);
    std::vector<std::string> expected;
    for (int g : space.gpu_counts) {
        sim::SearchSpace one = space;
        one.gpu_counts = {g};
        const auto part = sim::enumerate_layouts(base, one);
        REQUIRE(!part.empty());
        for (const auto& p : part) {
            CHECK(p.num_gpus() == g);
            expected.push_back(p.name);
        }
    }
    REQUIRE(all.size() == expected.size());
    for (std::size_t i = 0; i < all.size(); ++i) CHECK(all[i].name == expected[i]);
    // The first count that is not whole nodes is the error, as before.
    space.gpu_counts = {8, 12, 20};
    std::string message;
    try {
        (void)sim::enumerate_layouts(base, space);
    } catch (const sim::SearchError& e) {
        REQUIRE(e.diagnostics().size() == 1);
        message = e.diagnostics().front().message;
    }
    CHECK(message.find("12 GPUs do not fill whole nodes") != std::string::npos);
}
