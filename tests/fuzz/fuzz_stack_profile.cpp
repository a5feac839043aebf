// libFuzzer target: the stack-profile reader (model::load_stack_profile, model/src/input/stack_io.cpp).
// Documented error: StackProfileError. A stack profile that loads must survive
// render_stack_profile and load again to the same text (fit-stack writes profiles with it), and
// apply_stack must accept its factors (every one read within its bounds).
#include "fuzz_support.hpp"

#include "trainsim/model/input/loader.hpp"
#include "trainsim/model/input/stack_io.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace trainsim;
    static fuzz::InputFile input("stack", ".yaml");
    const auto& file = input.write(data, size);
    model::StackProfile stack;
    if (!fuzz::read_or_reject<model::StackProfileError>("load_stack_profile",
                                                        [&] { stack = model::load_stack_profile(file); }))
        return 0;
    std::string text, again;
    fuzz::read_or_reject<fuzz::NeverExpected>("render_stack_profile", [&] { text = model::render_stack_profile(stack); });
    model::StackProfile back;
    fuzz::read_or_reject<fuzz::NeverExpected>("load_stack_profile_text(render(p))",
                                              [&] { back = model::load_stack_profile_text(text, "rendered"); });
    fuzz::read_or_reject<fuzz::NeverExpected>("render_stack_profile (second)",
                                              [&] { again = model::render_stack_profile(back); });
    if (text != again) fuzz::finding("render(load(render(p))) differs from render(p)");
    fuzz::read_or_reject<fuzz::NeverExpected>("apply_stack",
                                              [&] { (void)model::apply_stack(model::HardwareProfile{}, back); });
    return 0;
}
