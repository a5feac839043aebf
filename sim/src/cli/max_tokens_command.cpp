// trainsim plan --max-tokens [--models a,b,c]: the most tokens, or the largest model at
// compute-optimal tokens, that a budget and / or a deadline buy (docs/plan-search.md "The most
// tokens for a budget and a deadline"; sim/search/max_tokens.hpp).
#include "commands.hpp"

#include "trainsim/model/core/text_format.hpp"
#include "trainsim/sim/search/max_tokens.hpp"

namespace trainsim::sim::cli {

namespace {

// 1.23T, 412B: token counts as people say them (model::format_count).
std::string tokens_words(double t) { return model::format_count(t); }

// A count's answer with its band: the tokens at the band's slow and fast ends (p90 and p10 step
// times: fewer and more tokens in the same days and money), where the plan has a band.
struct CountAnswer {
    MaxTokensCount count;
    std::optional<TokensWithin> slow, fast; // p90 / p10 step time
};

// `best`: the count with the most tokens, as max_tokens ranks them.
std::vector<CountAnswer> answer(const model::Plan& base, const SearchOptions& o, const std::optional<ErrorModel>& em,
                                std::optional<std::size_t>& best, SearchStats* stats = nullptr) {
    auto r = max_tokens(base, o);
    best = r.best;
    if (stats) *stats = r.stats;
    std::vector<CountAnswer> out;
    for (auto& c : r.counts) {
        CountAnswer a{std::move(c), {}, {}};
        if (a.count.best) {
            auto& b = *a.count.best;
            attach_band(b.estimate, b.plan, em);
            if (b.estimate.band) {
                a.slow = tokens_within(b, o, b.estimate.band->time_p90);
                a.fast = tokens_within(b, o, b.estimate.band->time_p10);
            }
        }
        out.push_back(std::move(a));
    }
    return out;
}

nlohmann::json count_json(const CountAnswer& a) {
    const auto& c = a.count;
    nlohmann::json j{{"num_gpus", c.gpus},
                     {"fits", c.best.has_value()},
                     {"tokens", c.tokens},
                     {"steps", c.steps},
                     {"limited_by", c.limited_by}};
    j["tokens_p10"] = a.slow ? nlohmann::json(a.slow->tokens) : nlohmann::json(nullptr);
    j["tokens_p90"] = a.fast ? nlohmann::json(a.fast->tokens) : nlohmann::json(nullptr);
    j["plan"] = c.best ? plan_json(c.best->plan, c.best->estimate) : nlohmann::json(nullptr);
    return j;
}

std::string constraint_words(const SearchOptions& o, const std::string& currency) {
    std::vector<std::string> parts;
    if (o.deadline_days) parts.push_back(fmt::format("{:g} days", *o.deadline_days));
    if (o.budget) parts.push_back(model::format_money(*o.budget, currency));
    return fmt::format("{}", fmt::join(parts, " and "));
}

void print_counts(const std::vector<CountAnswer>& v, const SearchOptions& o, const std::string& currency) {
    const bool expected = o.basis == DaysBasis::expected;
    std::cout << fmt::format("  {:>5}  {:<40} {:>8} {:>17} {:>10} {:>14} {:>9}  {}\n", "GPUs", "fastest layout",
                             "tokens", "80% band", expected ? "exp.days" : "days", "bill " + currency, "tok/s/GPU",
                             "limited by");
    for (const auto& a : v) {
        const auto& c = a.count;
        if (!c.best) {
            std::cout << fmt::format("  {:>5}  no layout fits in memory\n", c.gpus);
            continue;
        }
        const auto& e = c.best->estimate;
        const std::string band =
            a.slow && a.fast ? fmt::format("{}-{}", tokens_words(a.slow->tokens), tokens_words(a.fast->tokens)) : "";
        if (c.tokens <= 0) {
            // The bill shown is one step's: the smallest this count can be billed.
            std::cout << fmt::format("  {:>5}  {:<40} {:>8} {:>17} {:>10} {:>14} {:>9.0f}  one step already exceeds "
                                     "the {}\n",
                                     c.gpus, layout_label(c.best->plan), "0", "", "-",
                                     e.priced ? model::format_grouped(constrained_cost(e, o), 0) : "no price",
                                     e.tokens_per_s_per_gpu, fmt::join(c.limited_by, " and the "));
            continue;
        }
        std::cout << fmt::format("  {:>5}  {:<40} {:>8} {:>17} {:>10.1f} {:>14} {:>9.0f}  {}\n", c.gpus,
                                 layout_label(c.best->plan), tokens_words(c.tokens), band, constrained_days(e, o),
                                 e.priced ? model::format_grouped(constrained_cost(e, o), 0) : "no price",
                                 e.tokens_per_s_per_gpu,
                                 c.limited_by.empty() ? std::string("nothing") : fmt::format("{}", fmt::join(c.limited_by, ", ")));
    }
}

// A model named on --models: a preset id, or a Hugging Face config.json.
model::ModelArch model_named(const std::string& name, const fs::path& dir) {
    if (name.size() > 5 && name.substr(name.size() - 5) == ".json") return model::load_hf_config(name);
    return model::load_preset(name, dir);
}

} // namespace

int run_max_tokens(const PlanArgs& a, const model::Plan& base, const SearchOptions& o) {
    if (!o.deadline_days && !o.budget)
        plan_arg_error("--max-tokens", "needs a --budget, a --deadline-days or both: the most tokens within what?");
    if (a.json && a.csv) plan_arg_error("--csv", "--json and --csv are exclusive");
    if (a.csv) plan_arg_error("--csv", "--max-tokens prints a table or --json");
    const auto em = load_error_model(data_dir(a.data_dir));
    const std::string& cur = base.pricing.currency;
    const bool expected = o.basis == DaysBasis::expected;
    const char* basis = expected ? "expected wall clock: checkpoints, failures, restarts; billed in whole units"
                                 : "steady state (--days steady)";
    nlohmann::json constraints{{"deadline_days", o.deadline_days ? nlohmann::json(*o.deadline_days) : nlohmann::json(nullptr)},
                               {"budget", o.budget ? nlohmann::json(*o.budget) : nlohmann::json(nullptr)},
                               {"currency", cur},
                               {"days", expected ? "expected" : "steady"}};

    if (a.models.empty()) {
        SearchStats stats;
        std::optional<std::size_t> best;
        const auto v = answer(base, o, em, best, &stats);
        const bool any_fits = std::any_of(v.begin(), v.end(), [](const CountAnswer& c) { return c.count.best.has_value(); });
        if (a.json) {
            nlohmann::json j{{"max_tokens", constraints}};
            nlohmann::json counts = nlohmann::json::array();
            for (const auto& c : v) counts.push_back(count_json(c));
            j["max_tokens"]["counts"] = counts;
            j["max_tokens"]["best"] = best ? count_json(v[*best]) : nlohmann::json(nullptr);
            j["max_tokens"]["search"] = {{"enumerated", stats.enumerated}, {"simulated", stats.simulated},
                                         {"seconds", stats.seconds}};
            if (a.json_out)
                *a.json_out = std::move(j);
            else
                std::cout << j.dump(2) << "\n";
        } else {
            std::cout << fmt::format("{} on {} ({}), global batch {} x {} tokens\n", base.model.name, base.hardware.name,
                                     model::to_string(base.precision), base.training.global_batch,
                                     base.training.seq_len);
            std::cout << fmt::format("the most tokens within {} ({}), each GPU count's fastest layout:\n",
                                     constraint_words(o, cur), basis);
            print_counts(v, o, cur);
            if (best) {
                const auto& c = v[*best].count;
                const auto& e = c.best->estimate;
                std::cout << fmt::format(
                    "\nanswer: {} tokens ({:.0f} steps) on {} GPUs, {}: {:.1f} {}days, {}{}\n", tokens_words(c.tokens),
                    c.steps, c.gpus, layout_label(c.best->plan), constrained_days(e, o), expected ? "expected " : "",
                    e.priced ? model::format_money(constrained_cost(e, o), cur) + " billed" : std::string("no price"),
                    v[*best].slow ? fmt::format("; {} tokens if every step is as slow as the 80% band's slow end",
                                                tokens_words(v[*best].slow->tokens))
                                  : std::string());
                std::cout << "\nthat plan:\n" << format_plan(c.best->plan, e);
            } else if (any_fits) {
                std::cout << fmt::format("\nno GPU count trains even one step within {}\n", constraint_words(o, cur));
            } else {
                std::cout << "\nno layout fits in memory at any searched GPU count (trainsim plan without --max-tokens "
                             "says what would make one fit)\n";
            }
        }
        return best ? kExitOk : (any_fits ? kExitNoPlanMeetsConstraints : kExitDoesNotFit);
    }

    // --models: per model, the most tokens, against its compute-optimal count (Hoffmann et al.
    // 2022: ~20 tokens per parameter); the largest model that reaches it is the answer, with the
    // plan that trains it there at the smallest bill (else the fewest days).
    struct ModelAnswer {
        std::string id;
        double params = 0, optimal_tokens = 0;
        std::vector<CountAnswer> counts;
        std::optional<std::size_t> most;
        std::optional<RankedPlan> at_optimal; // the plan that trains optimal_tokens within the constraints
        std::optional<std::size_t> at_optimal_count;
    };
    std::vector<ModelAnswer> answers;
    const auto dir = data_dir(a.data_dir);
    for (const auto& id : a.models) {
        model::Plan b = base;
        try {
            b.model = model_named(id, dir);
        } catch (const model::InputError& e) {
            plan_arg_error("--models", fmt::format("'{}': {}", id, e.what()));
        }
        ModelAnswer m;
        m.id = id;
        m.params = model::count_params(b.model).total;
        m.optimal_tokens = kComputeOptimalTokensPerParam * m.params;
        b.training.tokens = m.optimal_tokens;
        m.counts = answer(b, o, em, m.most);
        for (std::size_t i = 0; i < m.counts.size(); ++i) {
            const auto& c = m.counts[i].count;
            if (!c.best || c.tokens < m.optimal_tokens) continue;
            RankedPlan r = *c.best;
            retarget_tokens(r.estimate, r.plan, m.optimal_tokens);
            if (!constraints_missed(r.estimate, o).empty()) continue; // the whole-step rounding
            const bool better =
                !m.at_optimal || std::make_pair(constrained_cost(r.estimate, o), constrained_days(r.estimate, o)) <
                                     std::make_pair(constrained_cost(m.at_optimal->estimate, o),
                                                    constrained_days(m.at_optimal->estimate, o));
            if (better) {
                m.at_optimal = std::move(r);
                m.at_optimal_count = i;
            }
        }
        answers.push_back(std::move(m));
    }
    std::optional<std::size_t> largest;
    for (std::size_t i = 0; i < answers.size(); ++i)
        if (answers[i].at_optimal && (!largest || answers[i].params > answers[*largest].params)) largest = i;
    const bool any_fits = std::any_of(answers.begin(), answers.end(), [](const ModelAnswer& m) {
        return std::any_of(m.counts.begin(), m.counts.end(), [](const CountAnswer& c) { return c.count.best.has_value(); });
    });
    if (a.json) {
        nlohmann::json j{{"max_tokens", constraints}};
        nlohmann::json arr = nlohmann::json::array();
        for (const auto& m : answers) {
            nlohmann::json counts = nlohmann::json::array();
            for (const auto& c : m.counts) counts.push_back(count_json(c));
            arr.push_back({{"model", m.id},
                           {"params", m.params},
                           {"compute_optimal_tokens", m.optimal_tokens},
                           {"max_tokens", m.most ? m.counts[*m.most].count.tokens : 0.0},
                           {"max_tokens_num_gpus", m.most ? nlohmann::json(m.counts[*m.most].count.gpus) : nlohmann::json(nullptr)},
                           {"reaches_compute_optimal", m.at_optimal.has_value()},
                           {"plan_at_compute_optimal",
                            m.at_optimal ? plan_json(m.at_optimal->plan, m.at_optimal->estimate) : nlohmann::json(nullptr)},
                           {"counts", counts}});
        }
        j["models"] = arr;
        j["largest_model"] = largest ? nlohmann::json{{"model", answers[*largest].id},
                                                      {"params", answers[*largest].params},
                                                      {"tokens", answers[*largest].optimal_tokens},
                                                      {"plan", plan_json(answers[*largest].at_optimal->plan,
                                                                         answers[*largest].at_optimal->estimate)}}
                                     : nlohmann::json(nullptr);
        if (a.json_out)
            *a.json_out = std::move(j);
        else
            std::cout << j.dump(2) << "\n";
    } else {
        std::cout << fmt::format("the largest model trained on its compute-optimal tokens ({:.0f} per parameter, "
                                 "Hoffmann et al. 2022) within {} ({}), on {} ({}):\n",
                                 kComputeOptimalTokensPerParam, constraint_words(o, cur), basis, base.hardware.name,
                                 model::to_string(base.precision));
        std::cout << fmt::format("  {:<24} {:>8} {:>14} {:>10} {:>6}  {}\n", "model", "params", "optimal tokens",
                                 "max tokens", "GPUs", "compute-optimal within the constraints");
        for (const auto& m : answers) {
            std::string verdict = "no";
            if (m.at_optimal) {
                const auto& e = m.at_optimal->estimate;
                verdict = fmt::format("yes: {} GPUs {}, {:.1f} days, {}", m.at_optimal->plan.num_gpus(),
                                      layout_label(m.at_optimal->plan), constrained_days(e, o),
                                      e.priced ? model::format_money(constrained_cost(e, o), cur) : "no price");
            } else if (!m.most) {
                const bool fits = std::any_of(m.counts.begin(), m.counts.end(),
                                              [](const CountAnswer& c) { return c.count.best.has_value(); });
                verdict = fits ? "no: not one step within the constraints" : "no: does not fit in memory";
            }
            std::cout << fmt::format("  {:<24} {:>8} {:>14} {:>10} {:>6}  {}\n", m.id, tokens_words(m.params),
                                     tokens_words(m.optimal_tokens),
                                     m.most ? tokens_words(m.counts[*m.most].count.tokens) : "0",
                                     m.most ? fmt::format("{}", m.counts[*m.most].count.gpus) : "-", verdict);
        }
        if (largest) {
            const auto& m = answers[*largest];
            std::cout << fmt::format("\nanswer: {} ({} parameters) on {} tokens\n", m.id, tokens_words(m.params),
                                     tokens_words(m.optimal_tokens))
                      << format_plan(m.at_optimal->plan, m.at_optimal->estimate);
        } else {
            std::cout << "\nno model listed reaches its compute-optimal tokens within the constraints\n";
        }
    }
    return largest ? kExitOk : (any_fits ? kExitNoPlanMeetsConstraints : kExitDoesNotFit);
}

} // namespace trainsim::sim::cli
