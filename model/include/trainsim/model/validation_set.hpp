// Published training measurements (../shared/validation/README.md schema) turned into plans.
// Blank cells are filled with what the row's framework would use, and every such choice is
// recorded so `trainsim validate` can say what it chose.
#pragma once

#include "trainsim/model/scenario.hpp"

#include <filesystem>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace trainsim::model {

struct ValidationRow {
    std::string id;
    int line = 0;  // in the CSV file
    std::string source_group;
    std::string source;
    std::string gpu;
    std::string framework;
    std::string kind;  // step | end_to_end
    double measured_tokens_per_s_per_gpu = 0;
    Plan plan;                         // valid only when skip_reason is empty
    std::vector<std::string> choices;  // "micro_batch=1 (blank; Megatron default)"...
    // Blank cells the simulator may tune as the source's benchmark would have been tuned.
    bool micro_batch_blank = false;
    bool recompute_blank = false;
    bool vp_blank = false;  // pp > 1 and the source does not say whether it interleaved
    // Blank tp / pp that could not follow from the GPU count and took the frameworks' default 1:
    // the source's layout is unknown, so a plan that does not fit says so rather than blaming
    // the memory model.
    std::vector<std::string> defaulted_degrees;
    bool dp_blank = false;                // dp followed from the GPU count
    bool sequence_parallel_blank = false; // taken from the framework (tp > 1)
    bool vp_cell_blank = false;           // the vp cell itself (vp_blank also needs pp > 1)
    std::string skip_reason;           // why the row cannot be simulated
};

// Framework behaviours that change step time, as explicit named properties with documented
// defaults (docs/accuracy.md). Unknown frameworks get the Megatron-Core defaults, said so.
struct FrameworkProfile {
    std::string name;
    // The framework's values of the plan properties it governs: the layout defaults (sharding,
    // recompute; sequence_parallel meaning "when tp > 1") and every behaviour listed in
    // apply_framework_profile. The Parallel defaults are a well-tuned Megatron-Core stack.
    Parallel parallel = default_behaviours();
    // The precision a row runs in when its precision cell is blank: BF16 mixed precision, the
    // default of the stacks since Ampere; FP16 for the 2021-22 Megatron and DeepSpeed recipes.
    Precision precision = Precision::bf16;
    // Element-wise ops fused in FP8 training even where the framework runs eager otherwise
    // (torchao float8 is run under torch.compile).
    bool fused_in_fp8 = false;
    // A blank micro-batch: the rank's batch split into one micro-batch per pipeline stage
    // (pp x vp; without pipelining the whole batch at once), the framework's default, rather
    // than the best-throughput size.
    bool microbatch_per_stage = false;
    // A blank vp under pipelining: tuned to the best interleaving that fits (Megatron / NeMo
    // benchmarks), or false: the framework's default schedule, not interleaved.
    bool tune_blank_vp = true;
    // A blank recompute that must recompute may recompute only the first layers of each chunk
    // (Megatron-LM's --recompute-method block, from 2022), the fewest that fit; false: every
    // layer, as --checkpoint-activations did before it.
    bool block_recompute = true;
    std::string why;  // the documentation of these choices
    bool known = true; // false: not a family below; the Megatron-Core defaults stand in

private:
    static Parallel default_behaviours() {
        Parallel p;
        p.sequence_parallel = true; // when tp > 1
        return p;
    }
};
[[nodiscard]] FrameworkProfile framework_profile(const std::string& framework);
// Whether `framework` names a family framework_profile() knows, bare or with "-<release>"
// (case-blind, '_' and ' ' read as '-').
[[nodiscard]] bool known_framework(const std::string& framework);
// The scenario keys whose values apply_framework_profile copies from a profile as they are
// (besides sharding, recompute, sequence_parallel, tp_comm_overlap, elementwise, fp8_params).
[[nodiscard]] std::vector<std::string_view> framework_behaviour_keys();
// The families framework_profile() knows, for messages and documentation.
[[nodiscard]] const std::vector<std::string>& framework_families();
// Sets the plan properties the profile governs (layout defaults: sharding, recompute, sequence
// parallelism; and the framework behaviours) except those `written` says were given. Properties
// that depend on the layout follow the plan: sequence parallelism and TP overlap need tp > 1, FP8
// primary weights FP8 precision and a sharding that carries them.
void apply_framework_profile(const FrameworkProfile& fw, Plan& plan,
                             const std::function<bool(std::string_view key)>& written);

// Reads the CSV (RFC 4180 quoting). A malformed file (missing column, unparsable number) throws
// ScenarioError naming file:line and column; a row that is well-formed but cannot be simulated
// (unknown GPU profile, layout that breaks a rule) is returned with skip_reason set.
[[nodiscard]] std::vector<ValidationRow> load_validation_csv(const std::filesystem::path& file,
                                                             const std::filesystem::path& data_dir);

} // namespace trainsim::model
