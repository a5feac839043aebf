// The order in which a pipeline stage runs its micro-batches' forward and backward passes,
// shared by the memory model (how many micro-batches a stage holds) and the workload builder
// (the stage's program): Megatron-LM's 1F1B and interleaved 1F1B, the Zero Bubble schedules ZB-H1
// and ZB-V (Qi et al., ICLR 2024; sail-sg/zero-bubble-pipeline-parallelism) and DeepSeek's
// DualPipeV (deepseek-ai/DualPipe). docs/model.md "Pipeline schedules".
#pragma once

#include "trainsim/model/core/scenario.hpp"

#include <vector>

namespace trainsim::model {

// What a schedule item computes. The zero-bubble schedules split a backward into an input-gradient
// pass (B: every layer's dgrad GEMMs, the attention backward, the norms; what the previous stage
// waits for) and a weight-gradient pass (W: the layers' wgrad GEMMs), run later; the activations
// the W pass reads stay alive until it has run.
enum class PipelinePass : unsigned char { forward, backward, input_grad, weight_grad };

// One step of (pass, micro-batch, chunk) in a stage's pipeline schedule.
struct ScheduleItem {
    bool forward = true;  // pass == forward
    int microbatch = 0;
    int chunk = 0;
    PipelinePass pass = PipelinePass::forward;
    // DualPipeV waits, before it computes a chunk, for every receive posted since the previous
    // compute (DualPipeV._commit_and_wait_comm): the input of an overlapped F&B pair's backward,
    // or of a forward whose receive was posted early. The index (in this stage's schedule) of the
    // later item whose input this one waits for as well, or -1.
    int waits_input_of = -1;
    // DualPipeV: this forward and the next item (a backward) are an overlapped F&B pair
    // (_forward_backward_chunk): both inputs are waited first, both outputs sent after both computes.
    bool paired = false;
};

// Today's rule for a blank schedule: 1F1B for vp == 1, interleaved 1F1B for vp > 1.
[[nodiscard]] PpSchedule effective_schedule(PpSchedule s, int vp);
// Whether the schedule places a stage's two chunks in a V (chunk 0 on virtual stage `stage`,
// chunk 1 on 2 pp - 1 - stage: ZB-V, DualPipeV); otherwise chunk c of stage s is c pp + s.
[[nodiscard]] bool v_shape(PpSchedule s);
// Whether the schedule splits the backward into B and W passes.
[[nodiscard]] bool splits_backward(PpSchedule s);
// The virtual stage (position along the model, 0 .. pp vp - 1) of chunk `chunk` of `stage`.
[[nodiscard]] int virtual_stage(PpSchedule s, int pp, int vp, int stage, int chunk);
// The (stage, chunk) that holds virtual stage `vs`.
struct StageChunk {
    int stage = 0, chunk = 0;
};
[[nodiscard]] StageChunk stage_chunk(PpSchedule s, int pp, int vp, int vs);

// Megatron's 1F1B (vp == 1) and interleaved 1F1B (vp > 1) order for one pipeline stage.
// Precondition (checked by check_layout): for vp > 1, microbatches % pp == 0.
[[nodiscard]] std::vector<ScheduleItem> pipeline_schedule(int stage, int pp, int vp, int microbatches);
// The order of any schedule (automatic resolved by effective_schedule). Preconditions (checked
// by check_layout): zb-h1 vp == 1; zb-v and dualpipe-v vp == 2; dualpipe-v microbatches >= 2 pp.
[[nodiscard]] std::vector<ScheduleItem> pipeline_schedule(PpSchedule s, int stage, int pp, int vp, int microbatches);

// Largest number of (micro-batch, chunk) forward passes whose activations a stage holds at once
// (a forward's activations are freed by its backward, or by its W pass when the backward is split).
[[nodiscard]] int peak_inflight_chunks(const std::vector<ScheduleItem>& schedule);
// The same for pipeline_schedule(stage, pp, vp, microbatches), without building it: the warm-up
// forwards, plus one while a steady phase alternates a forward with a backward (the memory model
// asks this for every layout the plan search enumerates; tested equal to the walk above).
[[nodiscard]] int peak_inflight_chunks(int stage, int pp, int vp, int microbatches);
// The same for any schedule (the 1F1B family without building it).
[[nodiscard]] int peak_inflight_chunks(PpSchedule s, int stage, int pp, int vp, int microbatches);

// The schedules' own timing, as programs: every stage runs its items in order, each once its
// input has arrived (a forward after the previous virtual stage's forward of the micro-batch, an
// input-gradient or full backward after the next virtual stage's, a W pass after its own B) and,
// for DualPipeV, the later input it waits for too (waits_input_of); each pass of one chunk costs f, b
// (input gradient) or w (weight gradient), a full backward b + w; transfers are free. What the
// closed forms of the papers describe (tests compare them); the step itself is simulated by the
// executor on the op graph.
struct ScheduleTiming {
    double makespan = 0;
    std::vector<double> idle;          // per stage: makespan minus the stage's work
    std::vector<double> first_start;   // per stage: when its first pass starts
    std::vector<double> last_end;      // per stage: when its last pass ends
    std::vector<double> inner_gaps;    // per stage: idle time between its first start and last end
};
[[nodiscard]] ScheduleTiming time_schedule(PpSchedule s, int pp, int vp, int microbatches, double f, double b,
                                           double w);

} // namespace trainsim::model
