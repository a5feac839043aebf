// A scenario's plans simulated as `simulate` and `report` write them: each plan's passes recorded
// (the HTML timeline) and its 80% band from the test data's error model (tests/data/trust).
#pragma once

#include "trainsim/model/core/file_io.hpp"
#include "trainsim/model/input/loader.hpp"
#include "trainsim/sim/report/report.hpp"
#include "trainsim/sim/run/estimate.hpp"
#include "trainsim/sim/trust/trust.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace trainsim::test {

struct BandedRun {
    model::Scenario scenario;
    std::vector<sim::PlanResult> results;  // point into scenario.plans
};

// `text`: a scenario's YAML; `file`: the name its diagnostics give it.
inline BandedRun simulate_with_bands(const char* text, const std::string& file) {
    BandedRun x;
    model::LoadOptions opts;
    opts.data_dir = TRAINSIM_TEST_DATA_DIR;
    x.scenario = model::load_scenario_text(text, file, opts);
    const auto em = sim::error_model_from_json(
        nlohmann::json::parse(model::read_regular_file(std::string(TRAINSIM_TEST_DATA_DIR) + "/trust/error-model.json",
                                                       model::kMaxInputBytes)),
        "error-model.json");
    sim::ExecOptions exec;
    exec.record_passes = true;
    for (const auto& p : x.scenario.plans) {
        auto e = sim::estimate_plan(p, exec);
        if (e.fits && e.step) e.band = sim::band_for(em, p, &*e.step);
        x.results.push_back({&p, std::move(e)});
    }
    return x;
}

} // namespace trainsim::test
