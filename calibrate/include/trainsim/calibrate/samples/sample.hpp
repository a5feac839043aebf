// Samples: one JSON object per line in DIR/samples.jsonl, appended as each descriptor is measured
// (docs/calibration.md "Sample format"). A line is written with one write() and flushed to disk
// (fdatasync) before the next descriptor starts, so a run killed at any moment loses at most the
// line being written; `--resume` drops such a torn last line and measures it again.
#pragma once

#include "trainsim/calibrate/core/descriptor.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace trainsim::calibrate {

inline constexpr int kSampleSchema = 1;

// Per-call seconds over the timed samples (each sample: calls_per_sample calls / that count).
struct TimeStats {
    double median = 0, min = 0, max = 0, mean = 0, p10 = 0, p90 = 0, stddev = 0;
    int iters = 0;
    int calls_per_sample = 1;
    // (p90 - p10) / median: the run-to-run spread, dimensionless.
    [[nodiscard]] double spread() const { return median > 0 ? (p90 - p10) / median : 0.0; }
};
// Statistics of per-call times (seconds). Precondition: not empty.
[[nodiscard]] TimeStats summarize(std::vector<double> per_call_seconds, int calls_per_sample);

// Device conditions when the sample was taken (GPU through NVML; empty on the CPU backend).
struct SampleTelemetry {
    std::optional<int> sm_clock_mhz;
    std::optional<int> mem_clock_mhz;
    std::optional<int> temperature_c;
    std::optional<double> power_w;
    std::optional<std::uint64_t> throttle_reasons;
};

struct Sample {
    Descriptor desc;            // what was measured (key included)
    std::string status = "ok";  // ok | unsupported
    std::string reason;         // why unsupported
    std::string backend;        // cpu | cuda
    std::string impl;           // what ran: "cublaslt", "unfused-cublaslt", "eigen", "nccl", "threads", ...
    int algo_index = -1;        // GEMMs: the algorithm timed among the heuristic's answers
    int algo_count = 0;
    TimeStats time;             // seconds per call
    SampleTelemetry telemetry;
    std::string measured_at;    // UTC, ISO 8601

    [[nodiscard]] bool ok() const { return status == "ok"; }
    // Rates from the median time (recomputed on read; the file's copies are for people).
    // FLOPs the kernels executed: the descriptor's count, except that an unfused attention
    // ("unfused-*": batched GEMMs around a softmax) computes the whole s x s score matrix even when
    // causal, twice the causal count (issue #17).
    [[nodiscard]] double executed_flops() const;
    [[nodiscard]] double flop_rate() const;      // executed FLOP/s
    [[nodiscard]] double bandwidth() const;      // bytes moved / s (memory kernels)
    [[nodiscard]] double algbw() const;          // collectives: bytes / s
    [[nodiscard]] double busbw() const;          // collectives: algbw x bus factor
};

// One JSON line (no newline) and its inverse. sample_from_json_text throws std::runtime_error
// with the reason (missing field, wrong type, ...); read_samples adds file and line.
[[nodiscard]] std::string to_json_line(const Sample& s);
[[nodiscard]] Sample sample_from_json_text(const std::string& line);

// Appends samples to a file, one durable line each. Opens with O_APPEND so that a resumed run
// continues the same file.
class SampleWriter {
public:
    explicit SampleWriter(const std::filesystem::path& file);
    ~SampleWriter();
    SampleWriter(const SampleWriter&) = delete;
    SampleWriter& operator=(const SampleWriter&) = delete;
    void append(const Sample& s);

private:
    std::filesystem::path file_;
    int fd_ = -1;
};

// A samples file read strictly (for fit): every line must be a complete, valid sample.
struct SampleFile {
    std::filesystem::path path;
    std::vector<Sample> samples;
    std::vector<int> lines;  // 1-based line of each sample
};
// Throws SampleError naming every bad line and why: an empty file, a truncated last line (no end
// of line or cut JSON), malformed JSON, missing fields, a non-positive / non-finite / inconsistent
// time, a key seen twice.
[[nodiscard]] SampleFile read_samples(const std::filesystem::path& file);

// For --resume: the keys of the complete lines of `file` (missing file: none). A torn last line
// (no end of line) is not counted; with repair, the file is truncated to its last complete line
// so the appended samples start on a fresh line. Lines that do not parse before the end are
// errors (SampleError): the file is not ours to fix.
// `torn`, when given, says where the torn last line was (its 1-based line number and its bytes;
// line 0 when there was none), so that the caller can say what it dropped.
struct TornLine {
    int line = 0;
    std::size_t bytes = 0;
};
[[nodiscard]] std::set<std::string> completed_keys(const std::filesystem::path& file, bool repair,
                                                   TornLine* torn = nullptr);

} // namespace trainsim::calibrate
