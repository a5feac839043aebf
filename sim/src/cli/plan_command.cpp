// trainsim plan: the layout search, its frontier over GPU counts, offload and fit advice
// (docs/plan-search.md).
#include "commands.hpp"

#include "trainsim/model/core/text_format.hpp"
#include "trainsim/model/framework/framework_profile.hpp"

namespace trainsim::sim::cli {

// ---- trainsim plan (docs/plan-search.md) ----


[[noreturn]] void plan_arg_error(const std::string& key, const std::string& msg) {
    model::Diagnostic d;
    d.file = "trainsim plan";
    d.key = key;
    d.message = msg;
    throw SearchError({d});
}

// The base plan: the scenario's first plan, or one written from the flags (loaded through the
// one loader so that every default and check is the scenario file's).
model::Plan plan_base(const PlanArgs& a) {
    model::LoadOptions opts;
    opts.data_dir = data_dir(a.data_dir);
    if (!a.profile.empty()) opts.profile_override = fs::path(a.profile);
    if (!a.stack.empty()) opts.stack_override = fs::path(a.stack);
    if (!a.file.empty() || a.text) {
        if (!a.model.empty() || !a.gpu.empty() || a.tokens)
            plan_arg_error("FILE", "give either a scenario FILE or --model/--gpu/--tokens, not both");
        if (a.method != "pretrain")
            plan_arg_error("--method", "belongs to the flag form; with a scenario FILE the method is its training.method");
        if (a.price)
            plan_arg_error("--price",
                           "belongs to the flag form; with a scenario FILE the price is its pricing section");
        auto sc = a.text ? model::load_scenario_text(*a.text, a.file, opts) : model::load_scenario(a.file, opts);
        for (const auto& w : sc.warnings) std::cerr << "trainsim: warning: " << w << "\n";
        if (!a.profile.empty()) note_profile_override(a.profile, sc.plans.size());
        if (sc.plans.size() > 1)
            std::cerr << fmt::format("trainsim: note: {} has {} plans; plan searches around the first, '{}' (its "
                                     "model, training, precision, cluster and pricing)\n",
                                     a.file, sc.plans.size(), sc.plans.front().name);
        return sc.plans.front();
    }
    if (a.model.empty() || a.gpu.empty() || a.gpus.empty())
        plan_arg_error("--model", "without a scenario FILE, --model, --gpu and --gpus are required");
    if (a.tokens && a.tokens->empty()) plan_arg_error("--tokens", "is empty (a count such as 1T or 500B)");
    // gpus_per_node from the profile's node; the GPU count (nodes) is set by the search.
    const auto hw = model::resolve_profile(a.gpu, fs::current_path(), opts.data_dir);
    const std::string yaml = fmt::format(
        "model: {}\ntraining: {{tokens: \"{}\", seq_len: {}, global_batch: {}, micro_batch: 1, method: {}}}\n"
        "parallel: {{tp: 1, pp: 1, dp: auto}}\nprecision: {}\n"
        "cluster: {{gpu: \"{}\", nodes: 1, gpus_per_node: {}}}\n"
        "pricing: {{basis: gpu_hour{}, currency: \"{}\"}}\nplans:\n  - name: search\n",
        a.model, a.tokens.value_or("1T"), a.seq_len, a.global_batch, a.method, a.precision, a.gpu,
        hw.default_gpus_per_node, a.price ? fmt::format(", rate: {}", *a.price) : std::string(), a.currency);
    auto base = model::load_scenario_text(yaml, "trainsim plan flags", opts).plans.front();
    if (!a.tokens) {
        // No token budget given: the compute-optimal one for the model's size (Hoffmann et al.
        // 2022, "Training Compute-Optimal Large Language Models": about 20 tokens per parameter,
        // their Table 3), said on standard error so that the figures are not read as the user's.
        const double params = model::count_params(base.model).total;
        base.training.tokens = kComputeOptimalTokensPerParam * params;
        std::cerr << fmt::format("trainsim: note: --tokens not given: {} tokens, {:.0f} per parameter of {}'s "
                                 "{} (compute-optimal, Hoffmann et al. 2022); give --tokens for your run\n",
                                 model::format_count(base.training.tokens), kComputeOptimalTokensPerParam,
                                 base.model.name, model::format_count(params));
    }
    return base;
}

// plan with several GPU counts: each count's best plan and whether it is on the days-vs-cost
// Pareto front ("8 or 64 GPUs?" as one table). JSON: one object per count, `best` null where
// nothing of that count fits and meets the deadline / budget.
nlohmann::json frontier_json(const std::vector<CountBest>& frontier) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& f : frontier) {
        nlohmann::json j{{"num_gpus", f.gpus}, {"pareto", f.pareto}};
        j["best"] = f.best ? plan_json(f.best->plan, f.best->estimate) : nlohmann::json(nullptr);
        arr.push_back(std::move(j));
    }
    return arr;
}

