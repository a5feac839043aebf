// libFuzzer target: the calibration samples.jsonl readers (calibrate/src/samples/sample.cpp):
// read_samples (strict, for fit) and completed_keys (for --resume, without repair: the input file
// is never truncated). Documented error: SampleError for both. Every sample read_samples accepts
// must survive to_json_line and sample_from_json_text to the same line.
#include "fuzz_support.hpp"

#include "trainsim/calibrate/core/calibrate_error.hpp"
#include "trainsim/calibrate/samples/sample.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace trainsim;
    static fuzz::InputFile input("samples", ".jsonl");
    const auto& file = input.write(data, size);
    fuzz::read_or_reject<calibrate::SampleError>("completed_keys", [&] { (void)calibrate::completed_keys(file, false); });

    calibrate::SampleFile samples;
    if (!fuzz::read_or_reject<calibrate::SampleError>("read_samples", [&] { samples = calibrate::read_samples(file); }))
        return 0;
    for (const calibrate::Sample& s : samples.samples) {
        std::string line, again;
        fuzz::read_or_reject<fuzz::NeverExpected>("to_json_line / sample_from_json_text", [&] {
            line = calibrate::to_json_line(s);
            again = calibrate::to_json_line(calibrate::sample_from_json_text(line));
        });
        if (line != again) fuzz::finding("to_json_line(sample_from_json_text(line)) != line for " + line);
    }
    return 0;
}
