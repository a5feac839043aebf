#include "trainsim/sim/search/fit_advice.hpp"

#include "trainsim/model/accounting/layout.hpp"
#include "trainsim/model/accounting/memory_model.hpp"
#include "trainsim/model/core/text_format.hpp"
#include "trainsim/sim/search/plan_search.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <limits>

namespace trainsim::sim {

namespace {

// Memory and fit of one plan; `problem` set when its layout is not valid.
KnobTry try_plan(std::string knob, model::Plan plan, double headroom) {
    KnobTry k;
    k.knob = std::move(knob);
    if (const auto problems = model::check_layout(plan); !problems.empty()) {
        k.problem = problems.front().key + ": " + problems.front().message;
        k.plan = std::move(plan);
        return k;
    }
    const auto mb = model::peak_memory(plan);
    const Bytes cap = plan.hardware.hbm_capacity * (1.0 - headroom);
    k.memory_gib = model::to_gib(mb.total());
    k.capacity_gib = model::to_gib(cap);
    k.host_gib = model::to_gib(model::host_offload_bytes_per_node(plan));
    k.host_capacity_gib = model::to_gib(model::host_memory_per_node(plan));
    k.fits = model::fits_in_memory(plan, mb, cap);
    plan.name = fmt::format("{} GPUs {}", plan.num_gpus(), layout_label(plan));
    k.plan = std::move(plan);
    return k;
}

// A layout without pipelining: dp takes the pipeline's GPUs.
model::Plan without_pipeline(model::Plan p) {
    p.parallel.dp *= p.parallel.pp;
    p.parallel.pp = 1;
    p.parallel.vp = 1;
    return p;
}

// Whether two plans have the same values of every setting a knob turns.
bool same_knobs(const model::Plan& a, const model::Plan& b) {
    const auto& x = a.parallel;
    const auto& y = b.parallel;
    return x.tp == y.tp && x.pp == y.pp && x.vp == y.vp && x.cp == y.cp && x.dp == y.dp && x.sharding == y.sharding &&
           x.recompute == y.recompute && x.recompute_layers == y.recompute_layers && x.offload == y.offload &&
           a.training.micro_batch == b.training.micro_batch && a.training.method == b.training.method &&
           x.master_weights == y.master_weights && x.optimizer_state == y.optimizer_state &&
           x.optimizer_in_backward == y.optimizer_in_backward;
}

double memory_ratio(const model::Plan& p) {
    if (!model::check_layout(p).empty()) return std::numeric_limits<double>::infinity();
    return model::peak_memory(p).total() / p.hardware.hbm_capacity;
}

} // namespace

FitAdvice fit_advice(const std::vector<model::Plan>& candidates, double headroom, bool simulate) {
    FitAdvice a;
    double best = std::numeric_limits<double>::infinity();
    for (const auto& p : candidates) {
        const double r = memory_ratio(p);
        if (r < best) {
            best = r;
            a.closest = p;
        }
    }
    const auto& c = a.closest;
    a.closest_memory_gib = model::to_gib(model::peak_memory(c).total());
    a.capacity_gib = model::to_gib(c.hardware.hbm_capacity * (1.0 - headroom));

    auto full = [](model::Plan p) {
        p.parallel.recompute = model::Recompute::full;
        p.parallel.recompute_layers = 0;
        return p;
    };
    auto zero3 = [](model::Plan p) {
        p = without_pipeline(std::move(p));
        p.parallel.sharding = model::Sharding::zero3;
        return p;
    };
    auto mb1 = [](model::Plan p) {
        p.training.micro_batch = 1;
        return p;
    };
    auto offload_optimizer = [](model::Plan p) {
        if (p.parallel.sharding == model::Sharding::none) p.parallel.sharding = model::Sharding::zero1;
        p.parallel.offload = model::Offload::optimizer;
        return p;
    };
    auto offload_params = [&](model::Plan p) {
        p = zero3(std::move(p));
        p.parallel.offload = model::Offload::params;
        return p;
    };
    // A knob that changes nothing (the closest layout already has full recompute, a micro-batch
    // of 1, ...) is not advice: it is listed as already in the plan instead (issue #45).
    auto knob = [&](const char* what, const model::Plan& p) {
        if (same_knobs(p, c))
            a.already_in_plan.emplace_back(what);
        else
            a.knobs.push_back(try_plan(what, p, headroom));
    };
    knob("parallel.recompute: full", full(c));
    knob("parallel.sharding: zero3 (pp 1)", zero3(c));
    knob("training.micro_batch: 1", mb1(c));
    knob("parallel.offload: optimizer", offload_optimizer(c));
    knob("parallel.offload: params (zero3, pp 1)", offload_params(c));
    knob("all of them: zero3, full recompute, micro-batch 1, offload: params", offload_params(mb1(full(c))));
    if (c.training.method != model::Method::pretrain) {
        // A fine-tune may change what it trains and how it keeps the optimizer (docs/model.md
        // "Fine-tuning"): the full fine-tuning recipes' tricks, and adapters instead of every weight.
        auto int8 = [](model::Plan p) {
            p.parallel.optimizer_state = model::OptimizerState::int8;
            return p;
        };
        auto pure_bf16_in_bwd = [](model::Plan p) {
            p.parallel.master_weights = false;
            p.parallel.optimizer_state = model::OptimizerState::bf16;
            p.parallel.optimizer_in_backward = true;
            p.parallel.sharding = model::Sharding::none;
            p.training.global_batch = p.training.micro_batch * p.parallel.dp; // torchtune: no accumulation
            return p;
        };
        auto adapters = [](model::Plan p, model::Method method) {
            p.training.method = method;
            p.training.base_format = method == model::Method::qlora ? model::BaseFormat::nf4 : model::BaseFormat::bf16;
            if (p.parallel.sharding != model::Sharding::none && p.parallel.sharding != model::Sharding::dist_opt &&
                p.parallel.sharding != model::Sharding::zero1 && p.parallel.sharding != model::Sharding::zero2)
                p.parallel.sharding = model::Sharding::zero2;
            p.parallel.offload = model::Offload::none;
            p.parallel.optimizer_in_backward = false;
            return p;
        };
        knob("parallel.optimizer_state: 8bit (bitsandbytes Adam8bit)", int8(c));
        knob("master_weights: false, optimizer_state: bf16, optimizer_in_backward, no grad accumulation",
             pure_bf16_in_bwd(c));
        if (!model::frozen_base(c.training)) {
            knob("training.method: lora", adapters(c, model::Method::lora));
            if (c.parallel.recompute != model::Recompute::full)
                knob("training.method: lora, full recompute", full(adapters(c, model::Method::lora)));
        }
        if (c.training.method != model::Method::qlora)
            knob("training.method: qlora, full recompute", full(adapters(c, model::Method::qlora)));
    }

    // The fewest GPUs at which a GPU-only layout fits: the request doubled, up to 64x.
    SearchSpace space;
    model::Plan gpu_only = c;
    gpu_only.parallel.offload = model::Offload::none;
    for (int gpus = c.num_gpus() * 2; gpus <= c.num_gpus() * 64; gpus *= 2) {
        space.gpu_counts = {gpus};
        std::vector<model::Plan> all;
        try {
            all = enumerate_layouts(gpu_only, space);
        } catch (const SearchError&) {
            break; // not whole nodes: no larger count is either
        }
        const model::Plan* least = nullptr;
        double least_ratio = std::numeric_limits<double>::infinity();
        for (const auto& p : all) {
            if (!model::check_layout(p).empty()) continue;
            const auto mb = model::peak_memory(p);
            if (!model::fits_in_memory(p, mb, p.hardware.hbm_capacity * (1.0 - headroom))) continue;
            const double r = mb.total() / p.hardware.hbm_capacity;
            if (r < least_ratio) {
                least_ratio = r;
                least = &p;
            }
        }
        if (least != nullptr) {
            a.more_gpus = try_plan(fmt::format("{} GPUs", gpus), *least, headroom);
            break;
        }
    }
    if (simulate) {
        for (auto& k : a.knobs)
            if (k.fits) k.estimate = estimate_plan(k.plan);
        if (a.more_gpus) a.more_gpus->estimate = estimate_plan(a.more_gpus->plan);
    }
    return a;
}

namespace {

nlohmann::json knob_json(const KnobTry& k) {
    nlohmann::json j{{"knob", k.knob}, {"layout", layout_label(k.plan)}, {"num_gpus", k.plan.num_gpus()}};
    if (!k.problem.empty()) {
        j["valid"] = false;
        j["problem"] = k.problem;
        j["fits"] = false;
        return j;
    }
    j["valid"] = true;
    j["fits"] = k.fits;
    j["memory_gib"] = k.memory_gib;
    j["capacity_gib"] = k.capacity_gib;
    if (k.plan.parallel.offload != model::Offload::none) {
        j["host_gib"] = k.host_gib;
        j["host_capacity_gib"] = k.host_capacity_gib;
    }
    const bool sim = k.estimate && k.estimate->step;
    j["days_to_train"] = sim ? nlohmann::json(k.estimate->days_to_train) : nlohmann::json(nullptr);
    j["tokens_per_s_per_gpu"] = sim ? nlohmann::json(k.estimate->tokens_per_s_per_gpu) : nlohmann::json(nullptr);
    j["cost"] = sim && k.estimate->priced ? nlohmann::json(k.estimate->cost) : nlohmann::json(nullptr);
    return j;
}

template <class... Args> std::string trf(const Translator& tr, std::string_view f, Args&&... args) {
    return fmt::format(fmt::runtime(tr(f)), std::forward<Args>(args)...);
}

// The knob ("parallel.recompute: full"), the layout and a layout check's problem are scenario
// keys, ids and diagnostics: as in the JSON in every language.
std::string knob_text(const KnobTry& k, const Translator& tr) {
    if (!k.problem.empty()) return trf(tr, "  {:<62} not a valid layout: {}\n", k.knob, k.problem);
    std::string s = trf(tr, "  {:<62} {:6.1f} of {:.1f} GiB{}", k.knob, k.memory_gib, k.capacity_gib,
                        k.plan.parallel.offload != model::Offload::none
                            ? trf(tr, ", host {:.0f} of {:.0f} GiB", k.host_gib, k.host_capacity_gib)
                            : std::string());
    if (!k.fits) return s + std::string(tr("  does not fit\n"));
    s += tr("  fits");
    if (k.estimate && k.estimate->step)
        s += trf(tr, ": {:.1f} days, {:.0f} tokens/s/GPU{}", k.estimate->days_to_train,
                 k.estimate->tokens_per_s_per_gpu,
                 k.estimate->priced ? std::string(tr(", ")) + model::format_money(k.estimate->cost, k.estimate->currency)
                                    : std::string());
    return s + fmt::format(" ({})\n", layout_label(k.plan));
}

} // namespace

nlohmann::json fit_advice_json(const FitAdvice& a) {
    nlohmann::json knobs = nlohmann::json::array();
    for (const auto& k : a.knobs) knobs.push_back(knob_json(k));
    return {{"closest",
             {{"layout", layout_label(a.closest)},
              {"num_gpus", a.closest.num_gpus()},
              {"memory_gib", a.closest_memory_gib},
              {"capacity_gib", a.capacity_gib}}},
            {"knobs", knobs},
            {"knobs_already_in_plan", a.already_in_plan},
            {"more_gpus", a.more_gpus ? knob_json(*a.more_gpus) : nlohmann::json(nullptr)},
            // Without NICs no count beyond one node is tried: more_gpus is null for that reason.
            {"no_nics", a.closest.cluster.nics_per_node < 1}};
}

std::string format_fit_advice(const FitAdvice& a, const Translator& tr) {
    std::string s = trf(tr,
                        "closest layout: {} GPUs {} needs {:.1f} GiB per GPU; {:.1f} GiB may be used (the HBM "
                        "less the headroom)\nwhat makes it fit, each knob on that layout:\n",
                        a.closest.num_gpus(), layout_label(a.closest), a.closest_memory_gib, a.capacity_gib);
    for (const auto& k : a.knobs) s += knob_text(k, tr);
    if (!a.already_in_plan.empty())
        s += trf(tr, "  (already in that layout: {})\n", fmt::join(a.already_in_plan, "; "));
    if (a.more_gpus)
        s += std::string(tr("the fewest GPUs at which a GPU-only layout fits:\n")) + knob_text(*a.more_gpus, tr);
    else if (a.closest.cluster.nics_per_node < 1)
        s += trf(tr,
                 "this cluster has no NICs: one node of {} GPUs is the most it can use, and no GPU-only "
                 "layout of it fits (cluster.nics_per_node)\n",
                 a.closest.cluster.gpus_per_node);
    else
        s += tr("no GPU-only layout fits up to 64x the GPUs asked for\n");
    return s;
}

} // namespace trainsim::sim
