// Executes an op graph on the discrete-event engine: one compute stream and several
// communication streams per rank; a collective starts when every simulated member of its group
// has reached it; a pipeline send/recv pair transfers when both sides are posted.
#pragma once

#include "trainsim/model/core/scenario.hpp"
#include "trainsim/model/workload/workload.hpp"
#include "trainsim/sim/cost/compute_cost.hpp"
#include "trainsim/sim/network/network.hpp"

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace trainsim::sim {

// The simulation ended with work left: names the stuck ranks and ops.
class SimulationStuck : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct ExecOptions {
    // Simulate every rank (tp x cp x dp x pp) instead of one representative per pipeline stage.
    // Both must give identical results (symmetric ranks); the full mode exists to prove it.
    bool all_ranks = false;
    // Record every op's start and end for traces.
    bool record_trace = false;
    // Record each pipeline pass's span on one rank per stage (StepResult::passes): what the HTML
    // report draws, without the whole trace.
    bool record_passes = false;
};

// Where one rank's step time went, on its compute stream. Sums to the step time.
struct StepBreakdown {
    Time forward, backward, recompute, optimizer;  // compute-stream kernels
    Time tp_exposed;      // TP collectives on the critical path (blocking or waited for)
    Time cp_exposed;      // CP exchange not hidden behind attention
    Time dp_exposed;      // DP / ZeRO / FSDP communication not hidden behind compute
    Time pp_exposed;      // pipeline transfers waited for
    Time bubble;          // waiting for other stages' compute (pipeline fill and drain)
    Time host_bound;      // the GPU waiting for its host thread to issue the next kernel
    Time slowdown;        // extra compute time from running next to communication kernels
    [[nodiscard]] Time compute() const { return forward + backward + recompute; }
    [[nodiscard]] Time total() const {
        return forward + backward + recompute + optimizer + tp_exposed + cp_exposed + dp_exposed + pp_exposed + bubble +
               host_bound;
    }
};

struct TraceEvent {
    int rank = 0;
    model::Stream stream = model::Stream::compute;
    std::uint32_t op = 0;
    Time start, end;
    // The host thread's issue of the op (its launch and call costs), for the trace's host track.
    Time host_start, host_end;
};

// One schedule item as it ran on a stage's compute stream: a forward (F), a full backward (B+W),
// an input-gradient pass (B) or a weight-gradient pass (W) of (micro-batch, chunk), from its first
// kernel's start to its last kernel's end (a backward's recompute included). The compute-stream
// kernels of forward, backward and recompute only: the optimizer, and communication on other
// streams, are not a pass.
struct PassSpan {
    int stage = 0;
    model::PipelinePass pass = model::PipelinePass::forward;
    int microbatch = 0;
    int chunk = 0;
    Time start, end;
};

struct StepResult {
    Time step_time;
    int critical_stage = 0;
    StepBreakdown breakdown;                // of the critical rank
    std::vector<Time> stage_finish;         // per pipeline stage
    std::uint64_t events = 0;
    std::size_t simulated_ranks = 0;
    std::size_t ops = 0;
    std::vector<TraceEvent> trace;          // when ExecOptions::record_trace
    // When ExecOptions::record_passes: the passes of the first simulated rank of each stage, by
    // stage, then in program order.
    std::vector<PassSpan> passes;
    // Host time the critical rank spent issuing work (launches and communication calls), and the
    // part of it the GPU waited for (breakdown.host_bound).
    Time host_busy;
    // Per pipeline stage: the most host time any of its simulated ranks spent issuing work, and
    // the most time each stream of one of its ranks was busy (its ops' spans; a stream runs one op
    // at a time).
    std::vector<Time> stage_host_busy;
    std::vector<std::array<Time, model::kNumStreams>> stage_stream_busy;
    // Compute-stream time of the critical rank per kernel name ("fc1", "attn_fwd", "ln1"...).
    std::vector<std::pair<std::string, Time>> kernel_time;
};

// The nominal time of one op of `proto`, as the executor starts it: a compute kernel's cost, or a
// collective's network time with every group of its kind communicating at once (plus the copies
// of a list-API collective). Send / recv are costed per transfer (network.p2p) and give zero here.
[[nodiscard]] Time nominal_op_time(const model::Plan& plan, const model::OpGraph& graph, const model::OpProto& proto,
                                   const ComputeCost& compute, const AnalyticNetwork& network);

// Precondition: graph = build_workload(plan).
[[nodiscard]] StepResult execute_step(const model::Plan& plan, const model::OpGraph& graph, const ComputeCost& compute,
                                      const AnalyticNetwork& network, const ExecOptions& opt = {});

} // namespace trainsim::sim
