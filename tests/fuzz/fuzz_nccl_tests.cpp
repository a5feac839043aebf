// libFuzzer target: the importers' text parsers (calibrate/src/import/): parse_nccl_tests_log
// (nccl-tests text logs) and parse_gemm_csv (GEMM sweeps), which take text, not a path. They
// report bad input as problems and never throw: every exception is a finding. What they accept
// must be samples fit accepts: a key that matches the fields, a positive finite time, and a line
// that survives to_json_line / sample_from_json_text; and a file with a problem yields no sample.
#include "fuzz_support.hpp"

#include "trainsim/calibrate/import/import.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace {

using namespace trainsim;

void check_samples(const std::vector<calibrate::Sample>& samples, bool has_problems, const char* reader) {
    if (has_problems && !samples.empty()) fuzz::finding(std::string(reader) + ": samples despite problems");
    for (const calibrate::Sample& s : samples) {
        if (s.desc.key != calibrate::make_key(s.desc)) fuzz::finding(std::string(reader) + ": key " + s.desc.key);
        if (!(s.time.median > 0) || !std::isfinite(s.time.median) || s.time.min > s.time.median ||
            s.time.median > s.time.max)
            fuzz::finding(std::string(reader) + ": impossible time for " + s.desc.key);
        std::string line, again;
        fuzz::read_or_reject<fuzz::NeverExpected>("to_json_line / sample_from_json_text", [&] {
            line = calibrate::to_json_line(s);
            again = calibrate::to_json_line(calibrate::sample_from_json_text(line));
        });
        if (line != again) fuzz::finding("to_json_line(sample_from_json_text(line)) != line for " + line);
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    // As the command line runs it: op and group from the log, and with every override.
    calibrate::NcclTestsOptions none, given;
    given.op = "all_reduce";
    given.group_size = 8;
    given.nodes = 2;
    for (const auto* opts : {&none, &given}) {
        calibrate::NcclTestsLog log;
        fuzz::read_or_reject<fuzz::NeverExpected>("parse_nccl_tests_log", [&] {
            log = calibrate::parse_nccl_tests_log(text, "fuzz-allreduce.txt", *opts);
        });
        check_samples(log.samples, !log.problems.empty(), "parse_nccl_tests_log");
        if (log.samples.size() != log.rows.size()) fuzz::finding("parse_nccl_tests_log: rows and samples differ");
        fuzz::read_or_reject<fuzz::NeverExpected>("summary", [&] {
            (void)calibrate::format_summary(log);
            (void)calibrate::to_json(log).dump();
        });
    }
    calibrate::GemmCsv csv;
    fuzz::read_or_reject<fuzz::NeverExpected>("parse_gemm_csv",
                                              [&] { csv = calibrate::parse_gemm_csv(text, "fuzz.csv"); });
    check_samples(csv.samples, !csv.problems.empty(), "parse_gemm_csv");
    return 0;
}
