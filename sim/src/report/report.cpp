#include "trainsim/sim/report/report.hpp"
#include "trainsim/sim/search/fit_advice.hpp"

#include "trainsim/model/framework/framework_profile.hpp"

#include "trainsim/model/accounting/finetune.hpp"
#include "trainsim/model/accounting/layout.hpp"
#include "trainsim/model/accounting/memory_model.hpp"
#include "trainsim/model/core/text_format.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace trainsim::sim {

using model::to_gib;
using nlohmann::json;

json breakdown_json(const StepBreakdown& b) {
    return json{{"forward_s", b.forward.seconds()},        {"backward_s", b.backward.seconds()},
                {"recompute_s", b.recompute.seconds()},    {"optimizer_s", b.optimizer.seconds()},
                {"tp_exposed_s", b.tp_exposed.seconds()},  {"cp_exposed_s", b.cp_exposed.seconds()},
                {"dp_exposed_s", b.dp_exposed.seconds()},  {"pp_exposed_s", b.pp_exposed.seconds()},
                {"pipeline_bubble_s", b.bubble.seconds()}, {"comm_slowdown_s", b.slowdown.seconds()},
                {"host_bound_s", b.host_bound.seconds()}};
}

namespace {

json memory_json(const model::MemoryBreakdown& m, Bytes capacity) {
    return json{{"stage", m.stage},
                {"weights_gib", to_gib(m.weights)},
                {"gradients_gib", to_gib(m.gradients)},
                {"optimizer_gib", to_gib(m.optimizer)},
                {"activations_gib", to_gib(m.activations)},
                {"fp8_buffers_gib", to_gib(m.fp8_buffers)},
                {"workspace_gib", to_gib(m.workspace)},
                {"reserved_gib", to_gib(m.reserved)},
                {"step_transient_gib", to_gib(m.step_transient)},
                {"total_gib", to_gib(m.total())},
                {"capacity_gib", to_gib(capacity)},
                {"inflight_microbatches", m.inflight_microbatches},
                {"host_per_node_gib", to_gib(m.host)}};
}


// One CSV cell: quoted when it holds a comma, a quote or a line break (RFC 4180).
std::string csv_cell(const std::string& v) {
    if (v.find_first_of(",\"\n") == std::string::npos) return v;
    std::string s = "\"";
    for (char ch : v) s += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return s + "\"";
}

// A plan object's leaves as (dotted path, text): strings as they are, null as an empty cell.
void flatten(const json& j, const std::string& prefix, std::vector<std::pair<std::string, std::string>>& out) {
    for (auto it = j.begin(); it != j.end(); ++it) {
        const std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
        if (it->is_object())
            flatten(*it, key, out);
        else if (it->is_string())
            out.emplace_back(key, it->get<std::string>());
        else if (it->is_null())
            out.emplace_back(key, "");
        else
            out.emplace_back(key, it->dump());
    }
}

// What a reader looks at first leads (rank, name, GPUs and layout, then README's contract
// figures); the other columns follow in their JSON (alphabetical) order.
std::size_t lead_position(const std::string& k) {
    static const std::vector<std::string> kLead{"rank",
                                                "recommended",
                                                "tied_with_best",
                                                "name",
                                                "num_gpus",
                                                "tp",
                                                "pp",
                                                "vp",
                                                "cp",
                                                "dp",
                                                "sequence_parallel",
                                                "sharding",
                                                "recompute",
                                                "micro_batch",
                                                "grad_accum",
                                                "fits",
                                                "memory_per_gpu_gib",
                                                "days_to_train",
                                                "days_to_train_p10",
                                                "days_to_train_p90",
                                                "expected_days",
                                                "gpu_hours",
                                                "cost",
                                                "cost_p10",
                                                "cost_p90",
                                                "expected_cost",
                                                "currency",
                                                "tokens_per_s_per_gpu",
                                                "mfu",
                                                "step_time_s"};
    const auto it = std::find(kLead.begin(), kLead.end(), k);
    return it == kLead.end() ? kLead.size() : static_cast<std::size_t>(it - kLead.begin());
}

// fmt::format with the format string looked up in the output's language (lang.hpp): the English
// string is the key, so English output is unchanged.
template <class... Args> std::string trf(const Translator& tr, std::string_view f, Args&&... args) {
    return fmt::format(fmt::runtime(tr(f)), std::forward<Args>(args)...);
}

// " to fine-tune (qlora)" after the token count of a fine-tune's days; nothing for pretraining.
std::string days_label(const model::Plan& plan, const Translator& tr) {
    if (plan.training.method == model::Method::pretrain) return {};
    return trf(tr, " to fine-tune ({})", model::to_string(plan.training.method));
}

// Why the expected wall clock is not estimated, or "" when it is: the run model is first order
// in (checkpoint interval, restart) / (time between interruptions) and says nothing when the
// cluster is interrupted more often than that (sim/run/run_model.hpp first_order_valid).

std::string expected_invalid_reason(const RunEstimate& e, const Translator& tr = Translator()) {
    if (e.run.first_order_valid) return {};
    return trf(tr, "the cluster is interrupted every {:.3g} s on average (failures{}), not longer than a "
                       "checkpoint interval ({:.3g} s) or a restart ({:.3g} s): the run would not progress as "
                       "modelled, so no expected wall clock is given (run.gpu_mtbf, run.node_mtbf)",
                       e.run.interruption_interval_s, e.run.preemption_interval_s > 0 ? tr(", preemptions") : "",
                       e.run.checkpoint_interval_s, e.run.restart_s + e.run.preemption_wait_s);
}

std::string money(double v, const std::string& cur) {
    if (v >= 1e6) return fmt::format("{:.2f} M {}", v / 1e6, cur);
    if (v >= 1e3) return fmt::format("{:.1f} k {}", v / 1e3, cur);
    return fmt::format("{:.2f} {}", v, cur);
}

// How the money above is billed: units, the unused part of the last unit or term, the expected
// wall clock's bill, and the cheapest way of paying the pricing lists (sim/billing.hpp).
std::string billing_lines(const RunEstimate& e, const Translator& tr) {
    if (!e.priced) return {};
    const auto& b = e.bill;
    std::string s =
        trf(tr, "  billed: {} {:.6g} {}s ({}{}), {:.1f}% of it unused; pro-rated {}\n",
                    tr(model::to_string(b.commitment)), b.billed_units, tr(b.unit), model::to_string(e.pricing.basis),
                    e.pricing.basis == model::PriceBasis::machine_month
                        ? std::string()
                        : trf(tr, " per {}", tr(model::to_string(e.pricing.increment))),
                    100 * b.unused_fraction, money(b.cost_prorated, e.currency));
    if (const auto why = expected_invalid_reason(e, tr); !why.empty())
        return s + trf(tr, "  ** expected wall clock: NOT ESTIMATED: {}\n", why);
    s += trf(tr,
        "  expected wall clock {:.1f} d (slowdowns, stragglers, checkpoints, failures, planned stops{}, restarts): {} billed",
        e.expected_days, e.run.preemption_interval_s > 0 ? tr(", preemptions") : "", money(e.expected_cost, e.currency));
    if (e.billing_options.size() > 1) {
        const auto& c = e.billing_options[e.cheapest_option];
        s += trf(tr, "; cheapest listed option: {} at {} ({:.1f} d, {:.1f}% unused)",
                         tr(model::to_string(c.bill.commitment)), money(c.bill.cost, e.currency), c.expected_days,
                         100 * c.bill.unused_fraction);
    }
    return s + "\n";
}

// "  energy: 58.3 MWh at PUE 1.40 (avg 6.6 kW; 520 W per GPU), 40.8 k CNY, 23.1 t CO2, 1.2 kWh per M tokens"
std::string energy_line(const RunEstimate& e, const Translator& tr) {
    if (!e.energy) return trf(tr, "  energy: unknown ({})\n", e.energy_note);
    if (!e.run.first_order_valid)
        return std::string(tr("  energy: not estimated (it is taken over the expected wall clock, which is not)\n"));
    const auto& en = *e.energy;
    const std::string amount =
        en.kwh >= 1e3 ? fmt::format("{:.1f} MWh", en.kwh / 1e3) : fmt::format("{:.1f} kWh", en.kwh);
    return trf(tr,
        "  energy: {} at PUE {:.2f} over the expected {:.1f} d (avg {:.1f} kW; {:.0f} W per GPU), {}, {}, "
        "{:.3g} kWh per M tokens\n",
        amount, en.pue, en.hours / 24.0, en.facility_power_kw, en.gpu_power_w,
        en.cost ? money(*en.cost, en.currency) : std::string(tr("no electricity price (energy.price)")),
        en.co2_kg ? fmt::format("{:.1f} t CO2", *en.co2_kg / 1e3)
                  : std::string(tr("no grid intensity (energy.grid_intensity)")),
        en.kwh_per_million_tokens);
}

std::string layout(const model::Plan& p) {
    const auto& q = p.parallel;
    std::string s = fmt::format("tp{} pp{}", q.tp, q.pp);
    if (q.vp > 1) s += fmt::format(" vp{}", q.vp);
    if (q.cp > 1) s += fmt::format(" cp{}", q.cp);
    s += fmt::format(" dp{}", q.dp);
    if (q.sequence_parallel) s += " sp";
    return s;
}

// Without a price every money figure is unknown: null, with its band, never 0.
void null_money_without_price(json& j, const RunEstimate& e) {
    if (e.priced) return;
    for (const char* k : {"price_per_gpu_hour", "cost", "expected_cost", "cost_per_million_tokens", "cost_prorated",
                          "billed_units", "unused_fraction", "billing", "cheapest_billing"}) {
        j[k] = nullptr;
        for (const char* band : {"_p10", "_p90"})
            if (j.contains(std::string(k) + band)) j[std::string(k) + band] = nullptr;
    }
}

// The run's electricity (energy.hpp): null, never 0, when unknown (no power section in the
// profile, not simulated, no electricity price, no grid intensity).
void energy_fields(json& j, const model::Plan& plan, const RunEstimate& e) {
    const auto& en = e.energy;
    auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
    j["pue"] = plan.energy.pue;
    j["energy_kwh"] = en ? json(en->kwh) : json(nullptr);
    j["energy_kwh_per_million_tokens"] = en ? json(en->kwh_per_million_tokens) : json(nullptr);
    j["avg_power_w_per_gpu"] = en ? json(en->gpu_power_w) : json(nullptr);
    j["facility_power_kw"] = en ? json(en->facility_power_kw) : json(nullptr);
    j["energy_cost"] = en ? opt(en->cost) : json(nullptr);
    j["energy_currency"] = plan.energy.currency.value_or(plan.pricing.currency);
    j["co2_kg"] = en ? opt(en->co2_kg) : json(nullptr);
    if (!en) j["energy_note"] = e.energy_note.empty() ? std::string("not simulated") : e.energy_note;
    j["gpu_time_per_step"] = e.gpu_time ? json{{"compute_busy_s", e.gpu_time->compute_s},
                                               {"comm_busy_s", e.gpu_time->comm_s},
                                               {"idle_s", e.gpu_time->idle_s}}
                                        : json(nullptr); // not simulated: unknown, as every energy field
}

// The stack profile a plan runs with (parallel.stack / --stack): its name, file and factors; null
// without one.
json stack_json(const model::Plan& plan) {
    if (!plan.stack) return nullptr;
    const auto& st = *plan.stack;
    json factors = json::object();
    for (const auto& spec : model::stack_param_specs())
        factors[std::string(spec.name)] = st.factors[static_cast<std::size_t>(spec.param)];
    return json{{"name", st.name}, {"file", st.source_file}, {"fitted", st.fitted}, {"runs", st.runs.size()},
                {"factors", factors}};
}

json plan_json_priced(const model::Plan& plan, const RunEstimate& e) {
    const auto& p = plan.parallel;
    json j{{"name", e.name},
           {"fits", e.fits},
           {"memory_tight", e.memory_tight},
           {"memory_free_gib", to_gib(e.capacity - e.memory.total())},
           {"memory_per_gpu_gib", to_gib(e.memory.total())},
           {"memory", memory_json(e.memory, e.capacity)},
           {"currency", e.currency},
           {"price_per_gpu_hour", e.price_per_gpu_hour},
           {"num_gpus", plan.num_gpus()},
           {"gpu", plan.hardware.id},
           {"profile_provenance", model::to_string(plan.hardware.provenance)},
           {"model", plan.model.name},
           {"precision", model::to_string(plan.precision)},
           {"tp", p.tp},
           {"pp", p.pp},
           {"vp", p.vp},
           {"cp", p.cp},
           {"dp", p.dp},
           {"sequence_parallel", p.sequence_parallel},
           {"sharding", model::to_string(p.sharding)},
           {"recompute", model::to_string(p.recompute)},
           {"offload", model::to_string(p.offload)},
           {"recompute_layers", model::full_recompute_layers(plan)},
           {"framework", p.framework.empty() ? nlohmann::json(nullptr) : nlohmann::json(p.framework)},
           // The stack the figures model: the written framework's profile, or a well-tuned
           // Megatron-Core stack when none is written.
           {"assumed_stack", p.framework.empty() ? std::string("Megatron-Core defaults (no framework written)")
                                                 : model::framework_profile(p.framework).why},
           {"stack_profile", stack_json(plan)},
           {"host_dispatch", model::to_string(p.host_dispatch)},
           {"host_cpu_speed", plan.hardware.host_cpu_speed},
           {"micro_batch", plan.training.micro_batch},
           {"global_batch", plan.training.global_batch},
           {"grad_accum", plan.grad_accum()},
           {"seq_len", plan.training.seq_len},
           {"tokens", plan.training.tokens},
           {"model_flops_per_token_causal", e.model_flops_per_token_causal},
           {"model_flops_per_token_noncausal", e.model_flops_per_token_noncausal},
           {"mfu_peak_tflops", e.peak_tflops}};
    // What is trained (training.method; docs/model.md "Fine-tuning"): for a fine-tune,
    // days_to_train is the days to fine-tune on `tokens` (epochs x dataset_tokens).
    const auto& t = plan.training;
    j["method"] = model::to_string(t.method);
    if (t.dataset_tokens > 0) {
        j["epochs"] = t.epochs;
        j["dataset_tokens"] = t.dataset_tokens;
    }
    if (model::frozen_base(t)) {
        j["lora_rank"] = t.lora_rank;
        j["lora_targets"] = model::lora_target_names(t.lora_targets);
        j["base_format"] = model::to_string(t.base_format);
        j["trainable_params"] = plan.model.layers * model::trainable_params_per_layer(plan);
    }
    if (!p.master_weights) j["master_weights"] = false;
    if (p.optimizer_in_backward) j["optimizer_in_backward"] = true;
    if (p.paged_optimizer) j["paged_optimizer"] = true;
    if (plan.parallel.offload != model::Offload::none) {
        j["host_memory_per_node_gib"] = to_gib(e.host_needed);
        j["host_capacity_gib"] = to_gib(e.host_capacity);
    }
    if (!e.fits || !e.step) {
        for (const char* k :
             {"step_time_s", "tokens_per_s", "tokens_per_s_per_gpu", "model_tflops_per_gpu", "mfu", "mfu_noncausal",
              "mfu_vs_bf16_peak", "days_to_train", "expected_days", "gpu_hours", "cost", "expected_cost",
              "cost_per_million_tokens", "cost_prorated", "billed_units", "unused_fraction"})
            j[k] = nullptr;
        j["reason"] = no_fit_reason(plan, e);
        return j;
    }
    j["step_time_s"] = e.step_time_s;
    if (e.stack_discrepancy != 1.0 || e.stack_discrepancy_sd_log > 0)
        j["stack_discrepancy"] = json{{"throughput_factor", e.stack_discrepancy}, {"sd_log", e.stack_discrepancy_sd_log}};
    j["tokens_per_s"] = e.tokens_per_s;
    j["tokens_per_s_per_gpu"] = e.tokens_per_s_per_gpu;
    j["model_tflops_per_gpu"] = e.model_tflops_per_gpu;
    j["mfu"] = e.mfu;
    j["mfu_noncausal"] = e.mfu_noncausal;
    j["mfu_vs_bf16_peak"] = e.mfu_vs_bf16_peak;
    j["steps"] = e.steps;
    j["days_to_train"] = e.days_to_train;
    j["expected_days"] = e.expected_days;
    j["run"] = json{
        {"checkpoint_bytes", e.run.checkpoint_bytes},
        {"checkpoint_write_s", e.run.checkpoint_write_s},
        {"cluster_mtbf_s", e.run.cluster_mtbf_s},
        {"preemption_interval_s", e.run.preemption_interval_s > 0 ? json(e.run.preemption_interval_s) : json(nullptr)},
        {"interruption_interval_s", e.run.interruption_interval_s},
        {"planned_interval_s", e.run.planned_interval_s > 0 ? json(e.run.planned_interval_s) : json(nullptr)},
        {"stretch", e.run.stretch},
        {"stragglers", e.run.stragglers},
        {"checkpoint_interval_s", e.run.checkpoint_interval_s},
        {"restart_s", e.run.restart_s},
        {"preemption_wait_s", e.run.preemption_wait_s},
        {"overhead_factor", e.run.overhead_factor},
        {"expected_failures", e.run.expected_failures},
        {"expected_preemptions", e.run.expected_preemptions},
        {"expected_planned", e.run.expected_planned},
        {"first_order_valid", e.run.first_order_valid}};
    j["gpu_hours"] = e.gpu_hours;
    // Money as billed (sim/billing.hpp); null without a price (null_money_without_price).
    j["cost"] = e.cost;
    j["cost_prorated"] = e.bill.cost_prorated;
    j["billed_units"] = e.bill.billed_units;
    j["unused_fraction"] = e.bill.unused_fraction;
    j["expected_cost"] = e.expected_cost;
    j["cost_per_million_tokens"] = e.cost_per_million_tokens;
    if (e.priced) {
        auto bill_json = [](const Bill& b) {
            return json{{"commitment", model::to_string(b.commitment)},
                        {"cost", b.cost},
                        {"cost_prorated", b.cost_prorated},
                        {"billed_units", b.billed_units},
                        {"unit", b.unit},
                        {"billed_hours", b.billed_hours},
                        {"used_hours", b.used_hours},
                        {"unused_fraction", b.unused_fraction},
                        {"rate_after_discount", b.rate_after_discount}};
        };
        json options = json::array();
        for (const auto& o : e.billing_options) {
            auto oj = bill_json(o.bill);
            oj["expected_days"] = o.expected_days;
            options.push_back(oj);
        }
        j["billing"] = json{{"basis", model::to_string(e.pricing.basis)},
                            {"increment", model::to_string(e.pricing.increment)},
                            {"steady", bill_json(e.bill)},
                            {"expected", bill_json(e.expected_bill)},
                            {"options", options}};
        j["cheapest_billing"] = options.empty() ? json(nullptr) : options[e.cheapest_option];
    }
    j["breakdown"] = breakdown_json(e.step->breakdown);
    if (e.offload) {
        const auto& o = *e.offload;
        j["offload_time"] = json{{"shard_params", o.shard_params},
                                 {"pcie_bytes_per_gpu", o.pcie_bytes},
                                 {"grad_to_host_s", o.grad_to_host_s},
                                 {"grad_exposed_s", o.grad_exposed_s},
                                 {"cpu_adam_s", o.cpu_adam_s},
                                 {"params_to_gpu_s", o.params_to_gpu_s},
                                 {"param_fetch_s", o.param_fetch_s},
                                 {"param_fetch_exposed_s", o.param_fetch_exposed_s},
                                 {"gpu_optimizer_removed_s", o.gpu_optimizer_s},
                                 {"added_s", o.added_s},
                                 {"host_per_node_gib", to_gib(Bytes(o.host_bytes_per_node))},
                                 {"host_capacity_gib", to_gib(Bytes(o.host_capacity))}};
    }
    j["critical_stage"] = e.step->critical_stage;
    j["simulated_ranks"] = e.step->simulated_ranks;
    j["simulated_ops"] = e.step->ops;
    if (e.band) {
        // p10 / p90 beside each contract field (docs/trust.md): time-like figures scale with the
        // band's time factors, throughputs with their inverse.
        const auto& b = *e.band;
        auto time_like = [&](const char* k, double v) {
            j[std::string(k) + "_p10"] = v * b.time_p10;
            j[std::string(k) + "_p90"] = v * b.time_p90;
        };
        auto rate_like = [&](const char* k, double v) {
            j[std::string(k) + "_p10"] = v / b.time_p90;
            j[std::string(k) + "_p90"] = v / b.time_p10;
        };
        time_like("step_time_s", e.step_time_s);
        rate_like("tokens_per_s", e.tokens_per_s);
        rate_like("tokens_per_s_per_gpu", e.tokens_per_s_per_gpu);
        rate_like("mfu", e.mfu);
        time_like("days_to_train", e.days_to_train);
        time_like("expected_days", e.expected_days);
        time_like("gpu_hours", e.gpu_hours);
        for (const char* k : {"cost", "expected_cost", "cost_per_million_tokens"})
            for (const char* end : {"_p10", "_p90"}) j[std::string(k) + end] = nullptr; // unknown without a price
        if (e.priced) {
            // Money at the band's ends is billed like the prediction: whole units of the wall clock.
            for (const auto& [k, f] : {std::pair{"_p10", b.time_p10}, std::pair{"_p90", b.time_p90}}) {
                const double cost = e.bill_for_days(e.days_to_train * f).cost;
                j[std::string("cost") + k] = cost;
                j[std::string("expected_cost") + k] = e.bill_for_days(e.expected_days * f).cost;
                j[std::string("cost_per_million_tokens") + k] = cost / (plan.training.tokens / 1e6);
            }
        }
        j["band"] = json{{"basis", b.basis}, {"rows", b.rows}, {"regime", b.regime}, {"p50_factor", b.time_p50}};
        j["out_of_domain"] = b.out_of_domain;
    }
    return j;
}

} // namespace

