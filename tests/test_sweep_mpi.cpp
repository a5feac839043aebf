// `trainsim sweep` under mpirun (sim/src/cli/sweep_mpi.hpp): 2 ranks write the file one process
// writes, byte for byte, and a killed sweep's partial file is resumed by the ranks as by one
// process. Compiled and registered only when CMake found MPI and mpiexec (tests/CMakeLists.txt);
// the test names say "mpirun" so that scripts/sanitize runs them without leak detection (Open
// MPI's own leaks at exit).
#include "cli_runner.hpp"
#include "sweep_fixture.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <sys/wait.h>

using namespace trainsim;

namespace {

// Runs `trainsim args` under `mpirun -n ranks` (as root here: --allow-run-as-root; 2 ranks on a
// smaller machine: --oversubscribe), standard error after standard output.
test::CliRun mpirun_trainsim(int ranks, const std::string& args) {
    const std::string cmd = fmt::format("'{}' --allow-run-as-root --oversubscribe -n {} '{}' {} --data-dir '{}' 2>&1",
                                        TRAINSIM_MPIEXEC, ranks, TRAINSIM_EXE, args, TRAINSIM_TEST_DATA_DIR);
    return test::run_command(cmd);
}

// The byte length of the first `lines` lines of `text`.
std::size_t prefix_lines(const std::string& text, std::size_t lines) {
    std::size_t pos = 0;
    for (std::size_t i = 0; i < lines; ++i) pos = text.find('\n', pos) + 1;
    return pos;
}

} // namespace

TEST_CASE("sweep under mpirun: 2 ranks write the single process's rows byte for byte, and resume its partial file",
          "[sweep][mpi]") {
    REQUIRE(std::filesystem::exists(TRAINSIM_MPIEXEC));
    test::ScratchDir dir;
    test::write_tiny_models(dir);
    const auto grid = (dir.path() / "grid.yaml").string();
    test::write_text(grid, test::kTinyMarketGrid);

    // The single process's file, then the 2 ranks' (8 cells in 4 searches over 2 ranks).
    const auto one = (dir.path() / "one.csv").string(), two = (dir.path() / "two.csv").string();
    REQUIRE(test::run_trainsim(fmt::format("sweep {} --out {} -q", grid, one)).rc == 0);
    const std::string single = test::read_text(one);
    REQUIRE(std::count(single.begin(), single.end(), '\n') == 17); // header + 16 rows
    const auto r = mpirun_trainsim(2, fmt::format("sweep {} --out {} -q", grid, two));
    INFO(r.out);
    REQUIRE(r.rc == 0);
    CHECK(r.out.find("over 2 MPI ranks") != std::string::npos);
    CHECK(test::read_text(two) == single);
    CHECK_FALSE(std::filesystem::exists(two + ".partial"));

    // Killed after 3 of its 8 cells (header + 6 rows) and half a row of the 4th: 2 ranks resume it
    // into the file one process writes in one go.
    const auto three = (dir.path() / "three.csv").string();
    const std::size_t cut = prefix_lines(single, 7);
    test::write_text(three + ".partial", single.substr(0, cut + (prefix_lines(single, 8) - cut) / 2));
    const auto resumed = mpirun_trainsim(2, fmt::format("sweep {} --out {} -q --resume", grid, three));
    INFO(resumed.out);
    REQUIRE(resumed.rc == 0);
    CHECK(resumed.out.find("3 of 8 cells done") != std::string::npos);
    CHECK(test::read_text(three) == single);

    // A bad grid: rank 0 says why, once, and every rank stops (mpirun exits non-zero).
    test::write_text(grid, std::string(test::kTinyMarketGrid) + "modles: [x]\n");
    const auto bad = mpirun_trainsim(2, fmt::format("sweep {} --out {} -q", grid, (dir.path() / "bad.csv").string()));
    CHECK(bad.rc != 0);
    const auto first = bad.out.find("did you mean 'models'");
    CHECK(first != std::string::npos);
    CHECK(bad.out.find("did you mean 'models'", first + 1) == std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dir.path() / "bad.csv.partial"));
}
