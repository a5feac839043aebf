// Framework profiles: the behaviours of a training framework that change step time (overlaps,
// attention kernel, recompute, optimizer, ZeRO / FSDP gathering ...), as explicit named plan
// properties with documented defaults. `parallel.framework` in a scenario and the framework
// column of a published-measurements row (`trainsim validate`) both apply them.
#pragma once

#include "trainsim/model/core/scenario.hpp"

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace trainsim::model {

// Framework behaviours that change step time, as explicit named properties with documented
// defaults (docs/accuracy.md). Unknown frameworks get a generic PyTorch eager profile, said so.
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
    // A blank recompute becomes full recompute of every layer from this many parameters up, as
    // the framework's shipped recipes switch activation checkpointing on by model size; 0: the
    // recompute above whatever the size.
    double full_recompute_from_params = 0;
    // A blank sharding whose framework default does not fit a measured run: the framework's
    // other optimizer-state shardings, least sharded first; the first that fits is taken (the
    // run fit, so its unstated ZeRO stage must be one that does). Empty: the default stays.
    std::vector<Sharding> blank_sharding_fallbacks;
    // The pipeline schedules the framework runs, which `plan` may choose among (docs/model.md
    // "Pipeline schedules"; `plan --pp-schedules` overrides it): concrete schedules, never
    // automatic. Every family runs 1F1B and interleaved 1F1B, which is what the search tried
    // before schedules were searched; framework_profile() adds what a family has beyond them.
    std::vector<PpSchedule> pp_schedules{PpSchedule::one_f_one_b, PpSchedule::interleaved};
    // Where pp_schedules comes from (the code that has, or lacks, the schedules).
    std::string pp_schedules_source;
    std::string why;   // the documentation of these choices
    bool known = true; // false: not a family below; a generic PyTorch eager profile stands in
    // The framework_families() entry the name resolved to, directly or through an alias
    // ("Megatron Bridge" -> nemo); empty when unknown.
    std::string family;

private:
    static Parallel default_behaviours() {
        Parallel p;
        p.sequence_parallel = true; // when tp > 1
        return p;
    }
};
[[nodiscard]] FrameworkProfile framework_profile(const std::string& framework);

// Host (CPU) time to issue work on one rank, by dispatch path (docs/model.md "Host"). The
// executor's host thread spends, per op, its kernel launches times the launch cost (forward
// and recompute ops are issued from Python, backward ops by the autograd engine) plus the cost
// of a communication call.
struct HostCosts {
    Time forward_launch;  // per kernel issued from the Python forward (also recompute)
    Time backward_launch; // per kernel issued by the C++ autograd engine
    Time collective_call; // per torch.distributed collective (ProcessGroupNCCL -> ncclAllReduce ...)
    Time p2p_call;        // per pipeline send or receive
    Time plain_op;        // per bare tensor op from a Python loop, no autograd (OpProto::plain_ops)
};
[[nodiscard]] HostCosts host_costs(HostDispatch dispatch);
// Whether `framework` names a family framework_profile() knows, bare or with "-<release>"
// (case-blind, '_' and ' ' read as '-'), or a stack that runs one (framework_aliases()).
[[nodiscard]] bool known_framework(const std::string& framework);
// The scenario keys whose values apply_framework_profile copies from a profile as they are
// (besides sharding, recompute, sequence_parallel, tp_comm_overlap, elementwise, host_dispatch, fp8_params).
[[nodiscard]] std::vector<std::string_view> framework_behaviour_keys();
// The families framework_profile() knows, for messages and documentation.
[[nodiscard]] const std::vector<std::string>& framework_families();
// A name people write for a stack whose code is one of framework_families(): NVIDIA's
// Megatron-Core products under their release names, derivatives labs publish, the trainers
// built on Hugging Face Transformers, JAX stacks. Mapped by the code the stack launches, never
// by the error of some measured row. Matched case-blind, its separators optional ("Megatron
// Bridge", "megatron_bridge", "MegatronBridge"), followed by the end or a separator and anything
// (a release, a remark: "nvidia-nemo-24.07", "mcore (TE)"). A name that is a family itself
// ("nemo-24.07") is read as that family first.
struct FrameworkAlias {
    std::string_view alias;  // lower case, words separated by '-'
    std::string_view family; // a framework_families() entry
    // What follows the alias is the family's own release ("nvidia-nemo-24.07" reads as
    // nemo-24.07); false: the alias numbers its releases otherwise, its family's current release
    // is taken.
    bool keeps_release;
    std::string_view why; // what the stack runs, with the source that says so
};
[[nodiscard]] std::span<const FrameworkAlias> framework_aliases();
// The aliases' names in table order: the list `trainsim keys` gives for parallel.framework.
[[nodiscard]] std::vector<std::string_view> framework_alias_names();
// Sets the plan properties the profile governs (layout defaults: sharding, recompute, sequence
// parallelism; and the framework behaviours) except those `written` says were given. Properties
// that depend on the layout follow the plan: sequence parallelism and TP overlap need tp > 1, FP8
// primary weights FP8 precision and a sharding that carries them.
void apply_framework_profile(const FrameworkProfile& fw, Plan& plan,
                             const std::function<bool(std::string_view key)>& written);
// The recompute policy the framework runs `model` with when nothing says which: full from
// full_recompute_from_params up, its parallel.recompute below.
[[nodiscard]] Recompute default_recompute(const FrameworkProfile& fw, const ModelArch& model);

// A framework name or GPU id as matched: lower case, '_' and ' ' read as '-' ("NeMo 24.07" ->
// "nemo-24.07", "H100_SXM" -> "h100-sxm").
[[nodiscard]] std::string canonical_name(std::string s);

} // namespace trainsim::model