json plan_json(const model::Plan& plan, const RunEstimate& e) {
    json j = plan_json_priced(plan, e);
    null_money_without_price(j, e);
    energy_fields(j, plan, e);
    // No expected figure where the run model does not hold (run.first_order_valid false): null,
    // as money is without a price, so CSV and HTML show no number either; the reason beside.
    if (e.step && e.fits && !e.run.first_order_valid) {
        for (const char* k : {"expected_days", "expected_cost"})
            for (const char* end : {"", "_p10", "_p90"})
                if (j.contains(std::string(k) + end)) j[std::string(k) + end] = nullptr;
        j["expected_days_not_estimated"] = expected_invalid_reason(e);
    }
    return j;
}

std::string no_fit_reason(const model::Plan& plan, const RunEstimate& e, const Translator& tr) {
    return e.memory.total() > e.capacity || plan.parallel.offload == model::Offload::none
               ? trf(tr, "needs {:.1f} GiB per GPU on pipeline stage {}, the GPU has {:.1f} GiB",
                     to_gib(e.memory.total()), e.memory.stage, to_gib(e.capacity))
               : trf(tr, "its offloaded state needs {:.1f} GiB of host memory per node, the node has {:.1f} GiB",
                     to_gib(e.host_needed), to_gib(e.host_capacity));
}

