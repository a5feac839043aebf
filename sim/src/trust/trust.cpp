#include "trainsim/sim/trust/trust.hpp"

#include "trainsim/model/accounting/flops.hpp"
#include "trainsim/model/accounting/layout.hpp"
#include "trainsim/model/core/errors.hpp"
#include "trainsim/model/framework/framework_profile.hpp"
#include "trainsim/sim/step/executor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace trainsim::sim {

double quantile(const std::vector<double>& sorted, double q) {
    if (sorted.empty()) return 0;
    const double pos = q * static_cast<double>(sorted.size() - 1);
    const auto i = static_cast<std::size_t>(std::floor(pos));
    const double f = pos - static_cast<double>(i);
    if (i + 1 >= sorted.size()) return sorted.back();
    return sorted[i] * (1.0 - f) + sorted[i + 1] * f;
}

namespace {

// Seen rows guided constants, so their errors understate those of a plan nobody tuned to: a band
// resting on them has its deviations from the median widened by this factor.
constexpr double kSeenWidening = 1.0;
// A band looked up at a coarser key than the plan's own regime is widened by this factor per
// level dropped (the finer regime had too few rows to say), except the host level of a GPU-bound
// plan (band_for).
constexpr double kFallbackWidening = 1.1;

constexpr const char* kScales[] = {"1-8", "9-256", "257+"};

} // namespace

std::string Regime::key(int levels) const {
    if (levels <= 0) return "all";
    std::string k = family;
    if (levels > 1) k += "/" + gpu_gen;
    if (levels > 2) k += "/" + scale;
    if (levels > 3) k += "/" + tokens;
    if (levels > 4 && !host.empty()) k += "/" + host;
    return k;
}

std::string framework_family(const std::string& framework) {
    if (model::canonical_name(framework).empty()) return "megatron-core";
    // The family the name resolves to, aliases included ("Megatron Bridge" -> nemo).
    const std::string fw = model::framework_profile(framework).family;
    if (fw.empty()) return "generic";
    if (fw.starts_with("megatron-lm")) return "megatron-lm";
    if (fw.starts_with("megatron-deepspeed") || fw.starts_with("deepspeed")) return "deepspeed";
    if (fw.starts_with("llm-foundry") || fw.starts_with("torchtitan")) return "fsdp";
    // Hugging Face Transformers is the generic eager profile under a name: its runs' errors are
    // the generic profile's. JAX / XLA has a profile of its own, so its rows are kept out of the
    // band of stacks trainsim has no profile for.
    if (fw == "hf-transformers") return "generic";
    if (fw == "jax-xla") return "xla";
    return "megatron-core"; // megatron-core, nemo
}

const std::string& trust_gpu(const model::HardwareProfile& hw) {
    return hw.base.empty() ? hw.id : hw.base;
}

Regime regime_of(const model::Plan& plan, const StepResult* step) {
    Regime r;
    r.family = framework_family(plan.parallel.framework);
    const std::string& id = trust_gpu(plan.hardware);
    r.gpu_gen = id.starts_with("a100")                                                         ? "ampere"
                : (id.starts_with("h100") || id.starts_with("h200") || id.starts_with("h800")) ? "hopper"
                                                                                               : "other";
    const int n = plan.num_gpus();
    r.scale = n <= 8 ? kScales[0] : n <= 256 ? kScales[1] : kScales[2];
    const double tokens = static_cast<double>(plan.training.global_batch) * plan.training.seq_len / std::max(1, n);
    r.tokens = tokens < 4096 ? "<4k" : tokens < 16384 ? "4k-16k" : "16k+";
    if (step != nullptr && step->step_time.seconds() > 0)
        r.host = step->host_busy.seconds() >= kHostHeavyShare * step->step_time.seconds() ? "host-heavy" : "gpu-bound";
    return r;
}

PlanFeatures features_of(const model::Plan& plan) {
    PlanFeatures f;
    f.params = model::count_params(plan.model).total;
    f.gpus = plan.num_gpus();
    f.gpu = trust_gpu(plan.hardware);
    f.precision = model::to_string(plan.precision);
    f.family = framework_family(plan.parallel.framework);
    f.seq_len = plan.training.seq_len;
    f.cp = plan.parallel.cp > 1;
    // TP innermost (Megatron order): a TP group spans nodes when it is larger than a node.
    f.tp_across_nodes = plan.parallel.tp > plan.cluster.gpus_per_node;
    return f;
}

