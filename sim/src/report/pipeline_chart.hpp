// The HTML report's pipeline timelines (docs/report.md "Pipeline"): per plan, one row per pipeline
// stage with its forward (F), input-gradient (B), weight-gradient (W) and whole-backward (B+W)
// passes as the executor ran them (StepResult::passes). Inline SVG. Internal to sim/src/report.
#pragma once

#include "trainsim/sim/report/report.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace trainsim::sim::svg {

// Past this many passes in one timeline, neighbouring passes narrower than a pixel (and less than
// a pixel apart) are drawn as one box (class pp-run, data-count): a 405B plan's 512 micro-batches
// on 16 stages would be 65,000 boxes of a tenth of a pixel each.
inline constexpr std::size_t kMaxPipelineBoxes = 6000;

// The section's body: a timeline per plan with pp > 1 that was simulated with its passes
// recorded (ExecOptions::record_passes), a note for the others (pp 1: no pipeline; not simulated).
// Plans of one layout (GPUs, pp, micro-batches per step) share a time axis, so that their
// bubbles compare by eye.
[[nodiscard]] std::string pipeline_timelines(const std::vector<PlanResult>& results,
                                             const Translator& tr = Translator());

} // namespace trainsim::sim::svg
