// `trainsim validate --split-accumulation`: a step's time split into what it pays once per step
// and what it pays per micro-batch, measured and simulated.
//
// Runs that differ only in their global batch (same model, GPU, precision, framework and layout,
// micro-batch included) differ only in how many micro-batches each rank accumulates, so their
// step times lie on a line: step = per_step + grad_accum x per_microbatch. The per-step part is
// what does not repeat (the optimizer, the gradient reduction after the last backward, a
// pipeline's fill and drain); the per-micro-batch part is one micro-batch's forward, recompute and
// backward with its host time and TP communication. Fitting that line to the measured and to the
// simulated times says which of the two a model's error is in, which one error per row cannot.
#pragma once

#include "trainsim/model/input/validation_set.hpp"
#include "trainsim/sim/validate/validate.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace trainsim::sim {

struct AccumulationSplit {
    std::string label; // model, GPU, precision, framework and layout
    std::string source_group;
    RowResult::Layout layout; // the group's shared layout (grad_accum: its smallest)
    bool sequence_parallel = false;
    std::vector<std::string> ids; // its rows, by grad_accum
    std::vector<int> grad_accum;  // each row's, ascending; at least two different values
    // Least-squares line over the group's rows (seconds).
    double measured_per_step_s = 0, measured_per_microbatch_s = 0;
    double simulated_per_step_s = 0, simulated_per_microbatch_s = 0;
};

// The groups of compared step rows of `r` that share everything but the global batch, with their
// lines fitted. `rows` are the rows `r` was made from, in the same order (validate_rows keeps the
// file's): each row's model, sequence parallelism and which cells were blank. Rows whose
// micro-batch or recompute was blank are left out (the simulator chose it, so the measured run's
// split is not known), and so is a group with a single grad_accum. Groups come by source group,
// then layout (tp, pp, vp, cp, dp, micro-batch, GPUs), then label.
[[nodiscard]] std::vector<AccumulationSplit> split_accumulation(const std::vector<model::ValidationRow>& rows,
                                                                const ValidationReport& r);

// The text table `validate --split-accumulation` prints (with the median ratios over the groups)
// and its JSON (an array, one object per group).
[[nodiscard]] std::string accumulation_text(const std::vector<AccumulationSplit>& splits);
[[nodiscard]] nlohmann::json accumulation_json(const std::vector<AccumulationSplit>& splits);

} // namespace trainsim::sim