json results_json(const std::vector<PlanResult>& results) {
    // A plan that does not fit says what would make it fit (memory figures; fit_advice.hpp).
    auto one = [](const PlanResult& r) {
        auto j = plan_json(*r.plan, r.estimate);
        if (!r.estimate.fits && model::check_layout(*r.plan).empty())
            j["fit_advice"] = fit_advice_json(fit_advice({*r.plan}, kMemoryHeadroomFraction, false));
        return j;
    };
    if (results.size() == 1) return one(results.front());
    json arr = json::array();
    for (const auto& r : results) arr.push_back(one(r));
    return json{{"plans", arr}};
}

std::string plans_csv(const json& plans) {
    // Columns: the union over the plans (a plan that does not fit, or one without a band, has
    // fewer fields), lead columns first, the rest in order of first appearance.
    std::vector<std::vector<std::pair<std::string, std::string>>> rows;
    std::vector<std::string> columns;
    for (const auto& pj : plans) {
        auto& cells = rows.emplace_back();
        flatten(pj, "", cells);
        for (const auto& [k, v] : cells)
            if (std::find(columns.begin(), columns.end(), k) == columns.end()) columns.push_back(k);
    }
    std::stable_sort(columns.begin(), columns.end(),
                     [](const std::string& a, const std::string& b) { return lead_position(a) < lead_position(b); });
    std::string out;
    for (std::size_t i = 0; i < columns.size(); ++i) {
        if (i > 0) out += ',';
        out += csv_cell(columns[i]);
    }
    out += '\n';
    for (const auto& cells : rows) {
        for (std::size_t i = 0; i < columns.size(); ++i) {
            if (i > 0) out += ',';
            const auto it =
                std::find_if(cells.begin(), cells.end(), [&](const auto& c) { return c.first == columns[i]; });
            if (it != cells.end()) out += csv_cell(it->second);
        }
        out += '\n';
    }
    return out;
}

