// Loading the benchmark scenarios of bench/ (shared by the benchmark programs).
#pragma once

#include "trainsim/model/input/loader.hpp"

#include <cstdlib>
#include <string>

namespace trainsim::bench {

// The first plan of bench/<file>, with presets and profiles from $TRAINSIM_DATA_DIR or the
// shipped scenarios/.
inline model::Plan load_bench_plan(const char* file) {
    model::LoadOptions opts;
    const char* env = std::getenv("TRAINSIM_DATA_DIR");
    opts.data_dir = env != nullptr ? env : TRAINSIM_DATA_DIR_DEFAULT;
    return model::load_scenario(std::string(TRAINSIM_BENCH_DIR) + "/" + file, opts).plans.front();
}

} // namespace trainsim::bench
