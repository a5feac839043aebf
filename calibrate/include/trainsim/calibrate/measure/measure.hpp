// `trainsim-calibrate measure`: walks a plan on a backend and appends one sample per descriptor
// to DIR/samples.jsonl, recording provenance in DIR/run.json (or run-2.json, run-3.json, ... for
// later sessions of the same directory: an existing file is never overwritten).
#pragma once

#include "trainsim/calibrate/core/descriptor.hpp"
#include "trainsim/calibrate/measure/backend.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace trainsim::calibrate {

inline constexpr const char* kSamplesFile = "samples.jsonl";

// What a run directory holds before measuring.
struct RunDir {
    std::filesystem::path dir;
    std::filesystem::path samples;     // DIR/samples.jsonl
    std::set<std::string> done;        // keys already measured (resume)
    // What --resume dropped: a torn last line left by a run that stopped mid-write, as a message
    // naming the file and line ("" when there was none, or when this rank does not repair).
    std::string dropped;
    std::optional<nlohmann::json> first_run;  // DIR/run.json when present
    // The writer's exclusive lock on DIR (DIR/.lock, flock), held while this RunDir (or a copy)
    // lives; empty for the ranks that only read.
    std::shared_ptr<const int> lock;
};

// The exclusive lock of a run directory, taken by every writer (measure, import): flock on
// DIR/.lock, released by the kernel when the process ends (also when it is killed, so a crash
// never leaves the folder locked), with the holder's pid, host, start time and `who` written in
// the file. A second writer is refused (CalibrationInputError) naming the holder.
[[nodiscard]] std::shared_ptr<const int> lock_run_dir(const std::filesystem::path& dir, std::string_view who);

// Prepares DIR for measuring. Without resume, DIR must not hold samples yet (CalibrationInputError:
// "use --resume or another --out"). With resume, reads the keys already measured; `repair` (the
// writing rank) also truncates a torn last line. Creates DIR when missing. The writing rank
// (`repair`) first takes an exclusive lock on DIR: a second writer, also one on another host of a
// shared file system, is refused naming the holder's pid and host.
[[nodiscard]] RunDir open_run_dir(const std::filesystem::path& dir, bool resume, bool repair);

// Writes DIR/run.json, or the first free run-N.json, created exclusively (O_EXCL) so that two
// runs never overwrite each other's provenance. Returns the path written.
std::filesystem::path write_run_info(const std::filesystem::path& dir, const nlohmann::json& info);

struct Progress {
    std::size_t done = 0;   // descriptors finished in this session
    std::size_t total = 0;  // descriptors this session will run
    std::string key;        // the one just finished
    double elapsed_s = 0;
    double eta_s = 0;       // from the backend's rough per-descriptor estimates, rescaled by
                            // how fast the run has actually gone
};

struct MeasureOptions {
    std::string plan_name;     // recorded in run.json; a resume must use the same plan
    std::string command_line;  // recorded in run.json
    std::function<void(const Progress&)> on_progress;
    // Test hook: stop (as if killed) after this many descriptors were measured in this session.
    std::optional<std::size_t> stop_after;
    // Seconds of untimed load before the session's first descriptor (Backend::burn_in;
    // plan.hpp burn_in_seconds). Recorded in run.json.
    double burn_in_s = 0;
    // Stop before a descriptor whose rough estimate would end past this many seconds since the
    // session started (burn-in included); the rest is left for --resume. Single-process runs only:
    // ranks deciding apart would leave some in a collective the others skipped.
    std::optional<double> time_budget_s;
    // Seconds on a monotonic clock, for the budget, the progress bar and the ETA; empty:
    // std::chrono::steady_clock (tests drive their own).
    std::function<double()> clock;
    // What a rank that writes no samples was told (why it recorded an op as unsupported), for its
    // stderr: the writing rank's sample says only which rank failed.
    std::function<void(const std::string&)> on_note;
};

struct MeasureSummary {
    std::size_t planned = 0;      // descriptors in the plan
    std::size_t already_done = 0; // skipped: present from an earlier session
    std::size_t measured = 0;     // measured now (ok)
    std::size_t unsupported = 0;  // recorded as unsupported now
    std::filesystem::path run_info;  // the run*.json written (empty on non-writing ranks)
    bool stopped_early = false;      // stop_after or the time budget reached
    bool budget_reached = false;     // the time budget stopped it
};

// Measures every descriptor of `plan` not in run.done, in plan order, so that a resumed run ends
// with exactly the keys of an uninterrupted one. A resumed run must use the same plan name and
// backend as the first session (CalibrationInputError otherwise).
MeasureSummary measure(Backend& backend, const std::vector<Descriptor>& plan, const RunDir& run,
                       const MeasureOptions& opts);

// The UTC time now, ISO 8601 ("2025-01-31T12:00:00Z").
[[nodiscard]] std::string utc_now();

} // namespace trainsim::calibrate
