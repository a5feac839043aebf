// The typed bindings of the scenario keys (key_bindings.hpp): how each key's written value is
// parsed (type, unit, physical range) and where in the Plan or ModelArch it is stored.
#include "key_bindings.hpp"

#include "trainsim/model/framework/framework_profile.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <stdexcept>

namespace trainsim::model::detail {

namespace {

// A parsed value against its key's physical range (scenario_keys.cpp, the bounds parsed the way
// the value was): outside it, an input error at the value.
template <class V, class Parse>
bool in_range(const V& x, const KeySpec& spec, Parse parse, const Site& at, const YAML::Node& v, Diags& out) {
    const bool low = !spec.range_min.empty() && x < parse(spec.range_min);
    const bool high = !spec.range_max.empty() && parse(spec.range_max) < x;
    if (!low && !high) return true;
    report(out, at,
           fmt::format("'{}' is outside the physical range of {}: {} {} ({})", v.Scalar(), spec.path,
                       spec.range_min.empty() ? "at most" : fmt::format("{} to", spec.range_min),
                       spec.range_max.empty() ? "or more" : spec.range_max, spec.range_basis));
    return false;
}

long long parse_int_bound(std::string_view s) { return detail::parse_whole<long long>(s).value; }
double parse_number_bound(std::string_view s) { return detail::parse_whole<double>(s).value; }

// An integer of at least `min`, within the key's range.
std::optional<int> read_ranged_int(const YAML::Node& v, const Site& at, int min, const KeySpec& spec, Diags& out) {
    auto x = detail::read_int(v, at, min, out);
    if (x && !in_range(static_cast<long long>(*x), spec, parse_int_bound, at, v, out)) x.reset();
    return x;
}

template <class T, class Get> Binding<T> int_key(std::string_view path, int min, Get get) {
    return {path, "int", [=](T& t, const YAML::Node& v, const Site& at, const KeySpec& spec, Diags& out) {
                auto x = read_ranged_int(v, at, min, spec, out);
                if (x) get(t) = *x;
                return x.has_value();
            }};
}

template <class T, class Get> Binding<T> bool_key(std::string_view path, Get get) {
    return {path, "bool", [=](T& t, const YAML::Node& v, const Site& at, const KeySpec&, Diags& out) {
                auto x = detail::read_bool(v, at, out);
                if (x) get(t) = *x;
                return x.has_value();
            }};
}

template <class T, class Get> Binding<T> string_key(std::string_view path, Get get) {
    return {path, "string", [=](T& t, const YAML::Node& v, const Site& at, const KeySpec&, Diags& out) {
                auto x = detail::read_string(v, at, out);
                if (x) get(t) = *x;
                return x.has_value();
            }};
}

template <class T, class Get> Binding<T> count_key(std::string_view path, Get get) {
    return {path, "count", [=](T& t, const YAML::Node& v, const Site& at, const KeySpec& spec, Diags& out) {
                auto x = detail::read_with_unit(v, at, "a count (e.g. 1T, 40M, 4096)", parse_count, out);
                if (x && !in_range(*x, spec, parse_count, at, v, out)) x.reset();
                if (x) get(t) = *x;
                return x.has_value();
            }};
}

template <class T, class Get> Binding<T> fraction_key(std::string_view path, Get get) {
    return {path, "fraction", [=](T& t, const YAML::Node& v, const Site& at, const KeySpec&, Diags& out) {
                auto x = detail::read_with_unit(v, at, "a fraction ('15%' or 0.15)", parse_fraction, out);
                if (x) get(t) = *x;
                return x.has_value();
            }};
}

template <class T, class Get> Binding<T> bandwidth_key(std::string_view path, Get get) {
    return {path, "bandwidth", [=](T& t, const YAML::Node& v, const Site& at, const KeySpec& spec, Diags& out) {
                auto x = detail::read_with_unit(v, at, "a bandwidth (e.g. '400 Gbit/s')", parse_bandwidth, out);
                if (x && !in_range(*x, spec, parse_bandwidth, at, v, out)) x.reset();
                if (x) get(t) = *x;
                return x.has_value();
            }};
}

// A wall-clock span with its unit, stored in units of `stored_s` seconds (1: seconds, 3600: hours);
// `positive`: 0 is refused too.
template <class T, class Get> Binding<T> duration_key(std::string_view path, double stored_s, bool positive, Get get) {
    return {path, "duration", [=](T& t, const YAML::Node& v, const Site& at, const KeySpec& spec, Diags& out) {
                auto x =
                    detail::read_with_unit(v, at, "a duration (e.g. '10 min', '50000 h')", parse_wall_seconds, out);
                if (x && positive && !(*x > 0)) {
                    report(out, at, fmt::format("must be more than 0, got '{}'", v.Scalar()));
                    x.reset();
                }
                if (x && !in_range(*x, spec, parse_wall_seconds, at, v, out)) x.reset();
                if (x) get(t) = *x / stored_s;
                return x.has_value();
            }};
}

// A size with its unit ("2 TB", "1.5 TiB").
template <class T, class Get>
Binding<T> size_key(std::string_view path, Get get) {
    return {path, "size", [=](T& t, const YAML::Node& v, const Site& at, const KeySpec& spec, Diags& out) {
                auto x = detail::read_with_unit(v, at, "a size (e.g. '2 TB', '512 GiB')", parse_bytes, out);
                if (x && !in_range(*x, spec, parse_bytes, at, v, out)) x.reset();
                if (x) get(t) = *x;
                return x.has_value();
            }};
}

// How often something happens ("0.002/h"), stored per hour.
template <class T, class Get>
Binding<T> rate_key(std::string_view path, Get get) {
    return {path, "rate", [=](T& t, const YAML::Node& v, const Site& at, const KeySpec& spec, Diags& out) {
                auto x = detail::read_with_unit(v, at, "a rate (e.g. '0.002/h', '1/d')", parse_rate_per_second, out);
                if (x && !in_range(*x, spec, parse_rate_per_second, at, v, out)) x.reset();
                if (x) get(t) = *x * 3600.0;
                return x.has_value();
            }};
}

// A plain non-negative number (money: no unit to parse).
template <class T, class Get> Binding<T> number_key(std::string_view path, Get get) {
    return {path, "number", [=](T& t, const YAML::Node& v, const Site& at, const KeySpec& spec, Diags& out) {
                auto x = detail::read_number(v, at, 0.0, HUGE_VAL, out);
                if (x && !in_range(*x, spec, parse_number_bound, at, v, out)) x.reset();
                if (x) get(t) = *x;
                return x.has_value();
            }};
}

// The enumerator spelled `s` (the table lists spellings in enumerator order, from 0).
template <class E> E enum_value(const std::string& s, const KeySpec& spec) {
    for (std::size_t i = 0; i < spec.allowed.size(); ++i) {
        const auto e = static_cast<E>(static_cast<int>(i));
        if (to_string(e) == s) return e;
    }
    throw std::logic_error(fmt::format("scenario_keys: '{}' of {} names no enumerator", s, spec.path));
}

template <class T, class E, class Get> Binding<T> enum_key(std::string_view path, Get get) {
    return {path, "enum", [=](T& t, const YAML::Node& v, const Site& at, const KeySpec& spec, Diags& out) {
                auto x = detail::read_enum(v, at, spec.allowed, out);
                if (x) get(t) = enum_value<E>(*x, spec);
                return x.has_value();
            }};
}

} // namespace

std::vector<Binding<PlanBuild>> make_plan_bindings() {
    using B = PlanBuild;
    auto discount = [](Commitment c) {
        return [c](B& b) -> double& { return b.plan.pricing.discounts[c]; };
    };
    return {
        count_key<B>("training.tokens", [](B& b) -> double& { return b.plan.training.tokens; }),
        int_key<B>("training.seq_len", 1, [](B& b) -> int& { return b.plan.training.seq_len; }),
        int_key<B>("training.global_batch", 1, [](B& b) -> int& { return b.plan.training.global_batch; }),
        int_key<B>("training.micro_batch", 1, [](B& b) -> int& { return b.plan.training.micro_batch; }),
        enum_key<B, Method>("training.method", [](B& b) -> Method& { return b.plan.training.method; }),
        int_key<B>("training.lora_rank", 1, [](B& b) -> int& { return b.plan.training.lora_rank; }),
        {"training.lora_targets", "list",
         [](B& b, const YAML::Node& v, const Site& at, const KeySpec&, Diags& out) {
             // Hugging Face's module names without _proj, and the groups trainsim's layer has.
             static const std::vector<std::pair<std::string, unsigned>> names{
                 {"q", kLoraQ}, {"k", kLoraK}, {"v", kLoraV}, {"o", kLoraO}, {"gate", kLoraGate}, {"up", kLoraUp},
                 {"down", kLoraDown}, {"qkv", kLoraQ | kLoraK | kLoraV}, {"fc1", kLoraGate | kLoraUp},
                 {"fc2", kLoraDown}, {"all", kLoraAll}};
             std::vector<std::string> allowed;
             for (const auto& n : names) allowed.push_back(n.first);
             std::vector<YAML::Node> items;
             if (v.IsSequence()) {
                 for (const auto& x : v) items.push_back(x);
             } else {
                 items.push_back(v);
             }
             unsigned bits = 0;
             bool ok = !items.empty();
             if (items.empty()) report(out, at, "an empty list: name at least one layer (or all)");
             for (const auto& x : items) {
                 auto name = detail::read_enum(x, at, allowed, out);
                 if (!name) {
                     ok = false;
                     continue;
                 }
                 for (const auto& n : names)
                     if (n.first == *name) bits |= n.second;
             }
             if (ok) b.plan.training.lora_targets = bits;
             return ok;
         }},
        enum_key<B, BaseFormat>("training.base_format", [](B& b) -> BaseFormat& { return b.plan.training.base_format; }),
        number_key<B>("training.epochs", [](B& b) -> double& { return b.plan.training.epochs; }),
        count_key<B>("training.dataset_tokens", [](B& b) -> double& { return b.plan.training.dataset_tokens; }),
        int_key<B>("parallel.tp", 1, [](B& b) -> int& { return b.plan.parallel.tp; }),
        int_key<B>("parallel.pp", 1, [](B& b) -> int& { return b.plan.parallel.pp; }),
        int_key<B>("parallel.vp", 1, [](B& b) -> int& { return b.plan.parallel.vp; }),
        int_key<B>("parallel.cp", 1, [](B& b) -> int& { return b.plan.parallel.cp; }),
        {"parallel.dp", "int|auto",
         [](B& b, const YAML::Node& v, const Site& at, const KeySpec& spec, Diags& out) {
             if (v.IsScalar() && v.Scalar() == "auto") {
                 b.dp_auto = true;
                 return true;
             }
             auto x = read_ranged_int(v, at, 1, spec, out);
             if (x) {
                 b.plan.parallel.dp = *x;
                 b.dp_auto = false;
             }
             return x.has_value();
         }},
        bool_key<B>("parallel.sequence_parallel", [](B& b) -> bool& { return b.plan.parallel.sequence_parallel; }),
        enum_key<B, Sharding>("parallel.sharding", [](B& b) -> Sharding& { return b.plan.parallel.sharding; }),
        enum_key<B, Recompute>("parallel.recompute", [](B& b) -> Recompute& { return b.plan.parallel.recompute; }),
        {"parallel.recompute_layers", "int|all",
         [](B& b, const YAML::Node& v, const Site& at, const KeySpec& spec, Diags& out) {
             if (v.IsScalar() && v.Scalar() == "all") {
                 b.plan.parallel.recompute_layers = 0;
                 return true;
             }
             auto x = read_ranged_int(v, at, 1, spec, out);
             if (x) b.plan.parallel.recompute_layers = *x;
             return x.has_value();
         }},
        string_key<B>("parallel.framework", [](B& b) -> std::string& { return b.plan.parallel.framework; }),
        string_key<B>("parallel.stack", [](B& b) -> std::string& { return b.plan.parallel.stack; }),
        bool_key<B>("parallel.overlap_grad_reduce", [](B& b) -> bool& { return b.plan.parallel.overlap_grad_reduce; }),
        bool_key<B>("parallel.overlap_param_gather",
                    [](B& b) -> bool& { return b.plan.parallel.overlap_param_gather; }),
        bool_key<B>("parallel.tp_comm_overlap", [](B& b) -> bool& { return b.plan.parallel.tp_comm_overlap; }),
        bool_key<B>("parallel.fsdp_prefetch", [](B& b) -> bool& { return b.plan.parallel.fsdp_prefetch; }),
        count_key<B>("parallel.dp_bucket_params", [](B& b) -> double& { return b.plan.parallel.dp_bucket_params; }),
        enum_key<B, AttentionImpl>("parallel.attention",
                                   [](B& b) -> AttentionImpl& { return b.plan.parallel.attention; }),
        bool_key<B>("parallel.dropout", [](B& b) -> bool& { return b.plan.parallel.dropout; }),
        enum_key<B, Elementwise>("parallel.elementwise",
                                 [](B& b) -> Elementwise& { return b.plan.parallel.elementwise; }),
        enum_key<B, CrossEntropy>("parallel.cross_entropy",
                                  [](B& b) -> CrossEntropy& { return b.plan.parallel.cross_entropy; }),
        bool_key<B>("parallel.fused_optimizer", [](B& b) -> bool& { return b.plan.parallel.fused_optimizer; }),
        enum_key<B, HostDispatch>("parallel.host_dispatch",
                                  [](B& b) -> HostDispatch& { return b.plan.parallel.host_dispatch; }),
        bool_key<B>("parallel.host_sync_p2p", [](B& b) -> bool& { return b.plan.parallel.host_sync_p2p; }),
        bool_key<B>("parallel.host_sync_layer", [](B& b) -> bool& { return b.plan.parallel.host_sync_layer; }),
        bool_key<B>("parallel.host_sync_batch", [](B& b) -> bool& { return b.plan.parallel.host_sync_batch; }),
        bool_key<B>("parallel.optimizer_per_tensor",
                    [](B& b) -> bool& { return b.plan.parallel.optimizer_per_tensor; }),
        enum_key<B, MicrobatchSync>("parallel.host_sync_microbatch",
                                    [](B& b) -> MicrobatchSync& { return b.plan.parallel.host_sync_microbatch; }),
        bool_key<B>("parallel.fp8_params", [](B& b) -> bool& { return b.plan.parallel.fp8_params; }),
        bool_key<B>("parallel.master_param_remainders",
                    [](B& b) -> bool& { return b.plan.parallel.master_param_remainders; }),
        enum_key<B, RankOrder>("parallel.order", [](B& b) -> RankOrder& { return b.plan.parallel.order; }),
        enum_key<B, FsdpFetch>("parallel.fsdp_fetch", [](B& b) -> FsdpFetch& { return b.plan.parallel.fsdp_fetch; }),
        enum_key<B, SelectiveRecompute>(
            "parallel.selective_recompute",
            [](B& b) -> SelectiveRecompute& { return b.plan.parallel.selective_recompute; }),
        enum_key<B, Offload>("parallel.offload", [](B& b) -> Offload& { return b.plan.parallel.offload; }),
        enum_key<B, PpSchedule>("parallel.pp_schedule", [](B& b) -> PpSchedule& { return b.plan.parallel.pp_schedule; }),
        enum_key<B, GradAccumulation>("parallel.grad_accumulation",
                                      [](B& b) -> GradAccumulation& { return b.plan.parallel.grad_accumulation; }),
        enum_key<B, OptimizerState>("parallel.optimizer_state",
                                    [](B& b) -> OptimizerState& { return b.plan.parallel.optimizer_state; }),
        bool_key<B>("parallel.master_weights", [](B& b) -> bool& { return b.plan.parallel.master_weights; }),
        bool_key<B>("parallel.optimizer_in_backward",
                    [](B& b) -> bool& { return b.plan.parallel.optimizer_in_backward; }),
        bool_key<B>("parallel.paged_optimizer", [](B& b) -> bool& { return b.plan.parallel.paged_optimizer; }),
        int_key<B>("parallel.fsdp_gathers_per_layer", 1,
                   [](B& b) -> int& { return b.plan.parallel.fsdp_gathers_per_layer; }),
        count_key<B>("parallel.fsdp_prefetch_bucket_params",
                     [](B& b) -> double& { return b.plan.parallel.fsdp_prefetch_bucket_params; }),
        {"parallel.fsdp_reuse_distance_params", "count|unlimited",
         [](B& b, const YAML::Node& v, const Site& at, const KeySpec& spec, Diags& out) {
             if (v.IsScalar() && v.Scalar() == "unlimited") {
                 b.plan.parallel.fsdp_reuse_distance_params = std::numeric_limits<double>::infinity();
                 return true;
             }
             auto parse = [](std::string_view t) {
                 try {
                     return parse_count(t);
                 } catch (const UnitError& e) {
                     throw UnitError(std::string(e.what()) + "; or write 'unlimited'");
                 }
             };
             auto x = detail::read_with_unit(v, at, "a count (e.g. 1B, 500M) or 'unlimited'", parse, out);
             if (x && !in_range(*x, spec, parse_count, at, v, out)) x.reset();
             if (x) b.plan.parallel.fsdp_reuse_distance_params = *x;
             return x.has_value();
         }},
        int_key<B>("parallel.fsdp_reduce_scatters_per_layer", 1,
                   [](B& b) -> int& { return b.plan.parallel.fsdp_reduce_scatters_per_layer; }),
        bool_key<B>("parallel.fsdp_gather_sync", [](B& b) -> bool& { return b.plan.parallel.fsdp_gather_sync; }),
        bool_key<B>("parallel.list_collectives", [](B& b) -> bool& { return b.plan.parallel.list_collectives; }),
        bool_key<B>("parallel.main_grads_fp32", [](B& b) -> bool& { return b.plan.parallel.main_grads_fp32; }),
        bool_key<B>("parallel.fsdp_reduce_fp32", [](B& b) -> bool& { return b.plan.parallel.fsdp_reduce_fp32; }),
        bool_key<B>("parallel.overlap_p2p", [](B& b) -> bool& { return b.plan.parallel.overlap_p2p; }),
        bool_key<B>("parallel.pp_scatter_gather", [](B& b) -> bool& { return b.plan.parallel.pp_scatter_gather; }),
        enum_key<B, Precision>("precision", [](B& b) -> Precision& { return b.plan.precision; }),
        string_key<B>("cluster.gpu", [](B& b) -> std::string& { return b.plan.cluster.gpu; }),
        int_key<B>("cluster.nodes", 1, [](B& b) -> int& { return b.plan.cluster.nodes; }),
        int_key<B>("cluster.gpus_per_node", 1, [](B& b) -> int& { return b.plan.cluster.gpus_per_node; }),
        enum_key<B, IntraFabric>("cluster.intra_node", [](B& b) -> IntraFabric& { return b.plan.cluster.intra; }),
        enum_key<B, InterFabric>("cluster.inter_node", [](B& b) -> InterFabric& { return b.plan.cluster.inter; }),
        int_key<B>("cluster.nics_per_node", 0, [](B& b) -> int& { return b.plan.cluster.nics_per_node; }),
        bandwidth_key<B>("cluster.nic_rate", [](B& b) -> Bandwidth& { return b.plan.cluster.nic_rate; }),
        {"cluster.oversubscription", "number",
         [](B& b, const YAML::Node& v, const Site& at, const KeySpec& spec, Diags& out) {
             auto x = detail::read_number(v, at, 1.0, HUGE_VAL, out);
             if (x && !in_range(*x, spec, parse_number_bound, at, v, out)) x.reset();
             if (x) b.plan.cluster.oversubscription = *x;
             return x.has_value();
         }},
        int_key<B>("cluster.nodes_per_leaf", 1, [](B& b) -> int& { return b.plan.cluster.nodes_per_leaf; }),
        size_key<B>("cluster.host_memory", [](B& b) -> std::optional<Bytes>& { return b.plan.cluster.host_memory; }),
        enum_key<B, PriceBasis>("pricing.basis", [](B& b) -> PriceBasis& { return b.plan.pricing.basis; }),
        number_key<B>("pricing.rate", [](B& b) -> std::optional<double>& { return b.plan.pricing.rate; }),
        string_key<B>("pricing.currency", [](B& b) -> std::string& { return b.plan.pricing.currency; }),
        enum_key<B, BillingIncrement>("pricing.increment",
                                      [](B& b) -> BillingIncrement& { return b.plan.pricing.increment; }),
        enum_key<B, Commitment>("pricing.commitment", [](B& b) -> Commitment& { return b.plan.pricing.commitment; }),
        fraction_key<B>("pricing.discounts.monthly", discount(Commitment::monthly)),
        fraction_key<B>("pricing.discounts.quarterly", discount(Commitment::quarterly)),
        fraction_key<B>("pricing.discounts.annual", discount(Commitment::annual)),
        number_key<B>("pricing.spot.rate", [](B& b) -> std::optional<double>& { return b.plan.pricing.spot.rate; }),
        rate_key<B>("pricing.spot.preemption_rate",
                    [](B& b) -> double& { return b.plan.pricing.spot.preemptions_per_node_hour; }),
        duration_key<B>("pricing.spot.restart_wait", 1.0, false,
                        [](B& b) -> double& { return b.plan.pricing.spot.restart_wait_s; }),
        bandwidth_key<B>("run.checkpoint_bandwidth",
                         [](B& b) -> Bandwidth& { return b.plan.run.checkpoint_bandwidth_per_node; }),
        duration_key<B>("run.gpu_mtbf", 3600.0, true, [](B& b) -> double& { return b.plan.run.gpu_mtbf_hours; }),
        duration_key<B>("run.node_mtbf", 3600.0, true, [](B& b) -> double& { return b.plan.run.node_mtbf_hours; }),
        {"run.planned_interruptions", "rate",
         [](B& b, const YAML::Node& v, const Site& at, const KeySpec& spec, Diags& out) {
             auto x = detail::read_with_unit(v, at, "a rate (e.g. '0.87/d')", parse_rate_per_second, out);
             if (x && !in_range(*x, spec, parse_rate_per_second, at, v, out)) x.reset();
             if (x) b.plan.run.planned_per_day = *x * 86400.0;
             return x.has_value();
         }},
        duration_key<B>("run.restart", 1.0, false, [](B& b) -> double& { return b.plan.run.restart_s; }),
        fraction_key<B>("run.slowdown", [](B& b) -> double& { return b.plan.run.slowdown; }),
        fraction_key<B>("run.stragglers", [](B& b) -> double& { return b.plan.run.straggler_fraction; }),
        fraction_key<B>("run.eval_pauses", [](B& b) -> double& { return b.plan.run.eval_fraction; }),
        fraction_key<B>("run.data_stalls", [](B& b) -> double& { return b.plan.run.data_stall_fraction; }),
        duration_key<B>("run.checkpoint_interval", 1.0, true,
                        [](B& b) -> std::optional<double>& { return b.plan.run.checkpoint_interval_s; }),
        number_key<B>("energy.pue", [](B& b) -> double& { return b.plan.energy.pue; }),
        number_key<B>("energy.price", [](B& b) -> std::optional<double>& { return b.plan.energy.price_per_kwh; }),
        string_key<B>("energy.currency", [](B& b) -> std::optional<std::string>& { return b.plan.energy.currency; }),
        number_key<B>("energy.grid_intensity",
                      [](B& b) -> std::optional<double>& { return b.plan.energy.grid_g_co2_per_kwh; }),
    };
}

std::vector<Binding<ModelBuild>> make_model_bindings() {
    using B = ModelBuild;
    return {
        string_key<B>("model.name", [](B& b) -> std::string& { return b.model.name; }),
        string_key<B>("model.source", [](B& b) -> std::string& { return b.model.source; }),
        int_key<B>("model.layers", 1, [](B& b) -> int& { return b.model.layers; }),
        int_key<B>("model.hidden", 1, [](B& b) -> int& { return b.model.hidden; }),
        int_key<B>("model.heads", 1, [](B& b) -> int& { return b.model.heads; }),
        {"model.kv_heads", "int",
         [](B& b, const YAML::Node& v, const Site& at, const KeySpec& spec, Diags& out) {
             auto x = read_ranged_int(v, at, 1, spec, out);
             if (x) b.model.kv_heads = *x;
             b.kv_heads_written = true;
             return x.has_value();
         }},
        {"model.head_dim", "int",
         [](B& b, const YAML::Node& v, const Site& at, const KeySpec& spec, Diags& out) {
             auto x = read_ranged_int(v, at, 1, spec, out);
             if (x) b.model.head_dim = *x;
             b.head_dim_written = true;
             return x.has_value();
         }},
        int_key<B>("model.ffn", 1, [](B& b) -> int& { return b.model.ffn; }),
        enum_key<B, FfnType>("model.ffn_type", [](B& b) -> FfnType& { return b.model.ffn_type; }),
        int_key<B>("model.vocab", 1, [](B& b) -> int& { return b.model.vocab; }),
        bool_key<B>("model.tied_embeddings", [](B& b) -> bool& { return b.model.tied_embeddings; }),
    };
}

// ---------------------------------------------------------------------------------------------
// The key table, seen from the loader

const KeySpec* find_spec(std::string_view path) {
    for (const auto& k : scenario_keys())
        if (k.path == path) return &k;
    return nullptr;
}

// Names of the keys directly under `parent` ("" = the top level).
std::vector<std::string> child_names(std::string_view parent) {
    std::vector<std::string> out;
    for (const auto& k : scenario_keys()) {
        std::string_view p = k.path;
        if (parent.empty()) {
            if (p.find_first_of(".[") == std::string_view::npos) out.emplace_back(p);
        } else if (p.size() > parent.size() && p.starts_with(parent) && p[parent.size()] == '.') {
            std::string_view rest = p.substr(parent.size() + 1);
            if (rest.find('.') == std::string_view::npos) out.emplace_back(rest);
        }
    }
    return out;
}

// " (did you mean 'x'?)": a sibling within typo distance, else the same name in another section.
std::string suggest_key(std::string_view parent, std::string_view name) {
    std::string hint = detail::did_you_mean(name, child_names(parent));
    if (!hint.empty()) return hint;
    for (const auto& k : scenario_keys()) {
        const auto dot = k.path.rfind('.');
        if (dot != std::string::npos && k.path.substr(dot + 1) == name && k.path.find('[') == std::string::npos)
            return fmt::format(" (did you mean '{}'?)", k.path);
    }
    return {};
}


bool is_section(std::string_view name) {
    return std::find(kSections.begin(), kSections.end(), name) != kSections.end();
}

// Keys that a plan resolves key by key: every leaf under the sections, plus `precision`.
bool is_plan_leaf(const KeySpec& k) {
    if (k.type == "section") return false;
    if (k.path == "precision") return true;
    const auto dot = k.path.find('.');
    return dot != std::string::npos && is_section(std::string_view(k.path).substr(0, dot));
}

// Model keys read through bindings (preset / hf_config choose the form instead).
bool is_model_leaf(const KeySpec& k) {
    return k.path.starts_with("model.") && k.path != "model.preset" && k.path != "model.hf_config";
}

// A default written as a literal value (not "(derived)" and not empty).
bool has_literal_default(const KeySpec& k) { return !k.default_value.empty() && k.default_value.front() != '('; }


} // namespace trainsim::model::detail
