// The MPI bootstrap of `trainsim-calibrate measure` (calibrate/src/backends/mpi_bootstrap.cpp): two ranks
// started by mpirun meet through MPI (no file rendezvous), the CPU backend's collectives run
// between the processes with MPI, and rank 0 alone writes the samples and run.json. Compiled and
// registered only when CMake found MPI and mpiexec (tests/CMakeLists.txt), so that a build without
// MPI never passes it silently.
#include "test_calibrate_support.hpp"

#include "trainsim/calibrate/measure/measure.hpp"
#include "trainsim/calibrate/samples/sample.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <set>

using namespace trainsim;
using namespace trainsim::calibrate;
using nlohmann::json;

namespace {

const std::string kExe = TRAINSIM_CALIBRATE_EXE;
const std::string kMpirun = TRAINSIM_MPIEXEC;

test::ChildResult mpirun_measure(const std::filesystem::path& out, const std::filesystem::path& scratch,
                                 bool resume) {
    std::vector<std::string> args{"--allow-run-as-root", "--oversubscribe", "-np", "2", kExe, "measure",
                                  "--backend", "cpu", "--plan", "tiny", "--out", out.string(), "--quiet"};
    if (resume) args.emplace_back("--resume");
    return test::run_child(kMpirun, args, scratch);
}

} // namespace

TEST_CASE("measure under mpirun: 2 MPI ranks run the CPU collectives and rank 0 alone writes the samples",
          "[calibrate][mpi]") {
    REQUIRE(std::filesystem::exists(kMpirun));
    test::ScratchDir tmp;
    const auto out = tmp / "run";
    const auto r = mpirun_measure(out, tmp.path(), false);
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    REQUIRE(r.exit_code == 0);

    // Every key once (only rank 0 wrote), and every collective of a 2-rank group measured by MPI.
    const SampleFile file = read_samples(out / kSamplesFile);
    std::set<std::string> keys;
    std::map<std::string, int> collectives;
    int overlap = 0;
    for (const auto& s : file.samples) {
        CHECK(keys.insert(s.desc.key).second);
        CHECK(s.ok());
        if (s.desc.kind == OpKind::collective) {
            CHECK(s.desc.group_size == 2);
            CHECK(s.desc.scope == "intra_node");
            CHECK(s.impl == "mpi-processes");
            ++collectives[s.desc.op];
        }
        if (s.desc.kind == OpKind::overlap) {
            CHECK(s.impl == "eigen-fp32+mpi");
            ++overlap;
        }
    }
    for (const char* op : {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"}) {
        INFO(op);
        CHECK(collectives[op] == 3);  // the tiny plan's three sizes
    }
    CHECK(overlap == 4); // the GEMM alone and under an all-reduce, short and after sustained load

    // run.json records the MPI world; no second run-N.json from rank 1.
    const json run = json::parse(test::read_text(out / "run.json"));
    CHECK(run["ranks"] == 2);
    CHECK(run["provenance"]["bootstrap"] == "mpi");
    CHECK(run["provenance"]["world_size"] == 2);
    CHECK(run["provenance"]["hosts"].size() == 2);
    CHECK_FALSE(std::filesystem::exists(out / "run-2.json"));
    CHECK_FALSE(std::filesystem::exists(out / ".rendezvous"));

    SECTION("--resume under mpirun: rank 0 sends the keys already measured, nothing is measured twice") {
        const auto again = mpirun_measure(out, tmp.path(), true);
        INFO("stderr: " << again.err);
        REQUIRE(again.exit_code == 0);
        CHECK(read_samples(out / kSamplesFile).samples.size() == file.samples.size());
    }
    SECTION("without --resume every rank fails with rank 0's error") {
        const auto again = mpirun_measure(out, tmp.path(), false);
        CHECK(again.exit_code != 0);
        CHECK(again.err.find("already holds samples") != std::string::npos);
    }
}
