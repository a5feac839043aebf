// The order in which a pipeline stage runs its micro-batches' forward and backward passes
// (Megatron-LM's 1F1B and interleaved 1F1B), shared by the memory model (how many micro-batches
// a stage holds) and the workload builder (the stage's program).
#pragma once

#include <vector>

namespace trainsim::model {

// One step of (fwd|bwd, micro-batch, chunk) in a stage's pipeline schedule.
struct ScheduleItem {
    bool forward = true;
    int microbatch = 0;
    int chunk = 0;
};

// Megatron's 1F1B (vp == 1) and interleaved 1F1B (vp > 1) order for one pipeline stage.
// Precondition (checked by check_layout): for vp > 1, microbatches % pp == 0.
[[nodiscard]] std::vector<ScheduleItem> pipeline_schedule(int stage, int pp, int vp, int microbatches);

// Largest number of (micro-batch, chunk) forward passes whose activations a stage holds at once.
[[nodiscard]] int peak_inflight_chunks(const std::vector<ScheduleItem>& schedule);
// The same for pipeline_schedule(stage, pp, vp, microbatches), without building it: the warm-up
// forwards, plus one while a steady phase alternates a forward with a backward (the memory model
// asks this for every layout the plan search enumerates; tested equal to the walk above).
[[nodiscard]] int peak_inflight_chunks(int stage, int pp, int vp, int microbatches);

} // namespace trainsim::model