std::vector<std::string_view> layout_feature_keys(const PlanFeatures& f) {
    std::vector<std::string_view> keys;
    if (f.cp) keys.push_back(kFeatureCp);
    if (f.tp_across_nodes) keys.push_back(kFeatureTpAcrossNodes);
    return keys;
}

ErrorModel build_error_model(const std::vector<ErrorSample>& samples) {
    ErrorModel m;
    m.rows = static_cast<int>(samples.size());
    // The evidence's extent, per GPU.
    std::map<std::string, GpuEvidence> per_gpu;
    std::map<std::string, std::set<std::string>> precisions;
    std::set<std::string> families;
    for (const auto& s : samples) {
        const auto& f = s.features;
        auto [it, fresh] = per_gpu.try_emplace(f.gpu);
        auto& g = it->second;
        if (fresh) {
            g.gpu = f.gpu;
            g.params_min = g.params_max = f.params;
        }
        g.params_min = std::min(g.params_min, f.params);
        g.params_max = std::max(g.params_max, f.params);
        g.gpus_max = std::max(g.gpus_max, f.gpus);
        precisions[f.gpu].insert(f.precision);
        m.evidence.seq_max = std::max(m.evidence.seq_max, f.seq_len);
        m.evidence.cp_rows += f.cp ? 1 : 0;
        m.evidence.tp_across_nodes_rows += f.tp_across_nodes ? 1 : 0;
        families.insert(f.family);
    }
    for (auto& [id, g] : per_gpu) {
        g.precisions.assign(precisions[id].begin(), precisions[id].end());
        m.evidence.gpus.push_back(g);
    }
    m.evidence.families.assign(families.begin(), families.end());

    // Between-GPU share of the variance.
    if (!samples.empty()) {
        double mean = 0;
        for (const auto& s : samples) mean += s.error;
        mean /= static_cast<double>(samples.size());
        std::map<std::string, std::pair<double, int>> by_gpu;
        double total = 0;
        for (const auto& s : samples) {
            by_gpu[s.features.gpu].first += s.error;
            ++by_gpu[s.features.gpu].second;
            total += (s.error - mean) * (s.error - mean);
        }
        double between = 0;
        for (const auto& [gpu, sn] : by_gpu) {
            const double g = sn.first / sn.second - mean;
            between += sn.second * g * g;
        }
        m.hardware_share = total > 0 ? std::round(between / total * 1e6) / 1e6 : 0.0;
    }

    // Rows per key at every level (0 = all ... 5 = the full regime).
    struct Acc {
        std::vector<double> errors, held_out_errors;
        int held_out = 0;
        std::map<std::string, std::vector<double>> by_source;
    };
    std::map<std::string, Acc> acc;
    auto add = [&](const std::string& key, const ErrorSample& s) {
        auto& a = acc[key];
        a.errors.push_back(s.error);
        if (s.held_out) a.held_out_errors.push_back(s.error);
        a.held_out += s.held_out ? 1 : 0;
        a.by_source[s.file + ":" + s.source].push_back(s.error);
    };
    for (const auto& s : samples) {
        for (int level = 0; level <= s.regime.levels(); ++level) add(s.regime.key(level), s);
        // The runs that used a layout feature, whatever their regime (band_for).
        for (const auto key : layout_feature_keys(s.features)) add(std::string(key), s);
    }
    for (auto& [key, a] : acc) {
        if (static_cast<int>(a.errors.size()) < kMinRegimeRows) continue;
        const bool feature = key.starts_with(kFeaturePrefix);
        // Held-out rows where there are enough of them and they are at least half of the regime's
        // (else a few held-out rows would stand for many seen ones); otherwise every row, widened.
        // A feature's band takes every run that used it: it says how far they read, and held-out
        // rows of one source would speak for the others.
        const bool held_out =
            !feature && a.held_out >= kMinRegimeRows && 2 * a.held_out >= static_cast<int>(a.errors.size());
        auto& errors = held_out ? a.held_out_errors : a.errors;
        std::sort(errors.begin(), errors.end());
        RegimeBand b;
        b.key = key;
        b.rows = static_cast<int>(a.errors.size());
        b.held_out = a.held_out;
        b.sources = static_cast<int>(a.by_source.size());
        b.p50 = quantile(errors, 0.5);
        double lo = b.p50 - quantile(errors, 0.1);
        double hi = quantile(errors, 0.9) - b.p50;
        // Leave one source out: a new user's plan is like a source the constants were not set on,
        // so the band must also span how far whole sources read (their median errors), where the
        // rows of one large source would hide the others.
        std::vector<double> medians;
        for (auto& [src, e] : a.by_source) {
            std::sort(e.begin(), e.end());
            medians.push_back(quantile(e, 0.5));
        }
        std::sort(medians.begin(), medians.end());
        // A feature's band is not: its sources differ in framework, GPU and scale, which their
        // regime bands (and their spread of sources) already stand for; it says how far runs
        // using the feature read.
        if (medians.size() >= 3 && !feature) {
            lo = std::max(lo, b.p50 - quantile(medians, 0.1));
            hi = std::max(hi, quantile(medians, 0.9) - b.p50);
        }
        const double w = held_out ? 1.0 : kSeenWidening;
        b.p10 = b.p50 - w * lo;
        b.p90 = b.p50 + w * hi;
        b.basis = feature    ? fmt::format("{} runs of {} sources that used it ({} held out), not widened", b.rows,
                                           b.sources, a.held_out)
                  : held_out ? fmt::format("{} held-out rows of {} sources", a.held_out, b.sources)
                             : fmt::format("{} seen rows of {} sources, widened x{}", b.rows, b.sources, kSeenWidening);
        m.bands.push_back(std::move(b));
    }
    std::sort(m.bands.begin(), m.bands.end(), [](const auto& x, const auto& y) { return x.key < y.key; });
    return m;
}