namespace {
// The pipeline schedules the search tries, and who offers them (for the reason text): the
// --pp-schedules list (auto: 1F1B and interleaved, the default order), or the base plan's
// framework's (FrameworkProfile::pp_schedules; Megatron-Core when none is written).
std::pair<std::vector<model::PpSchedule>, std::string> searched_schedules(const PlanArgs& a, const model::Plan& base) {
    using model::PpSchedule;
    if (a.pp_schedules.empty()) {
        const std::string& fw = base.parallel.framework;
        const auto prof = model::framework_profile(fw.empty() ? std::string("megatron-core") : fw);
        return {prof.pp_schedules, fw.empty() ? std::string("megatron-core") : model::canonical_name(fw)};
    }
    std::vector<std::string> names;
    for (auto x : {PpSchedule::automatic, PpSchedule::one_f_one_b, PpSchedule::interleaved, PpSchedule::zb_h1,
                   PpSchedule::zb_v, PpSchedule::dualpipe_v})
        names.push_back(model::to_string(x));
    std::vector<PpSchedule> out;
    auto add = [&](PpSchedule x) {
        if (std::find(out.begin(), out.end(), x) == out.end()) out.push_back(x);
    };
    for (const auto& n : a.pp_schedules) {
        const auto at = std::find(names.begin(), names.end(), n);
        if (at == names.end())
            plan_arg_error("--pp-schedules", fmt::format("unknown pipeline schedule '{}'{} (one of: {})", n,
                                                         model::did_you_mean(n, names), fmt::join(names, ", ")));
        const auto x = static_cast<PpSchedule>(at - names.begin());
        if (x == PpSchedule::automatic) {
            add(PpSchedule::one_f_one_b);
            add(PpSchedule::interleaved);
        } else {
            add(x);
        }
    }
    return {out, "--pp-schedules"};
}

nlohmann::json schedules_json(const std::vector<ScheduleOption>& options) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& o : options) {
        const bool ran = o.estimate && o.estimate->step;
        nlohmann::json x{{"schedule", model::to_string(o.schedule)},
                         {"vp", o.vp},
                         {"offered", o.offered},
                         {"not_applicable", o.not_applicable.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.not_applicable)},
                         {"fits", o.not_applicable.empty() && o.fits},
                         {"step_time_s", ran ? nlohmann::json(o.estimate->step_time_s) : nlohmann::json(nullptr)},
                         {"bubble_s", ran ? nlohmann::json(o.estimate->step->breakdown.bubble.seconds()) : nlohmann::json(nullptr)},
                         {"peak_memory_gib", o.estimate ? nlohmann::json(model::to_gib(o.estimate->memory.total()))
                                                        : nlohmann::json(nullptr)},
                         {"days_to_train", ran ? nlohmann::json(o.estimate->days_to_train) : nlohmann::json(nullptr)}};
        arr.push_back(std::move(x));
    }
    return arr;
}

void print_schedules_text(const std::vector<ScheduleOption>& options, const std::string& reason,
                          const std::string& offered_by, const Translator& tr) {
    auto trf = [&](std::string_view f, auto&&... args) {
        return fmt::format(fmt::runtime(tr(f)), std::forward<decltype(args)>(args)...);
    };
    std::cout << trf("\nthe best layout under each pipeline schedule (offered by {}; docs/plan-search.md "
                     "\"Pipeline schedules\"):\n",
                     offered_by);
    std::cout << fmt::format("  {:<11} {:>3} {:>8} {:>10} {:>9} {:>8}\n", tr("schedule"), "vp", tr("offered"),
                             tr("step s"), tr("bubble s"), tr("mem GiB"));
    for (const auto& o : options) {
        const std::string name = model::to_string(o.schedule);
        const std::string_view off = tr(o.offered ? "yes" : "no");
        if (!o.not_applicable.empty()) {
            // The reason is a layout check's diagnostic (scenario keys), as in the JSON.
            std::cout << fmt::format("  {:<11} {:>3} {:>8}  {}\n", name, o.vp, off,
                                     trf("not applicable: {}", o.not_applicable));
            continue;
        }
        const auto& e = *o.estimate;
        const double mem = model::to_gib(e.memory.total());
        if (!e.step)
            std::cout << fmt::format("  {:<11} {:>3} {:>8} {:>10} {:>9} {:>8.1f}  {}\n", name, o.vp, off, "-", "-",
                                     mem, tr("does not fit"));
        else
            std::cout << fmt::format("  {:<11} {:>3} {:>8} {:>10.3f} {:>9.3f} {:>8.1f}{}\n", name, o.vp, off,
                                     e.step_time_s, e.step->breakdown.bubble.seconds(), mem,
                                     o.fits ? std::string_view() : tr("  (leaves too little memory free)"));
    }
    if (!reason.empty()) std::cout << trf("  chosen: {}\n", reason);
}

// A plan's bill as a table cell: the expected run's (what is paid) or the steady run's.
std::string bill_cell(const RunEstimate& e, bool expected, const Translator& tr) {
    return e.priced ? model::format_money(expected ? e.expected_cost : e.cost, e.currency) : std::string(tr("no price"));
}
} // namespace

