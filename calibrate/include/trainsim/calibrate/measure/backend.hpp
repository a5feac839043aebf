// A calibration backend runs descriptors on one kind of hardware. Two ship: CUDA (cuBLASLt,
// NCCL, hand-written kernels; calibrate/src/backends/cuda_backend.cpp) and CPU (Eigen GEMMs, memory
// loops, collectives between threads; cpu_backend.cpp) so that the whole pipeline runs in tests.
// The one shared timing loop (time_op) drives both.
#pragma once

#include "trainsim/calibrate/core/descriptor.hpp"
#include "trainsim/calibrate/samples/sample.hpp"

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace trainsim::calibrate {

// A descriptor made ready to run: buffers allocated, algorithm chosen.
class PreparedOp {
public:
    virtual ~PreparedOp() = default;
    // One call (enqueued on the GPU stream, or run to completion on the CPU).
    virtual void run() = 0;
    // Untimed hooks around each timed sample (e.g. start / drain a background collective).
    virtual void before_sample() {}
    virtual void after_sample() {}
    [[nodiscard]] virtual std::string implementation() const = 0;
    [[nodiscard]] virtual int algo_index() const { return -1; }
    [[nodiscard]] virtual int algo_count() const { return 0; }
};

class Backend {
public:
    virtual ~Backend() = default;
    [[nodiscard]] virtual std::string name() const = 0;  // "cpu" | "cuda"
    // Ranks available to collectives (GPUs of the run, or threads), and the host of each rank
    // (empty: all on this host). The plan is made from these.
    [[nodiscard]] virtual int ranks() const = 0;
    [[nodiscard]] virtual std::vector<std::string> rank_hosts() const { return {}; }
    // Device, versions, clocks, host: recorded in run.json.
    [[nodiscard]] virtual nlohmann::json provenance() const = 0;
    // Why the descriptor cannot run here, or nothing. Must give the same answer on every rank.
    [[nodiscard]] virtual std::optional<std::string> unsupported(const Descriptor& d) const = 0;
    // Whether this rank takes part (multi-process CUDA: rank 0 runs single-device ops, the
    // first group_size ranks run a collective). Every rank walks the same plan.
    [[nodiscard]] virtual bool participates(const Descriptor& d) const = 0;
    // Only one rank writes samples and run.json.
    [[nodiscard]] virtual bool writes_samples() const = 0;
    // Throws OpUnsupported (recorded with its reason) or a backend error (the run stops).
    [[nodiscard]] virtual std::unique_ptr<PreparedOp> prepare(const Descriptor& d) = 0;
    // Wall time of what ran between start and stop, in seconds (GPU: CUDA events on the stream).
    virtual void start_timer() = 0;
    [[nodiscard]] virtual double stop_timer() = 0;
    // Evicts caches before a timed sample when the descriptor asks for it (GPU: L2 flush).
    virtual void flush_caches() = 0;
    // Cross-rank reduction of per-sample times of a collective (max: the slowest rank decides).
    virtual void reduce_times(const Descriptor& d, std::vector<double>& times) = 0;
    // Every rank of the descriptor's group waits here for the others; called by exactly those
    // ranks before each timed sample of a collective (nccl-tests' Barrier before its timed loop), so
    // that rank skew and an idle stream's first launch stay out of the time. Single-process
    // backends (threads meet inside each collective): nothing.
    virtual void barrier(const Descriptor& d) { (void)d; }
    // Called by every rank of the descriptor's group with whether this rank can run it (`ok`);
    // returns the lowest rank of the group that cannot, or -1 when all can. Every rank then runs
    // the op, or none does: a rank that skipped a collective the others entered would hang them.
    // Single-process backends: -1 when ok, else 0 (this process).
    [[nodiscard]] virtual int first_failing_rank(const Descriptor& d, bool ok) {
        (void)d;
        return ok ? -1 : 0;
    }
    // Untimed load on this rank's device for about `seconds` at the start of a session, so that the
    // first samples do not see an idle GPU's clocks (the CPU backend: nothing).
    virtual void burn_in(double seconds) { (void)seconds; }
    [[nodiscard]] virtual SampleTelemetry telemetry() const = 0;
    // A rough guess of one descriptor's wall time in seconds, for the progress bar's ETA.
    [[nodiscard]] virtual double rough_seconds(const Descriptor& d) const = 0;
    // Called when the plan moves on to another kind of op (frees scratch buffers).
    virtual void end_of_kind() {}
    // After an op of this rank alone failed while it ran: whether the device can go on (GPU: no
    // sticky CUDA error). If not, the run stops once the failure is recorded.
    [[nodiscard]] virtual bool healthy() { return true; }
};

// Backend::first_failing_rank over an element-wise max across the group (MPI_Allreduce or an
// NCCL all-reduce): each rank contributes world - rank when it cannot run the op, 0 when it can.
[[nodiscard]] int lowest_failing_rank(int rank, int world, bool ok,
                                      const std::function<void(std::vector<double>&)>& max_over_group);

// Whether the descriptor runs on several ranks at once (a collective, or an overlap measure over a
// group): its ranks must agree before running it, and its times are reduced across them.
[[nodiscard]] bool runs_on_group(const Descriptor& d);

// The shared timing loop: `warmup` untimed calls, then `iters` timed samples of
// `calls_per_sample` calls each (caches flushed before each when asked and only one call is in
// the sample; a collective's ranks meet at a barrier before each), per-call times reduced across
// ranks, then median and spread.
[[nodiscard]] TimeStats time_op(Backend& backend, PreparedOp& op, const Descriptor& d);

} // namespace trainsim::calibrate