nlohmann::json error_model_json(const ErrorModel& m) {
    nlohmann::json bands = nlohmann::json::array();
    auto round6 = [](double x) { return std::round(x * 1e6) / 1e6; };
    for (const auto& b : m.bands) {
        bands.push_back({{"regime", b.key},
                         {"rows", b.rows},
                         {"held_out", b.held_out},
                         {"sources", b.sources},
                         {"p10", round6(b.p10)},
                         {"p50", round6(b.p50)},
                         {"p90", round6(b.p90)},
                         {"basis", b.basis}});
    }
    const auto& e = m.evidence;
    nlohmann::json gpus = nlohmann::json::array();
    for (const auto& g : e.gpus)
        gpus.push_back({{"gpu", g.gpu},
                        {"params_min", g.params_min},
                        {"params_max", g.params_max},
                        {"gpus_max", g.gpus_max},
                        {"precisions", g.precisions}});
    return {{"about",
             "signed error (predicted - measured) / measured of tokens/s/GPU by regime; generated by "
             "scripts/error-model (trainsim error-model), docs/trust.md"},
            {"rows", m.rows},
            {"min_regime_rows", kMinRegimeRows},
            {"hardware_share", m.hardware_share},
            {"evidence",
             {{"gpus", gpus},
              {"families", e.families},
              {"seq_max", e.seq_max},
              {"cp_rows", e.cp_rows},
              {"tp_across_nodes_rows", e.tp_across_nodes_rows}}},
            {"bands", bands}};
}

ErrorModel error_model_from_json(const nlohmann::json& j, const std::string& file) {
    auto fail = [&](const std::string& key, const std::string& msg) {
        throw model::InputError("error model", {model::Diagnostic{file, 0, 0, key, msg}});
    };
    ErrorModel m;
    try {
        m.rows = j.at("rows").get<int>();
        m.hardware_share = j.at("hardware_share").get<double>();
        if (!(m.hardware_share >= 0 && m.hardware_share <= 1)) fail("hardware_share", "must lie in [0, 1]");
        const auto& e = j.at("evidence");
        for (const auto& g : e.at("gpus")) {
            GpuEvidence x;
            x.gpu = g.at("gpu").get<std::string>();
            x.params_min = g.at("params_min").get<double>();
            x.params_max = g.at("params_max").get<double>();
            x.gpus_max = g.at("gpus_max").get<int>();
            x.precisions = g.at("precisions").get<std::vector<std::string>>();
            m.evidence.gpus.push_back(std::move(x));
        }
        m.evidence.families = e.at("families").get<std::vector<std::string>>();
        m.evidence.seq_max = e.at("seq_max").get<int>();
        m.evidence.cp_rows = e.at("cp_rows").get<int>();
        m.evidence.tp_across_nodes_rows = e.at("tp_across_nodes_rows").get<int>();
        if (m.evidence.cp_rows < 0 || m.evidence.tp_across_nodes_rows < 0)
            fail("evidence", "row counts must not be negative");
        for (const auto& b : j.at("bands")) {
            RegimeBand r;
            r.key = b.at("regime").get<std::string>();
            r.rows = b.at("rows").get<int>();
            r.held_out = b.at("held_out").get<int>();
            r.sources = b.at("sources").get<int>();
            r.p10 = b.at("p10").get<double>();
            r.p50 = b.at("p50").get<double>();
            r.p90 = b.at("p90").get<double>();
            r.basis = b.at("basis").get<std::string>();
            if (!(r.p10 <= r.p50 && r.p50 <= r.p90) || !(r.p10 > -1.0) || !std::isfinite(r.p90))
                fail("bands." + r.key, "quantiles must be finite, above -100% and ordered p10 <= p50 <= p90");
            m.bands.push_back(std::move(r));
        }
    } catch (const nlohmann::json::exception& ex) {
        fail("", fmt::format("not an error-model table: {}", ex.what()));
    }
    if (std::none_of(m.bands.begin(), m.bands.end(), [](const RegimeBand& b) { return b.key == "all"; }))
        fail("bands", "no band for regime 'all'");
    return m;
}

