// libFuzzer target: the hardware profile reader (model::load_profile, model/src/input/profile_reader.cpp).
// Documented error: ProfileError. A profile that loads must also survive write_profile and load
// again to the same text: the writer's output is a profile the reader accepts (fit writes
// profiles with it).
#include "fuzz_support.hpp"

#include "trainsim/model/input/loader.hpp"

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace {
std::string slurp(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace trainsim;
    static fuzz::InputFile input("profile", ".yaml");
    static fuzz::InputFile written("profile-written", ".yaml");
    static fuzz::InputFile rewritten("profile-rewritten", ".yaml");
    const auto& file = input.write(data, size);
    model::HardwareProfile profile;
    if (!fuzz::read_or_reject<model::ProfileError>("load_profile", [&] { profile = model::load_profile(file); }))
        return 0;

    // Round trip: what write_profile wrote must load, and writing that again changes nothing.
    fuzz::read_or_reject<fuzz::NeverExpected>("write_profile", [&] { model::write_profile(profile, written.path(), true); });
    model::HardwareProfile again;
    fuzz::read_or_reject<fuzz::NeverExpected>("load_profile(write_profile(p))",
                                              [&] { again = model::load_profile(written.path()); });
    fuzz::read_or_reject<fuzz::NeverExpected>("write_profile (second)",
                                              [&] { model::write_profile(again, rewritten.path(), true); });
    if (slurp(written.path()) != slurp(rewritten.path()))
        fuzz::finding("write_profile(load_profile(write_profile(p))) differs from write_profile(p)");
    return 0;
}