std::string csv_line(const std::vector<std::string>& columns, const json& row) {
    std::vector<std::pair<std::string, std::string>> cells;
    if (row.is_object()) flatten(row, "", cells);
    std::string out;
    for (std::size_t i = 0; i < columns.size(); ++i) {
        if (i > 0) out += ',';
        if (row.is_null()) {
            out += csv_cell(columns[i]);
            continue;
        }
        const auto it = std::find_if(cells.begin(), cells.end(), [&](const auto& c) { return c.first == columns[i]; });
        if (it != cells.end()) out += csv_cell(it->second);
    }
    return out + '\n';
}

std::string format_plan(const model::Plan& plan, const RunEstimate& e, const Translator& tr) {
    std::string s;
    s += fmt::format("== {} ==\n", e.name);
    s += trf(tr, "  {} on {} x {} ({}, profile: {}), {} | {} | {} sharding, recompute {}\n", plan.model.name,
                     plan.num_gpus(), plan.hardware.name, model::to_string(plan.precision),
                     model::to_string(plan.hardware.provenance), layout(plan),
                     fmt::format("gbs {} x mbs {} x seq {}", plan.training.global_batch, plan.training.micro_batch,
                                 plan.training.seq_len),
                     model::to_string(plan.parallel.sharding), model::recompute_label(plan));
    if (plan.stack)
        s += trf(tr, "  stack profile: {} ({}; {}): the hardware profile's efficiencies and host costs as this "
                         "stack reaches them\n",
                         plan.stack->name, plan.stack->source_file.empty() ? tr("in memory") : plan.stack->source_file,
                         plan.stack->fitted ? trf(tr, "fitted on {} runs", plan.stack->runs.size())
                                            : std::string(tr("written by hand")));
    if (!plan.parallel.framework.empty())
        s += trf(tr, "  framework: {} (its behaviours fill the properties the scenario does not write)\n",
                         plan.parallel.framework);
    else
        s += tr("  framework: none written: a well-tuned Megatron-Core stack is assumed (parallel.framework)\n");
    const auto& m = e.memory;
    s += trf(tr, "  memory per GPU (stage {}): {:.1f} GiB of {:.1f} GiB{}\n", m.stage, to_gib(m.total()),
                     to_gib(e.capacity),
                     !e.fits           ? std::string(tr("  ** DOES NOT FIT **"))
                     : e.memory_tight ? trf(tr, "  (tight: {:.1f} GiB free, less than the {:.0f}% an allocator "
                                                     "needs against fragmentation)",
                                                     to_gib(e.capacity - m.total()), 100 * kMemoryHeadroomFraction)
                                       : std::string());
    s += trf(tr, "    weights {:.1f} | grads {:.1f} | optimizer {:.1f} | activations {:.1f} ({} in flight) | "
                     "fp8 {:.1f} | workspace {:.2f} | reserved {:.1f} GiB\n",
                     to_gib(m.weights), to_gib(m.gradients), to_gib(m.optimizer), to_gib(m.activations),
                     m.inflight_microbatches, to_gib(m.fp8_buffers), to_gib(m.workspace), to_gib(m.reserved));
    if (m.step_transient.value() > 0)
        s += trf(tr, "    optimizer step: {:.1f} GiB of temporaries once the activations are freed ({}){}\n",
                 to_gib(m.step_transient),
                 plan.parallel.paged_optimizer ? tr("the paged optimizer's state, paged back in")
                                               : tr("FP16_Optimizer's FP32 gradient copies and their flat buffer"),
                 m.step_transient > m.activations ? tr("; this phase sets the peak") : "");
    if (plan.parallel.offload != model::Offload::none)
        s += trf(tr, "  CPU offload ({}): {:.1f} GiB of host memory per node of {:.1f} GiB{}\n",
                         model::to_string(plan.parallel.offload), to_gib(e.host_needed), to_gib(e.host_capacity),
                         e.host_needed > e.host_capacity ? tr("  ** DOES NOT FIT **") : "");
    if (!e.step) {
        s += tr("  not simulated: the plan does not fit in memory\n");
        return s;
    }
    const auto& b = e.step->breakdown;
    const double t = e.step->step_time.seconds(); // the GPU's simulated step (CPU offload adds to it)
    auto pct = [&](Time x) { return 100.0 * x.seconds() / t; };
    s += trf(tr, "  step time {:.3f} s (critical stage {}{}):\n", e.step_time_s, e.step->critical_stage,
                     e.offload ? trf(tr, "; the GPU's {:.3f} s plus CPU offload", t) : std::string());
    s += trf(tr, "    compute {:.3f} s ({:.1f}%: fwd {:.3f}, bwd {:.3f}, recompute {:.3f}) | optimizer {:.3f} s\n",
                     b.compute().seconds(), pct(b.compute()), b.forward.seconds(), b.backward.seconds(),
                     b.recompute.seconds(), b.optimizer.seconds());
    s += trf(tr, "    exposed comm: TP {:.3f} s ({:.1f}%) | CP {:.3f} | DP {:.3f} ({:.1f}%) | PP {:.3f} | "
                     "pipeline bubble {:.3f} s ({:.1f}%)\n",
                     b.tp_exposed.seconds(), pct(b.tp_exposed), b.cp_exposed.seconds(), b.dp_exposed.seconds(),
                     pct(b.dp_exposed), b.pp_exposed.seconds(), b.bubble.seconds(), pct(b.bubble));
    s += trf(tr,
        "    host-bound {:.3f} s ({:.1f}%: the GPU waiting for the host to issue kernels; host busy {:.3f} s, "
        "dispatch '{}', parallel.host_dispatch; host CPU at {:.2f}x the reference, profile node.host_cpu_speed)\n",
        b.host_bound.seconds(), pct(b.host_bound), e.step->host_busy.seconds(),
        model::to_string(plan.parallel.host_dispatch), plan.hardware.host_cpu_speed);
    if (e.offload) {
        const auto& o = *e.offload;
        s += trf(tr,
            "    CPU offload: +{:.3f} s per step (GPU optimizer {:.3f} s removed; gradients to host {:.3f} s, "
            "{:.3f} exposed past backward; CPU Adam {:.3f} s for the node; parameters back {:.3f} s{})\n",
            o.added_s + o.gpu_optimizer_s, o.gpu_optimizer_s, o.grad_to_host_s, o.grad_exposed_s, o.cpu_adam_s,
            o.params_to_gpu_s,
            o.param_fetch_s > 0
                ? trf(tr, "; parameter fetches {:.3f} s, {:.3f} exposed", o.param_fetch_s, o.param_fetch_exposed_s)
                : std::string());
    }
    s += trf(tr, "  throughput {:.0f} tokens/s ({:.0f} per GPU) | {:.0f} model TFLOP/s per GPU | "
                     "MFU {:.1f}% of {:.0f} TFLOP/s ({} peak, causal FLOPs; non-causal {:.1f}%)\n",
                     e.tokens_per_s, e.tokens_per_s_per_gpu, e.model_tflops_per_gpu, 100 * e.mfu, e.peak_tflops,
                     model::to_string(plan.precision), 100 * e.mfu_noncausal);
    if (!e.band) {
        s += trf(tr, "  {} tokens{}: {:.1f} days | {:.0f} GPU-hours | {}\n", model::format_count(plan.training.tokens),
                 days_label(plan, tr),
                         e.days_to_train, e.gpu_hours,
                         !e.priced
                             ? std::string(tr("no price (pricing.rate)"))
                             : trf(tr, "{} at {:.2f} {}/GPU-h | {:.2f} {} per M tokens", money(e.cost, e.currency),
                                           e.price_per_gpu_hour, e.currency, e.cost_per_million_tokens, e.currency));
        if (!e.priced && !e.run.first_order_valid)
            s += trf(tr, "  ** expected wall clock: NOT ESTIMATED: {}\n", expected_invalid_reason(e, tr));
        s += billing_lines(e, tr);
        s += energy_line(e, tr);
        return s;
    }
    const auto& band = *e.band;
    s += trf(tr,
        "  {} tokens{}: {:.1f} d ({:.1f}-{:.1f}) | {:.0f} GPU-hours ({:.0f}-{:.0f}) | {}\n",
        model::format_count(plan.training.tokens), days_label(plan, tr),
        e.days_to_train, e.days_to_train * band.time_p10, e.days_to_train * band.time_p90, e.gpu_hours,
        e.gpu_hours * band.time_p10, e.gpu_hours * band.time_p90,
        !e.priced ? std::string(tr("no price (pricing.rate)"))
                  : trf(tr, "{} ({}-{}) at {:.2f} {}/GPU-h | {:.2f} {} per M tokens", money(e.cost, e.currency),
                                money(e.bill_for_days(e.days_to_train * band.time_p10).cost, e.currency),
                                money(e.bill_for_days(e.days_to_train * band.time_p90).cost, e.currency),
                                e.price_per_gpu_hour, e.currency, e.cost_per_million_tokens, e.currency));
    if (!e.priced && !e.run.first_order_valid)
        s += trf(tr, "  ** expected wall clock: NOT ESTIMATED: {}\n", expected_invalid_reason(e, tr));
    s += billing_lines(e, tr);
    s += energy_line(e, tr);
    s += trf(tr, "  80% band (p10-p90, docs/trust.md): {}; regime {}\n", band.basis, band.regime);
    for (const auto& why : band.out_of_domain) s += trf(tr, "  ** outside the evidence: {}\n", why);
    return s;
}

