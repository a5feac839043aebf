// libFuzzer target: the validation-set CSV reader (model::load_validation_csv,
// model/src/input/validation_set.cpp), with the shipped profiles as its data dir. Documented error:
// ScenarioError for a malformed file; a well-formed row that cannot be simulated comes back with
// skip_reason set.
#include "fuzz_support.hpp"

#include "trainsim/model/input/validation_set.hpp"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace trainsim;
    static fuzz::InputFile input("validation", ".csv");
    const auto& file = input.write(data, size);
    fuzz::read_or_reject<model::ScenarioError>("load_validation_csv",
                                               [&] { (void)model::load_validation_csv(file, fuzz::data_dir()); });
    return 0;
}