void print_frontier_text(const std::vector<CountBest>& frontier, bool expected, const std::string& currency,
                         const std::optional<ConstraintMiss>& miss, const Translator& tr) {
    std::cout << tr("\nbest plan per GPU count ('*': on the days-vs-cost Pareto front, no count is both faster and "
                    "cheaper):\n");
    // Both days, and the bill of the expected run (what is paid); the steady run's cost too when
    // the search ranked on it (--days steady).
    (void)currency; // each bill cell carries its currency
    std::cout << fmt::format("  {:>5}  {:<40} {:>8} {:>9} {:>16}{} {:>9} {:>6}\n", tr("GPUs"), tr("best layout"),
                             tr("days"), tr("exp.days"), tr("bill"),
                             expected ? std::string() : fmt::format(" {:>16}", tr("steady cost")), "tok/s/GPU", "MFU");
    for (const auto& f : frontier) {
        if (!f.best) {
            // What excluded the count, where the constraints were explained (else nothing fits):
            // "deadline", "budget" (the JSON's excluded_by words), in the reader's language.
            std::string why(tr("no layout fits in memory"));
            if (miss)
                for (const auto& c : miss->counts)
                    if (c.gpus == f.gpus && !c.excluded_by.empty()) {
                        std::vector<std::string_view> by;
                        for (const auto& x : c.excluded_by) by.push_back(tr(x));
                        why = fmt::format(fmt::runtime(tr("no plan: excluded by the {}")),
                                          fmt::join(by, tr(" and the ")));
                    }
            std::cout << fmt::format("  {:>5}  {}\n", f.gpus, why);
            continue;
        }
        const auto& e = f.best->estimate;
        std::cout << fmt::format("{} {:>5}  {:<40} {:>8.1f} {:>9.1f} {:>16}{} {:>9.0f} {:>5.1f}%\n",
                                 f.pareto ? " *" : "  ", f.gpus, layout_label(f.best->plan), e.days_to_train,
                                 e.expected_days, bill_cell(e, true, tr),
                                 expected ? std::string() : fmt::format(" {:>16}", bill_cell(e, false, tr)),
                                 e.tokens_per_s_per_gpu, 100 * e.mfu);
    }
}

namespace {
// {"reason": "memory" | "constraints", ...}: why `plan` has no plan (docs/plan-search.md "When
// nothing meets the constraints"). With the constraints: the plans the search gives without them,
// each with the constraints it misses, per count what excluded it, and the extrapolated GPUs that
// would meet the deadline where the searched counts' scaling says so (else null).
nlohmann::json no_plan_json(const std::optional<ConstraintMiss>& miss, const SearchOptions& o, bool offload) {
    auto opt_num = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
    nlohmann::json j{{"reason", miss ? "constraints" : "memory"},
                     {"deadline_days", opt_num(o.deadline_days)},
                     {"budget", opt_num(o.budget)},
                     {"days", o.basis == DaysBasis::expected ? "expected" : "steady"}};
    if (!miss) return j;
    auto one = [&](const std::optional<RankedPlan>& r) {
        if (!r) return nlohmann::json(nullptr);
        auto pj = plan_json(r->plan, r->estimate);
        pj["excluded_by"] = constraints_missed(r->estimate, o);
        return pj;
    };
    j["fastest"] = one(miss->fastest);
    j["cheapest"] = one(miss->cheapest);
    j["cheapest_within_deadline"] = one(miss->cheapest_on_time);
    j["fastest_within_budget"] = one(miss->fastest_in_budget);
    nlohmann::json counts = nlohmann::json::array();
    for (const auto& c : miss->counts) {
        const bool exp = o.basis == DaysBasis::expected;
        counts.push_back({{"num_gpus", c.gpus},
                          {"excluded_by", c.excluded_by},
                          {"fastest_days", c.fastest ? nlohmann::json(exp ? c.fastest->estimate.expected_days
                                                                          : c.fastest->estimate.days_to_train)
                                                     : nlohmann::json(nullptr)},
                          {"cheapest_cost",
                           c.cheapest && c.cheapest->estimate.priced
                               ? nlohmann::json(exp ? c.cheapest->estimate.expected_cost : c.cheapest->estimate.cost)
                               : nlohmann::json(nullptr)}});
    }
    j["counts"] = counts;
    if (miss->deadline_gpus && miss->fastest) {
        const auto& x = *miss->deadline_gpus;
        j["gpus_to_meet_deadline"] = {{"gpus", x.gpus},
                                      {"more_gpus", x.gpus - miss->fastest->plan.num_gpus()},
                                      {"extrapolated_from", {x.from_gpus, x.to_gpus}},
                                      {"exponent", x.exponent},
                                      {"searched", false}};
    } else {
        j["gpus_to_meet_deadline"] = nullptr;
    }
    j["offload_tried"] = offload;
    return j;
}
} // namespace

