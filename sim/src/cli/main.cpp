// trainsim: the command-line front end. The only place that turns exceptions into messages and
// exit codes: 0 ok, 1 internal error, 2 bad input, 3 a plan does not fit in memory, 4 (`plan`) no plan
// meets the deadline and the budget. A result that did not reach standard output (a full disk,
// /dev/full, a closed descriptor) is an error too (2, said on standard error): a cut JSON must
// not pass for a whole one.
#include "trainsim/model/core/errors.hpp"
#include "trainsim/model/core/file_io.hpp"
#include "trainsim/model/input/loader.hpp"
#include "trainsim/model/workload/workload.hpp"
#include "trainsim/sim/cli/cli.hpp"
#include "trainsim/sim/engine/heap_policy.hpp"
#include "trainsim/sim/step/executor.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdlib>
#include <exception>
#include <iostream>

namespace {

int run(int argc, char** argv) {
    try {
        return trainsim::sim::run_cli(argc, argv);
    } catch (const trainsim::model::InputError& e) {
        std::cerr << "trainsim: " << e.what() << "\n";
        return trainsim::sim::kExitBadInput;
    } catch (const trainsim::sim::SimulationStuck& e) {
        std::cerr << "trainsim: internal error: " << e.what() << "\n";
        return trainsim::sim::kExitInternal;
    } catch (const std::exception& e) {
        std::cerr << "trainsim: internal error: " << e.what() << "\n";
        return trainsim::sim::kExitInternal;
    }
}

} // namespace

int main(int argc, char** argv) {
    trainsim::model::guard_standard_descriptors();
    trainsim::sim::keep_freed_memory();
    const int rc = run(argc, argv);
    if (std::string why; !trainsim::model::standard_streams_ok(why)) {
        std::cerr << "trainsim: " << why << "\n" << std::flush;
        return rc != trainsim::sim::kExitOk ? rc : trainsim::sim::kExitBadInput;
    }
    return rc;
}