Band band_for(const ErrorModel& m, const model::Plan& plan, const StepResult* step) {
    const Regime r = regime_of(plan, step);
    const StepBreakdown* breakdown = step != nullptr ? &step->breakdown : nullptr;
    const RegimeBand* found = nullptr;
    int level = r.levels();
    for (; level >= 0 && found == nullptr; --level) {
        const auto key = r.key(level);
        for (const auto& b : m.bands)
            if (b.key == key) found = &b;
    }
    ++level; // the level found at
    Band band;
    if (found == nullptr) return band; // unreachable with a loaded table (it has "all")
    band.regime = found->key;
    band.rows = found->rows;
    double lo = found->p50 - found->p10, hi = found->p90 - found->p50;
    // The host level refines a regime where its rows split (vTrain's). A GPU-bound plan whose
    // regime has no band there is judged by the regime's own rows, which outside vTrain are all
    // GPU-bound: not widened for it. A host-heavy one then rests on rows unlike it: widened.
    const int skipped = r.levels() - level;
    const int dropped = std::max(0, 4 - level) + (r.host == "host-heavy" && level < 5 ? 1 : 0);
    const double fallback = std::pow(kFallbackWidening, dropped);
    band.basis = found->basis;
    // A layout feature the regime's rows mostly lack (CP, TP across nodes): the band reaches at
    // least the p10 / p90 of every published run that used it (around the regime's median; set
    // below, after the widening and a calibration's narrowing, which is the GPU's part).
    const auto f = features_of(plan);
    double floor_lo = 0, floor_hi = 0;
    std::string floor_note;
    for (const auto key : layout_feature_keys(f)) {
        const auto fb = std::find_if(m.bands.begin(), m.bands.end(), [&](const RegimeBand& b) { return b.key == key; });
        if (fb == m.bands.end()) continue;
        floor_lo = std::max(floor_lo, found->p50 - fb->p10);
        floor_hi = std::max(floor_hi, fb->p90 - found->p50);
        floor_note += fmt::format("; reaches the p10 / p90 of the {} published runs with {} ({:+.1f}% / {:+.1f}%)",
                                  fb->rows, key.substr(kFeaturePrefix.size()), 100 * fb->p10, 100 * fb->p90);
    }
    if (skipped > 0)
        band.basis += fmt::format("; looked up at '{}' ({} finer level(s) had under {} rows), {}", found->key, skipped,
                                  kMinRegimeRows,
                                  dropped > 0 ? fmt::format("widened x{:.2f}", fallback)
                                              : std::string("not widened (a GPU-bound plan)"));

    // Outside the evidence: each reason widens the band.
    const auto& e = m.evidence;
    auto has = [](const std::vector<std::string>& v, const std::string& x) {
        return std::find(v.begin(), v.end(), x) != v.end();
    };
    auto& ood = band.out_of_domain;
    const auto g = std::find_if(e.gpus.begin(), e.gpus.end(), [&](const GpuEvidence& x) { return x.gpu == f.gpu; });
    if (g == e.gpus.end()) {
        ood.push_back(fmt::format("GPU '{}' has no published run", f.gpu));
    } else {
        if (!has(g->precisions, f.precision))
            ood.push_back(fmt::format("{} on {}: no published run in this precision", f.precision, f.gpu));
        if (f.params < g->params_min / 2 || f.params > g->params_max * 2)
            ood.push_back(fmt::format("a model of {:.3g} parameters: the runs on {} checked {:.3g} to {:.3g}", f.params,
                                      f.gpu, g->params_min, g->params_max));
        if (f.gpus > 2 * g->gpus_max)
            ood.push_back(
                fmt::format("{} GPUs: more than twice the largest run on {} ({})", f.gpus, f.gpu, g->gpus_max));
    }
    if (!has(e.families, f.family)) ood.push_back(fmt::format("framework family {} has no published run", f.family));
    if (f.seq_len > e.seq_max)
        ood.push_back(fmt::format("sequence of {} tokens, longer than any checked ({})", f.seq_len, e.seq_max));
    auto feature = [&](bool used, int rows, const char* what) {
        if (!used || rows >= kMinRegimeRows) return;
        ood.push_back(rows == 0 ? fmt::format("{}: no published run did it", what)
                                : fmt::format("{}: {} published run(s) did it, under the {} a band needs", what, rows,
                                              kMinRegimeRows));
    };
    feature(f.cp, e.cp_rows, "context parallelism");
    feature(f.tp_across_nodes, e.tp_across_nodes_rows, "TP across nodes");
    // The fabric the node really has: a GPU without NVLink (L20, L40S, RTX 4090: nvlink_bandwidth
    // "0 GB/s") talks over PCIe whatever cluster.intra_node says (the topology ignores it there).
    if (plan.hardware.nvlink_bandwidth.value() <= 0)
        ood.push_back("PCIe inside the node (the GPU has no NVLink): every published run used NVSwitch");
    else if (plan.cluster.intra != model::IntraFabric::nvswitch)
        ood.push_back(
            fmt::format("{} inside the node: every published run used NVSwitch", model::to_string(plan.cluster.intra)));
    // Fine-tuning (issue #42 item 5): the published runs (shared/validation's schema has no method
    // column) are all pre-training with a full optimizer. A full fine-tune runs the same workload,
    // still outside that evidence (other stacks: torchtune, LLaMA-Factory, DeepSpeed on few GPUs);
    // LoRA / QLoRA run a workload none of them did (frozen weights, adapter GEMMs, NF4
    // dequantisation).
    if (plan.training.method != model::Method::pretrain)
        ood.push_back(fmt::format("method {}: every published run pre-trained every weight",
                                  model::to_string(plan.training.method)));
    const double widen = fallback * std::pow(kOutOfDomainWidening, static_cast<double>(ood.size()));
    lo *= widen;
    hi *= widen;
    // A calibrated profile: its own fits stand for the GPU part of the error.
    const auto& hw = plan.hardware;
    if (breakdown != nullptr && hw.sources.contains("calibration.compute_residual") &&
        hw.sources.contains("calibration.comm_residual")) {
        const double total = breakdown->total().seconds();
        if (total > 0) {
            const double c = (breakdown->compute() + breakdown->optimizer).seconds() / total;
            const double k =
                (breakdown->tp_exposed + breakdown->cp_exposed + breakdown->dp_exposed + breakdown->pp_exposed)
                    .seconds() /
                total;
            const double resid = std::hypot(c * hw.compute_fit_residual, k * hw.comm_fit_residual);
            constexpr double kZ90 = 1.2816;
            const double keep = 1.0 - m.hardware_share;
            // Calibration narrows, never widens (issue #45): fits worse than the variance they
            // remove leave the band as it was.
            lo = std::min(lo, std::sqrt(lo * lo * keep + kZ90 * kZ90 * resid * resid));
            hi = std::min(hi, std::sqrt(hi * hi * keep + kZ90 * kZ90 * resid * resid));
            band.basis += fmt::format(
                "; narrowed by the calibrated profile's fits (residuals {:.1f}% compute, {:.1f}% "
                "communication; {:.0f}% of the variance is between GPUs)",
                100 * hw.compute_fit_residual, 100 * hw.comm_fit_residual, 100 * m.hardware_share);
        }
    }
    if (floor_lo > lo || floor_hi > hi) {
        lo = std::max(lo, floor_lo);
        hi = std::max(hi, floor_hi);
        band.basis += floor_note;
    }
    // Errors are fractions of the measured throughput: the measured time is at least ~0 (a
    // band edge below -90% would claim a run 10x faster than predicted).
    const double p10 = std::max(found->p50 - lo, -0.9);
    band.time_p10 = 1.0 + p10;
    band.time_p50 = 1.0 + found->p50;
    band.time_p90 = 1.0 + found->p50 + hi;
    if (!ood.empty())
        band.basis += fmt::format("; outside the evidence ({} reason(s)): widened x{:.2f}", ood.size(),
                                  std::pow(kOutOfDomainWidening, static_cast<double>(ood.size())));
    return band;
}

} // namespace trainsim::sim
