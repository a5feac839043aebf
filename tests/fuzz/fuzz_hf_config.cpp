// libFuzzer target: the Hugging Face config.json reader (model::load_hf_config,
// model/src/input/hf_config.cpp). Documented error: ScenarioError.
#include "fuzz_support.hpp"

#include "trainsim/model/input/loader.hpp"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace trainsim;
    static fuzz::InputFile input("hf-config", ".config.json");
    const auto& file = input.write(data, size);
    fuzz::read_or_reject<model::ScenarioError>("load_hf_config", [&] { (void)model::load_hf_config(file); });
    return 0;
}