int run_plan_search(const PlanArgs& a) {
    if (a.json && a.csv) plan_arg_error("--csv", "--json and --csv are exclusive");
    if (a.frontier_csv && !a.csv) plan_arg_error("--frontier", "prints the per-count table as CSV: use it with --csv");
    if (a.top < 1) plan_arg_error("--top", "must be at least 1");
    if (a.max_micro_batch < 1) plan_arg_error("--max-micro-batch", "must be at least 1");
    double memory_headroom = kMemoryHeadroomFraction;
    if (!a.memory_headroom.empty()) {
        try {
            memory_headroom = model::parse_fraction(a.memory_headroom);
        } catch (const model::UnitError& e) {
            plan_arg_error("--memory-headroom", e.what());
        }
        if (memory_headroom >= 0.5) plan_arg_error("--memory-headroom", "must be below 50% of the HBM");
    }
    model::Plan base = plan_base(a);
    SearchOptions o;
    o.space.gpu_counts = a.gpus;
    o.space.max_micro_batch = a.max_micro_batch;
    o.memory_headroom = memory_headroom;
    o.space.try_without_sp = a.try_without_sp;
    const auto offer = searched_schedules(a, base);
    o.space.pp_schedules = offer.first;
    const std::string& offered_by = offer.second;
    o.top = static_cast<std::size_t>(a.top);
    o.threads = a.threads;
    o.prune = !a.no_prune;
    o.deadline_days = a.deadline_days;
    o.budget = a.budget;
    // p90: rank by the pessimistic end of each plan's error band (docs/trust.md): days, or cost
    // with a deadline. Within one GPU count plans share their band unless their host shares put
    // them in different regimes (host-heavy / gpu-bound), so this mostly reorders counts.
    const bool rank_p90 = a.rank == "p90" || a.rank == "days-p90" || a.rank == "cost-p90";
    if (a.rank.empty() || a.rank == "p90")
        o.rank = a.deadline_days && !a.budget ? RankBy::cost : RankBy::days;
    else if (a.rank == "days" || a.rank == "days-p90")
        o.rank = RankBy::days;
    else if (a.rank == "cost" || a.rank == "cost-p90")
        o.rank = RankBy::cost;
    else
        plan_arg_error("--rank",
                       fmt::format("unknown ranking '{}'{} (days, cost, p90, days-p90, cost-p90)", a.rank,
                                   model::did_you_mean(a.rank, {"days", "cost", "p90", "days-p90", "cost-p90"})));
    if (a.deadline_days && !(*a.deadline_days > 0)) plan_arg_error("--deadline-days", "must be positive");
    if (a.budget && !(*a.budget > 0)) plan_arg_error("--budget", "must be positive");
    // Money without a price is unknown, not 0: a budget would let every plan pass and a cost
    // ranking would rank zeros (and, with nothing to prune against, simulate every plan).
    if (!has_price(base.pricing)) {
        const std::string how = a.file.empty() ? "--price (per GPU-hour)" : fmt::format("pricing.rate in {}", a.file);
        if (a.budget) plan_arg_error("--budget", fmt::format("needs a price: give {}", how));
        if (o.rank == RankBy::cost)
            plan_arg_error(a.rank == "cost" || a.rank == "cost-p90" ? "--rank" : "--deadline-days",
                           a.rank == "cost" || a.rank == "cost-p90"
                               ? fmt::format("ranking by cost needs a price: give {}", how)
                               : fmt::format("ranks the plans that meet it by cost, which needs a price: give {} "
                                             "or --rank days",
                                             how));
    }
    if (a.days == "steady") o.basis = DaysBasis::steady;
    else if (a.days == "expected") o.basis = DaysBasis::expected;
    else
        plan_arg_error("--days", fmt::format("unknown days '{}'{} (steady, expected)", a.days,
                                             model::did_you_mean(a.days, {"steady", "expected"})));
    auto& run = base.run;  // every searched plan copies the base plan's run settings
    // The run options stand for scenario keys and get their checks (unit, finite, physical range).
    auto check_as_key = [](const std::string& option, const std::string& key, const std::string& value) {
        for (const auto& m : model::check_key_value(key, value)) plan_arg_error(option, m);
    };
    if (a.checkpoint_bandwidth) {
        check_as_key("--checkpoint-bandwidth", "run.checkpoint_bandwidth", *a.checkpoint_bandwidth);
        run.checkpoint_bandwidth_per_node = model::parse_bandwidth(*a.checkpoint_bandwidth);
    }
    if (a.gpu_mtbf_hours) {
        check_as_key("--gpu-mtbf-hours", "run.gpu_mtbf", fmt::format("{} h", *a.gpu_mtbf_hours));
        if (!(*a.gpu_mtbf_hours > 0)) plan_arg_error("--gpu-mtbf-hours", "must be positive");
        run.gpu_mtbf_hours = *a.gpu_mtbf_hours;
    }
    if (a.restart_minutes) {
        check_as_key("--restart-minutes", "run.restart", fmt::format("{} min", *a.restart_minutes));
        run.restart_s = *a.restart_minutes * 60.0;
    }

    if (a.max_tokens) return run_max_tokens(a, base, o);
    if (!a.models.empty()) plan_arg_error("--models", "asks for the largest model within a budget: use it with --max-tokens");
    const bool bar = !a.quiet && isatty(STDERR_FILENO) != 0;
    if (bar) o.progress = progress_bar("plans");
    // A full fine-tune whose recipe fits at none of the GPU counts is searched with full
    // fine-tuning's memory recipes too (docs/plan-search.md "Fine-tuning"): without a master copy,
    // 8-bit optimizer state, the step inside the backward. They only matter when the default does
    // not fit, so the space grows only then.
    if (base.training.method == model::Method::full && o.space.recipes.empty()) {
        SearchSpace probe = o.space;
        probe.gpu_counts = a.gpus.empty() ? std::vector<int>{base.num_gpus()} : a.gpus;
        const auto layouts = enumerate_layouts(base, probe);
        const bool any_fits = std::any_of(layouts.begin(), layouts.end(), [&](const model::Plan& p) {
            return model::check_layout(p).empty() &&
                   model::fits_in_memory(p, model::peak_memory(p), p.hardware.hbm_capacity * (1.0 - o.memory_headroom));
        });
        if (!any_fits) {
            const auto& q = base.parallel;
            o.space.recipes = {{q.master_weights, q.optimizer_state, q.optimizer_in_backward},
                               {true, model::OptimizerState::int8, false},
                               {false, model::OptimizerState::bf16, false},
                               {false, model::OptimizerState::bf16, true},
                               {false, model::OptimizerState::int8, true}};
            std::cerr << "trainsim: note: the fine-tune fits at none of the GPU counts as written; searching "
                         "full fine-tuning's memory recipes too (8-bit optimizer state, no master copy, "
                         "optimizer in backward)\n";
        }
    }
    auto res = search_plans(base, o);
    const auto folded = fold_equivalent_plans(res.plans);
    std::size_t folded_count = 0;
    for (const auto& f : folded) folded_count += f.size();
    // Nothing to rank because no layout exists (not because none fits): a request error.
    if (res.plans.empty() && res.stats.enumerated == res.stats.invalid)
        plan_arg_error("--gpus",
                       fmt::format("no valid layout of {} GPU(s) exists for {}: tensor parallelism must divide the GPUs of "
                                   "a node ({}) and the {} heads, pipeline stages the {} layers, and data parallelism the "
                                   "global batch of {}; try a GPU count that fills whole {}-GPU nodes",
                                   fmt::join(a.gpus, ","), base.model.name, base.cluster.gpus_per_node,
                                   base.model.heads, base.model.layers, base.training.global_batch,
                                   base.hardware.default_gpus_per_node));
    const auto em = load_error_model(data_dir(a.data_dir));
    // Where no GPU-only layout of a GPU count fits, CPU offload may (docs/plan-search.md "When
    // nothing fits"): those counts are searched again with the optimizer, or the parameters too,
    // in host memory. Its best plan is shown beside the best GPU-only one, and when no GPU-only plan
    // fits at all, it is the answer, with what the fewest GPUs that fit without offload would give.
    const auto counts = a.gpus.empty() ? std::vector<int>{base.num_gpus()} : a.gpus;
    std::vector<int> no_fit_counts;
    // (The search counted, per count, the layouts that are valid and fit with the headroom.)
    for (int g : counts)
        if (const auto it = res.fitting_per_count.find(g); it == res.fitting_per_count.end() || it->second == 0)
            no_fit_counts.push_back(g);
    std::optional<SearchResult> offload_res;
    if (!a.no_offload && !no_fit_counts.empty() && base.hardware.host_memory_bandwidth.value() > 0 &&
        base.hardware.cpu_adam_efficiency > 0) {
        SearchOptions oo = o;
        oo.progress = nullptr;
        oo.space.gpu_counts = no_fit_counts;
        oo.space.offloads = {model::Offload::optimizer, model::Offload::params};
        oo.space.shardings = {model::Sharding::zero1, model::Sharding::zero2, model::Sharding::zero3,
                              model::Sharding::fsdp, model::Sharding::dist_opt};
        oo.top = std::min<std::size_t>(o.top, 5);
        offload_res = search_plans(base, oo);
        (void)fold_equivalent_plans(offload_res->plans);
        for (auto& r : offload_res->plans) attach_band(r.estimate, r.plan, em);
        if (offload_res->plans.empty()) offload_res.reset();
    }
    // No plan at all, and why: memory (no layout fits: how close the nearest comes and what makes
    // one fit; exit 3), or the constraints (layouts fit but none meets the deadline and the budget:
    // which excluded what; exit 4). Memory advice about a layout that already fits would be wrong.
    const std::size_t fitting = res.stats.enumerated - res.stats.invalid - res.stats.does_not_fit;
    const bool constrained = o.deadline_days.has_value() || o.budget.has_value();
    std::optional<ConstraintMiss> miss;
    const bool some_count_excluded =
        std::any_of(res.frontier.begin(), res.frontier.end(), [](const CountBest& f) { return !f.best; });
    if (constrained && fitting > 0 && ((res.plans.empty() && !offload_res) || some_count_excluded)) {
        SearchOptions mo = o;
        mo.progress = nullptr;
        miss = explain_constraint_miss(base, mo);
    }
    std::optional<FitAdvice> advice;
    if (res.plans.empty() && !offload_res && fitting == 0 && res.stats.does_not_fit > 0) {
        SearchSpace all_counts = o.space;
        all_counts.gpu_counts = counts;
        advice = fit_advice(enumerate_layouts(base, all_counts), o.memory_headroom);
    }
    // The offload plan is the answer: what the fewest GPUs without offload would give instead.
    std::optional<RankedPlan> gpu_only_alternative;
    if (res.plans.empty() && offload_res) {
        SearchSpace all_counts = o.space;
        all_counts.gpu_counts = {*std::max_element(counts.begin(), counts.end())};
        const auto more = fit_advice(enumerate_layouts(base, all_counts), o.memory_headroom, false).more_gpus;
        if (more) {
            SearchOptions go = o;
            go.progress = nullptr;
            go.space.gpu_counts = {more->plan.num_gpus()};
            go.top = 1;
            go.deadline_days.reset();
            go.budget.reset();
            auto g = search_plans(base, go);
            if (!g.plans.empty()) {
                gpu_only_alternative = std::move(g.plans.front());
                attach_band(gpu_only_alternative->estimate, gpu_only_alternative->plan, em);
            }
        }
    }
    for (auto& r : res.plans) attach_band(r.estimate, r.plan, em);
    for (auto& f : res.frontier)
        if (f.best) attach_band(f.best->estimate, f.best->plan, em);
    const bool expected_basis = o.basis == DaysBasis::expected;
    auto figure = [&](const RunEstimate& e) {
        return o.rank == RankBy::days ? (expected_basis ? e.expected_days : e.days_to_train)
                                      : (expected_basis ? e.expected_cost : e.cost);
    };
    auto p10 = [&](const RunEstimate& e) { return figure(e) * (e.band ? e.band->time_p10 : 1.0); };
    auto p90 = [&](const RunEstimate& e) { return figure(e) * (e.band ? e.band->time_p90 : 1.0); };
    if (rank_p90)
        std::stable_sort(res.plans.begin(), res.plans.end(),
                         [&](const auto& x, const auto& y) { return p90(x.estimate) < p90(y.estimate); });
    // Plans whose band overlaps the best one's are tied with it: the error model cannot tell them
    // apart. Among them the robust plan is recommended: no TP across nodes, fewer nodes, more
    // memory headroom, a simpler schedule (docs/trust.md).
    std::vector<bool> tied(res.plans.size(), false);
    std::size_t recommended = 0;
    // --lang: the text output's language (lang.hpp); the JSON and CSV never are translated.
    const Translator tr(parse_lang(a.lang));
    // Why the recommended plan: English in the JSON (recommended_why), `tr`'s language in the text.
    std::string why_recommended, why_recommended_text;
    if (!res.plans.empty()) {
        const double best_hi = p90(res.plans.front().estimate);
        for (std::size_t i = 0; i < res.plans.size(); ++i) tied[i] = p10(res.plans[i].estimate) <= best_hi;
        auto headroom = [](const RunEstimate& e) { return model::to_gib(e.capacity) - model::to_gib(e.memory.total()); };
        auto tp_cross = [](const model::Plan& p) { return features_of(p).tp_across_nodes; };
        auto robustness = [&](const model::Plan& p, const RunEstimate& e) {
            const int complexity = (p.parallel.vp > 1) + (p.parallel.cp > 1) + (p.parallel.pp > 1);
            return std::make_tuple(tp_cross(p), p.cluster.nodes, -std::floor(headroom(e)), complexity);
        };
        for (std::size_t i = 1; i < res.plans.size(); ++i) {
            if (!tied[i]) continue;
            const auto& x = res.plans[i];
            const auto& b = res.plans[recommended];
            if (robustness(x.plan, x.estimate) < robustness(b.plan, b.estimate)) recommended = i;
        }
        if (recommended != 0) {
            const auto& x = res.plans[recommended];
            const auto& b = res.plans.front();
            const double hx = headroom(x.estimate), hb = headroom(b.estimate);
            auto why_in = [&](const Translator& t) {
                std::vector<std::string> why;
                if (x.plan.cluster.nodes < b.plan.cluster.nodes) why.emplace_back(t("fewer nodes"));
                if (hx > hb + 1) why.push_back(fmt::format(fmt::runtime(t("{:.0f} GiB more memory headroom")), hx - hb));
                if (x.plan.parallel.vp < b.plan.parallel.vp || x.plan.parallel.cp < b.plan.parallel.cp ||
                    x.plan.parallel.pp < b.plan.parallel.pp)
                    why.emplace_back(t("a simpler schedule"));
                if (tp_cross(b.plan) && !tp_cross(x.plan)) why.emplace_back(t("no TP across nodes"));
                return fmt::format(fmt::runtime(t("#{} is tied with #1 within the error bands and more robust: {}")),
                                   recommended + 1,
                                   why.empty() ? std::string(t("simpler")) : fmt::format("{}", fmt::join(why, t(", "))));
            };
            why_recommended = why_in(Translator());
            why_recommended_text = tr.english() ? why_recommended : why_in(tr);
        }
    }

    // The best layout under every pipeline schedule (issue #44), and why it runs the one it does.
    std::vector<ScheduleOption> schedules;
    std::string schedule_why;
    if (!a.csv && !res.plans.empty() && res.plans.front().plan.parallel.pp > 1) {
        const auto& best = res.plans.front();
        schedules = compare_schedules(best.plan, o.space.pp_schedules, o.memory_headroom, best.estimate, o.threads);
        // English in the JSON (schedule_reason); the text's language below.
        schedule_why = schedule_reason(best.plan, schedules, offered_by, a.json ? Translator() : tr);
    }
    if (a.json || a.csv) {
        nlohmann::json arr = nlohmann::json::array();
        for (std::size_t i = 0; i < res.plans.size(); ++i) {
            auto pj = plan_json(res.plans[i].plan, res.plans[i].estimate);
            pj["rank"] = i + 1;
            pj["tied_with_best"] = static_cast<bool>(tied[i]);
            pj["recommended"] = i == recommended;
            pj["equivalent_plans"] = folded[i];
            arr.push_back(std::move(pj));
        }
        if (a.json) {
            const auto& s = res.stats;
            nlohmann::json j{{"plans", arr},
                             {"search",
                              {{"enumerated", s.enumerated},
                               {"invalid", s.invalid},
                               {"does_not_fit", s.does_not_fit},
                               {"pruned_dominated", s.pruned_dominated},
                               {"pruned_bound", s.pruned_bound},
                               {"pruned_critical_path", s.pruned_critical_path},
                               {"simulated", s.simulated},
                               {"filtered", s.filtered},
                               {"filtered_deadline", s.filtered_deadline},
                               {"filtered_budget", s.filtered_budget},
                               {"folded_equivalent", folded_count},
                               {"seconds", s.seconds},
                               {"rank", o.rank == RankBy::days ? "days" : "cost"},
                               {"rank_p90", rank_p90},
                               {"recommended", recommended + 1},
                               {"recommended_why", why_recommended},
                               {"days", a.days},
                               {"pp_schedules", [&] {
                                    nlohmann::json n = nlohmann::json::array();
                                    for (auto x : o.space.pp_schedules) n.push_back(model::to_string(x));
                                    return n;
                                }()},
                               {"pp_schedules_offered_by", offered_by}}}};
            // For the best layout (pp > 1): its step under every schedule; empty for pp 1.
            j["schedules"] = schedules_json(schedules);
            j["schedule_reason"] = res.plans.empty()                       ? nlohmann::json(nullptr)
                                   : res.plans.front().plan.parallel.pp < 2 ? nlohmann::json("pp 1: no pipeline schedule")
                                                                            : nlohmann::json(schedule_why);
            if (!res.frontier.empty()) {
                j["frontier"] = frontier_json(res.frontier);
                // Why a count has no plan: "memory", "deadline", "budget" (docs/plan-search.md).
                for (std::size_t i = 0; i < res.frontier.size(); ++i) {
                    nlohmann::json why = nlohmann::json::array();
                    if (!res.frontier[i].best && miss)
                        for (const auto& c : miss->counts)
                            if (c.gpus == res.frontier[i].gpus) why = c.excluded_by;
                    if (!res.frontier[i].best && !miss) why.push_back("memory");
                    j["frontier"][i]["excluded_by"] = why;
                }
            }
            if (res.plans.empty()) j["no_plan"] = no_plan_json(miss, o, offload_res.has_value());
            if (offload_res) {
                nlohmann::json off = nlohmann::json::array();
                for (const auto& r : offload_res->plans) off.push_back(plan_json(r.plan, r.estimate));
                j["offload_plans"] = off;
                j["search"]["offload_gpu_counts"] = no_fit_counts;
            }
            if (gpu_only_alternative) {
                auto gj = plan_json(gpu_only_alternative->plan, gpu_only_alternative->estimate);
                gj["speedup_vs_best_offload_plan"] =
                    offload_res->plans.front().estimate.days_to_train / gpu_only_alternative->estimate.days_to_train;
                j["gpu_only_alternative"] = gj;
            }
            if (advice) j["fit_advice"] = fit_advice_json(*advice);
            if (a.json_out)
                *a.json_out = std::move(j);
            else
                std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
        } else if (a.frontier_csv) {
            // One row per GPU count: its best plan's columns, and whether it is on the Pareto front
            // (only num_gpus and pareto where no layout of that count qualifies).
            nlohmann::json rows = nlohmann::json::array();
            for (const auto& f : res.frontier) {
                nlohmann::json row = f.best ? plan_json(f.best->plan, f.best->estimate) : nlohmann::json::object();
                row["num_gpus"] = f.gpus;
                row["pareto"] = f.pareto;
                rows.push_back(std::move(row));
            }
            std::cout << plans_csv(rows);
        } else if (res.plans.empty() && offload_res) {
            nlohmann::json off = nlohmann::json::array();
            for (const auto& r : offload_res->plans) off.push_back(plan_json(r.plan, r.estimate));
            std::cout << plans_csv(off);
        } else {
            std::cout << plans_csv(arr);
        }
        return res.plans.empty() && !offload_res ? (miss ? kExitNoPlanMeetsConstraints : kExitDoesNotFit) : kExitOk;
    }

    const auto& s = res.stats;
    // The text below in `tr`'s language; the JSON and CSV above never are translated.
    auto trf = [&](std::string_view f, auto&&... args) {
        return fmt::format(fmt::runtime(tr(f)), std::forward<decltype(args)>(args)...);
    };
    std::cout << trf("{} on {} ({}), {} tokens, global batch {} x {} tokens\n", base.model.name,
                             base.hardware.name, model::to_string(base.precision),
                             model::format_count(base.training.tokens),
                             base.training.global_batch, base.training.seq_len);
    std::cout << trf("searched {} layouts in {:.1f} s: {} invalid, {} do not fit (leaving {:.0f}% of HBM free), "
                             "{} dominated recompute, {} pruned by the stream bound, {} by the critical path, {} "
                             "simulated{}\n",
                             s.enumerated, s.seconds, s.invalid, s.does_not_fit, 100 * o.memory_headroom,
                             s.pruned_dominated, s.pruned_bound,
                             s.pruned_critical_path, s.simulated,
                             s.filtered ? trf(", {} over the deadline/budget", s.filtered) : "");
    const bool expected = o.basis == DaysBasis::expected;
    const std::string_view basis =
        tr(expected ? "expected: checkpoints, failures, restarts; billed in whole units" : "steady state (--days steady)");
    if (a.deadline_days) std::cout << trf("deadline: {:g} days ({})\n", *a.deadline_days, basis);
    if (a.budget)
        std::cout << trf("budget: {} total ({})\n", model::format_money(*a.budget, base.pricing.currency), basis);
    std::cout << trf("ranked by {} ({})\n\n", tr(o.rank == RankBy::days ? "days to train" : "total cost"), basis);
    auto offload_table = [&]() {
        for (std::size_t i = 0; i < offload_res->plans.size(); ++i) {
            const auto& r = offload_res->plans[i];
            const auto& e = r.estimate;
            std::cout << fmt::format("{:>3}  {:>5}  {:<56} {:>8.1f} {:>16} {:>9.0f} {:>5.1f}% {:>6.1f} {:>6.0f}\n",
                                     i + 1, r.plan.num_gpus(), layout_label(r.plan), e.days_to_train,
                                     bill_cell(e, false, tr), e.tokens_per_s_per_gpu,
                                     100 * e.mfu, model::to_gib(e.memory.total()), model::to_gib(e.host_needed));
        }
    };
    auto offload_header = [&]() {
        std::cout << fmt::format("{:>3}  {:>5}  {:<56} {:>8} {:>16} {:>9} {:>6} {:>6} {:>6}\n", "#", tr("GPUs"),
                                 tr("layout"), tr("days"), tr("cost"), "tok/s/GPU", "MFU", "HBM", tr("host"));
    };
    if (res.plans.empty()) {
        if (offload_res) {
            std::cout << trf("no GPU-only layout fits on {} GPU(s); with CPU offload (parallel.offload; memory "
                             "in GiB per GPU and per node):\n",
                             fmt::join(no_fit_counts, ","));
            offload_header();
            offload_table();
            const auto& best = offload_res->plans.front();
            std::cout << tr("\nbest plan:\n") << format_plan(best.plan, best.estimate, tr);
            if (gpu_only_alternative) {
                const auto& g = *gpu_only_alternative;
                std::cout << trf(
                    "\nwithout offload: {} GPUs is the fewest at which a GPU-only layout fits; its best, {}, trains in "
                    "{:.1f} days, {:.1f}x faster than the best offload plan ({:.1f} days){}\n",
                    g.plan.num_gpus(), layout_label(g.plan), g.estimate.days_to_train,
                    best.estimate.days_to_train / g.estimate.days_to_train, best.estimate.days_to_train,
                    g.estimate.priced && best.estimate.priced
                        ? trf(", for {} instead of {}", model::format_money(g.estimate.cost, g.estimate.currency),
                                      model::format_money(best.estimate.cost, best.estimate.currency))
                        : std::string());
            } else if (base.cluster.nics_per_node < 1) {
                std::cout << trf("\nwithout offload: this cluster has no NICs: one node of {} GPUs is the most "
                                 "it can use, and no GPU-only layout of it fits (cluster.nics_per_node)\n",
                                 base.cluster.gpus_per_node);
            }
            return kExitOk;
        }
        if (miss) {
            std::cout << format_constraint_miss(*miss, o, base.pricing.currency, tr);
            return kExitNoPlanMeetsConstraints;
        }
        std::cout << tr("no plan fits in memory\n");
        if (advice) std::cout << "\n" << format_fit_advice(*advice, tr);
        return kExitDoesNotFit;
    }
    // Every row: steady and expected days and the bill of the expected run (whole billing units:
    // what is paid); with --days steady also the steady run's cost, which the ranking then used.
    const std::string& cur = base.pricing.currency;
    std::cout << fmt::format("{:>3}  {:>5}  {:<40} {:>8} {:>9} {:>16}{} {:>9} {:>6} {:>8}\n", "#", tr("GPUs"),
                             tr("layout"), tr("days"), tr("exp.days"), tr("bill"),
                             expected ? std::string() : fmt::format(" {:>16}", tr("steady cost")), "tok/s/GPU", "MFU",
                             tr("mem GiB"));
    for (std::size_t i = 0; i < res.plans.size(); ++i) {
        const auto& r = res.plans[i];
        const auto& e = r.estimate;
        std::cout << fmt::format("{:>3}{} {:>5}  {:<40} {:>8.1f} {:>9.1f} {:>16}{} {:>9.0f} {:>5.1f}% {:>8.1f}\n",
                                 i + 1, tied[i] ? "=" : " ", r.plan.num_gpus(), layout_label(r.plan), e.days_to_train,
                                 e.expected_days, bill_cell(e, true, tr),
                                 expected ? std::string() : fmt::format(" {:>16}", bill_cell(e, false, tr)),
                                 e.tokens_per_s_per_gpu, 100 * e.mfu, model::to_gib(e.memory.total()));
    }
    std::cout << tr("\n'=': tied with #1 (their 80% error bands overlap, docs/trust.md)\n");
    if (folded_count > 0) {
        std::cout << trf("{} equivalent plan(s) folded into their simplest twin (same layout but for the sharding, "
                         "same step time, memory and cost):\n",
                         folded_count);
        for (std::size_t i = 0; i < folded.size(); ++i)
            if (!folded[i].empty())
                std::cout << trf("  #{} stands for {}\n", i + 1, fmt::join(folded[i], "; "));
    }
    if (!why_recommended_text.empty()) std::cout << tr("recommended: ") << why_recommended_text << "\n";
    std::cout << tr("\nbest plan:\n") << format_plan(res.plans.front().plan, res.plans.front().estimate, tr);
    const auto& rt = res.plans.front().estimate.run;
    std::cout << trf(
        "  whole run: {:.1f} days expected (x{:.4f}: x{:.3f} slowdowns, stragglers and evaluations, checkpoint {:.0f} GB written "
        "in {:.0f} s every {:.1f} h, cluster MTBF {:.1f} h, ~{:.0f} failures and ~{:.0f} planned "
        "stops at {:.0f} min each)\n",
        res.plans.front().estimate.expected_days, rt.overhead_factor, rt.stretch, rt.checkpoint_bytes / 1e9,
        rt.checkpoint_write_s, rt.checkpoint_interval_s / 3600, rt.cluster_mtbf_s / 3600, rt.expected_failures,
        rt.expected_planned, rt.restart_s / 60);
    if (res.plans.size() > 1) std::cout << "\n" << explain_winner(res.plans[0], res.plans[1], tr);
    if (!schedules.empty()) print_schedules_text(schedules, schedule_why, offered_by, tr);
    if (!res.frontier.empty()) print_frontier_text(res.frontier, expected, cur, miss, tr);
    if (offload_res) {
        std::cout << trf("\nno GPU-only layout fits on {} GPU(s); with CPU offload there:\n",
                         fmt::join(no_fit_counts, ","));
        offload_header();
        offload_table();
    }
    return kExitOk;
}

} // namespace trainsim::sim::cli
