// libFuzzer target: the scenario loader (model::load_scenario_text, the in-memory twin of
// load_scenario). The text is named as if it lay in scenarios/examples/, so that relative
// hf_config / profile paths and preset ids resolve against the shipped data as in the seeds.
// Documented errors: ScenarioError and ProfileError (both model::InputError).
#include "fuzz_support.hpp"

#include "trainsim/model/input/loader.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace trainsim;
    static const model::LoadOptions opts{fuzz::data_dir(), std::nullopt};
    static const std::string name = (fuzz::data_dir() / "examples" / "fuzz-input.yaml").string();
    const std::string text(reinterpret_cast<const char*>(data), size);
    fuzz::read_or_reject<model::InputError>("load_scenario_text",
                                            [&] { (void)model::load_scenario_text(text, name, opts); });
    return 0;
}