std::string format_comparison(const std::vector<PlanResult>& results, std::size_t width_limit, const Translator& tr) {
    std::vector<std::string> head{std::string(tr("plan"))};
    std::vector<std::vector<std::string>> rows;
    auto row = [&](std::string_view label, auto&& f) {
        std::vector<std::string> r{std::string(tr(label))};
        for (const auto& x : results) r.push_back(f(*x.plan, x.estimate));
        rows.push_back(std::move(r));
    };
    for (const auto& x : results) head.push_back(x.estimate.name);
    auto ok = [](const RunEstimate& e) { return e.fits && e.step.has_value(); };
    row("GPUs", [](const model::Plan& p, const RunEstimate&) { return fmt::format("{} x {}", p.num_gpus(), p.hardware.id); });
    row("precision", [](const model::Plan& p, const RunEstimate&) { return model::to_string(p.precision); });
    row("layout", [](const model::Plan& p, const RunEstimate&) { return layout(p); });
    row("memory/GPU", [&](const model::Plan&, const RunEstimate& e) {
        return fmt::format("{:.1f}/{:.1f} GiB{}", to_gib(e.memory.total()), to_gib(e.capacity),
                           !e.fits ? tr(" NO FIT") : e.memory_tight ? tr(" tight") : "");
    });
    row("step time", [&](const model::Plan&, const RunEstimate& e) { return ok(e) ? fmt::format("{:.3f} s", e.step_time_s) : std::string("-"); });
    row("tokens/s/GPU", [&](const model::Plan&, const RunEstimate& e) { return ok(e) ? fmt::format("{:.0f}", e.tokens_per_s_per_gpu) : std::string("-"); });
    row("MFU", [&](const model::Plan&, const RunEstimate& e) { return ok(e) ? fmt::format("{:.1f}%", 100 * e.mfu) : std::string("-"); });
    row("days", [&](const model::Plan&, const RunEstimate& e) { return ok(e) ? fmt::format("{:.1f}", e.days_to_train) : std::string("-"); });
    row("GPU-hours", [&](const model::Plan&, const RunEstimate& e) { return ok(e) ? fmt::format("{:.0f}", e.gpu_hours) : std::string("-"); });
    row("cost", [&](const model::Plan&, const RunEstimate& e) {
        return !ok(e) ? std::string("-") : !e.priced ? std::string(tr("no price")) : money(e.cost, e.currency);
    });
    row("per M tokens", [&](const model::Plan&, const RunEstimate& e) {
        return !ok(e)      ? std::string("-")
               : !e.priced ? std::string(tr("no price"))
                           : fmt::format("{:.2f} {}", e.cost_per_million_tokens, e.currency);
    });
    // The electricity rows only where some plan's profile gives its power (energy.hpp).
    const bool any_energy =
        std::any_of(results.begin(), results.end(), [](const PlanResult& r) { return r.estimate.energy.has_value(); });
    if (any_energy) {
        row("energy", [&](const model::Plan&, const RunEstimate& e) {
            return !ok(e) || !e.energy    ? std::string("-")
                   : e.energy->kwh >= 1e3 ? fmt::format("{:.1f} MWh", e.energy->kwh / 1e3)
                                          : fmt::format("{:.1f} kWh", e.energy->kwh);
        });
        row("avg power", [&](const model::Plan&, const RunEstimate& e) {
            return !ok(e) || !e.energy ? std::string("-") : fmt::format("{:.2f} kW", e.energy->facility_power_kw);
        });
        row("electricity", [&](const model::Plan&, const RunEstimate& e) {
            return !ok(e) || !e.energy ? std::string("-")
                   : !e.energy->cost   ? std::string(tr("no price"))
                                       : money(*e.energy->cost, e.energy->currency);
        });
        row("CO2", [&](const model::Plan&, const RunEstimate& e) {
            return !ok(e) || !e.energy || !e.energy->co2_kg ? std::string("-")
                                                            : fmt::format("{:.1f} t", *e.energy->co2_kg / 1e3);
        });
    }
    std::vector<std::size_t> width(head.size(), 0);
    for (std::size_t c = 0; c < head.size(); ++c) {
        width[c] = display_width(head[c]);
        for (const auto& r : rows) width[c] = std::max(width[c], display_width(r[c]));
    }
    // Past the width limit (the terminal's), the plans wrap: blocks of as many plan columns as fit,
    // each headed by the row labels again, separated by a blank line ("plans 1-3 of 12:").
    std::vector<std::pair<std::size_t, std::size_t>> blocks; // [first, last) plan columns
    for (std::size_t c = 1; c < head.size();) {
        std::size_t used = width[0], end = c;
        while (end < head.size() && (end == c || used + 2 + width[end] <= width_limit)) used += 2 + width[end++];
        blocks.emplace_back(c, end);
        c = end;
    }
    std::string s;
    auto line = [&](const std::vector<std::string>& cells, std::size_t first, std::size_t last) {
        // Padded by display width, not bytes: a CJK character takes two columns (lang.hpp).
        s += cells[0] + std::string(width[0] - display_width(cells[0]), ' ');
        for (std::size_t c = first; c < last; ++c)
            s += "  " + std::string(width[c] - display_width(cells[c]), ' ') + cells[c];
        s += "\n";
    };
    for (std::size_t b = 0; b < blocks.size(); ++b) {
        const auto [first, last] = blocks[b];
        if (blocks.size() > 1)
            s += trf(tr, "{}{} of {}:\n", b == 0 ? "" : "\n",
                             last - first == 1 ? trf(tr, "plan {}", first)
                                               : trf(tr, "plans {}-{}", first, last - 1),
                             head.size() - 1);
        line(head, first, last);
        for (const auto& r : rows) line(r, first, last);
    }
    return s;
}

} // namespace trainsim::sim
