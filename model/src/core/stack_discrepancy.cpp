#include "trainsim/model/core/stack_discrepancy.hpp"

#include <Eigen/Dense>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace trainsim::model {

namespace {

constexpr std::size_t F = 5;

// Grids of the coordinate search. Length scales in log2 units: 0.5 (a factor of 2 in tp or the
// micro-batch already decorrelates: a different GEMM tile or split) to 8 (the residual barely
// changes over the span of layouts one meets); large enough is "does not matter".
constexpr std::array<double, 6> kLengths{0.5, 1, 2, 4, 8, 64};
// The signal and noise variances as shares of the residuals' mean square.
constexpr std::array<double, 7> kSignalShares{0.0, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0};
constexpr std::array<double, 7> kNoiseShares{0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0};
// Below this noise variance (log^2, a 0.3% scatter) the kernel matrix is near singular; no run
// repeats to that precision anyway (measured step times scatter ~1% between runs).
constexpr double kMinNoiseVar = 1e-5;
// The marginal likelihood must beat independent noise alone by this much (log units; Kass and
// Raftery 1995 call a Bayes factor above e^1.5 ~ 4.5 "positive" evidence, their 2 ln B > 3)
// before a structure is carried to predictions.
constexpr double kMinLogEvidence = 1.5;

double log2i(int v) { return std::log2(static_cast<double>(std::max(1, v))); }

std::array<double, F> features_of(const StackFitRun& r) {
    return {log2i(r.tp), log2i(r.pp), log2i(r.cp), log2i(r.dp), log2i(r.micro_batch)};
}

double kernel(const std::string& shape_a, const std::array<double, F>& a, const std::string& shape_b,
              const std::array<double, F>& b, double signal, const std::array<double, F>& len) {
    if (shape_a != shape_b) return 0.0;
    double d2 = 0;
    for (std::size_t f = 0; f < F; ++f) {
        const double d = (a[f] - b[f]) / len[f];
        d2 += d * d;
    }
    return signal * std::exp(-0.5 * d2);
}

struct Trial {
    double signal = 0, noise = 0;
    std::array<double, F> len{};
};

Eigen::MatrixXd gram(const std::vector<LayoutPoint>& pts, const Trial& t) {
    const auto n = static_cast<Eigen::Index>(pts.size());
    Eigen::MatrixXd K(n, n);
    for (Eigen::Index i = 0; i < n; ++i)
        for (Eigen::Index j = 0; j <= i; ++j) {
            const auto& a = pts[static_cast<std::size_t>(i)];
            const auto& b = pts[static_cast<std::size_t>(j)];
            const double k = kernel(a.shape, a.features, b.shape, b.features, t.signal, t.len);
            K(i, j) = k;
            K(j, i) = k;
        }
    K.diagonal().array() += t.noise;
    return K;
}

// log p(r | trial) = -r' K^-1 r / 2 - log|K| / 2 - n log(2 pi) / 2; -inf where K is not positive definite.
double log_marginal(const std::vector<LayoutPoint>& pts, const Eigen::VectorXd& r, const Trial& t) {
    const Eigen::LLT<Eigen::MatrixXd> llt(gram(pts, t));
    if (llt.info() != Eigen::Success) return -std::numeric_limits<double>::infinity();
    const Eigen::VectorXd a = llt.solve(r);
    const double logdet = 2.0 * llt.matrixL().toDenseMatrix().diagonal().array().log().sum();
    return -0.5 * r.dot(a) - 0.5 * logdet - 0.5 * static_cast<double>(r.size()) * std::log(2 * M_PI);
}

std::vector<LayoutPoint> points_of(const std::vector<StackFitRun>& runs) {
    std::vector<LayoutPoint> pts;
    pts.reserve(runs.size());
    for (const auto& r : runs) pts.push_back(layout_point(r));
    return pts;
}

Eigen::VectorXd residuals_of(const std::vector<StackFitRun>& runs) {
    Eigen::VectorXd r(static_cast<Eigen::Index>(runs.size()));
    for (std::size_t i = 0; i < runs.size(); ++i) r(static_cast<Eigen::Index>(i)) = run_residual_log(runs[i]);
    return r;
}

} // namespace

LayoutPoint layout_point(const Plan& plan) {
    const auto& m = plan.model;
    LayoutPoint p;
    p.shape = fmt::format("L{} h{} a{} kv{} d{} f{} {} v{} s{} {} {} recompute {}", m.layers, m.hidden, m.heads,
                          m.kv_heads, m.head_dim, m.ffn, to_string(m.ffn_type), m.vocab, plan.training.seq_len,
                          plan.hardware.id, to_string(plan.precision), to_string(plan.parallel.recompute));
    const auto& par = plan.parallel;
    p.features = {log2i(par.tp), log2i(par.pp), log2i(par.cp), log2i(par.dp), log2i(plan.training.micro_batch)};
    return p;
}

LayoutPoint layout_point(const StackFitRun& run) {
    LayoutPoint p;
    p.shape = run.shape;
    p.features = features_of(run);
    return p;
}

double run_residual_log(const StackFitRun& run) {
    return run.measured > 0 && run.fitted > 0 ? std::log(run.measured / run.fitted) : 0.0;
}

void prepare_discrepancy(StackDiscrepancy& d, const std::vector<StackFitRun>& runs) {
    d.alpha.clear();
    d.k_inv.clear();
    if (!d.present || runs.empty()) return;
    const auto pts = points_of(runs);
    const Trial t{d.signal_var, std::max(d.noise_var, kMinNoiseVar), d.length};
    const Eigen::LLT<Eigen::MatrixXd> llt(gram(pts, t));
    if (llt.info() != Eigen::Success) {
        d.present = false;
        return;
    }
    const auto n = static_cast<Eigen::Index>(runs.size());
    const Eigen::VectorXd a = llt.solve(residuals_of(runs));
    const Eigen::MatrixXd inv = llt.solve(Eigen::MatrixXd::Identity(n, n));
    d.alpha.assign(a.data(), a.data() + n);
    d.k_inv.assign(inv.data(), inv.data() + n * n);
}

StackDiscrepancy fit_discrepancy(const std::vector<StackFitRun>& runs) {
    StackDiscrepancy d;
    if (runs.size() < kDiscrepancyMinRuns || runs.size() > kDiscrepancyMaxRuns) return d;
    for (const auto& r : runs)
        if (r.shape.empty() || r.micro_batch < 1 || !(r.measured > 0) || !(r.fitted > 0)) return d;
    const auto pts = points_of(runs);
    const Eigen::VectorXd r = residuals_of(runs);
    const double ms = std::max(r.squaredNorm() / static_cast<double>(r.size()), kMinNoiseVar);

    // Independent noise alone (no signal): the baseline the structure must beat.
    double best_noise_only = -std::numeric_limits<double>::infinity();
    for (double ns : kNoiseShares)
        best_noise_only = std::max(best_noise_only, log_marginal(pts, r, Trial{0, std::max(ms * ns, kMinNoiseVar), {}}));

    // Coordinate search: each pass sets every hyperparameter in turn to its best grid value with
    // the others held, until a pass changes nothing; from two starts (short and long length
    // scales), keeping the better optimum.
    auto trial_of = [&](std::size_t s, std::size_t nn, const std::array<std::size_t, F>& l) {
        Trial t{ms * kSignalShares[s], std::max(ms * kNoiseShares[nn], kMinNoiseVar), {}};
        for (std::size_t f = 0; f < F; ++f) t.len[f] = kLengths[l[f]];
        return t;
    };
    double best = -std::numeric_limits<double>::infinity();
    std::size_t si = 0, ni = 0;
    std::array<std::size_t, F> li{};
    for (const std::size_t start_len : {std::size_t{1}, std::size_t{3}}) {
        std::size_t s_i = 4, n_i = 3;
        std::array<std::size_t, F> l_i{};
        l_i.fill(start_len);
        double here = log_marginal(pts, r, trial_of(s_i, n_i, l_i));
        for (int pass = 0; pass < 8; ++pass) {
            bool moved = false;
            auto best_index = [&](std::size_t& idx, std::size_t count) {
                std::size_t arg = idx;
                for (std::size_t v = 0; v < count; ++v) {
                    if (v == arg) continue;
                    const std::size_t keep = idx;
                    idx = v;
                    const double ll = log_marginal(pts, r, trial_of(s_i, n_i, l_i));
                    idx = keep;
                    if (ll > here + 1e-9) {
                        here = ll;
                        arg = v;
                    }
                }
                if (arg != idx) {
                    idx = arg;
                    moved = true;
                }
            };
            best_index(s_i, kSignalShares.size());
            best_index(n_i, kNoiseShares.size());
            for (std::size_t f = 0; f < F; ++f) best_index(l_i[f], kLengths.size());
            if (!moved) break;
        }
        if (here > best) {
            best = here;
            si = s_i;
            ni = n_i;
            li = l_i;
        }
    }
    if (!(best > best_noise_only + kMinLogEvidence) || kSignalShares[si] == 0.0) return d;
    const Trial t = trial_of(si, ni, li);
    d.present = true;
    d.signal_var = t.signal;
    d.noise_var = t.noise;
    d.length = t.len;
    prepare_discrepancy(d, runs);
    if (!d.present) return d;
    // Leave-one-run-out errors of the process, exact for a Gaussian process (Rasmussen and
    // Williams 2006, eq. 5.12): r_i - mu_-i = alpha_i / [K^-1]_ii.
    const auto n = runs.size();
    double sq = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const double e = d.alpha[i] / d.k_inv[i * n + i];
        sq += e * e;
    }
    d.loo_sd_log = std::sqrt(sq / static_cast<double>(n));
    return d;
}

DiscrepancyAt discrepancy_at(const StackProfile& stack, const LayoutPoint& at) {
    DiscrepancyAt out;
    const auto& d = stack.discrepancy;
    if (!d.present || d.alpha.size() != stack.runs.size() || d.k_inv.size() != d.alpha.size() * d.alpha.size()) {
        out.var_log = stack.loo_sd_log * stack.loo_sd_log;
        return out;
    }
    const std::size_t n = stack.runs.size();
    std::vector<double> k(n);
    for (std::size_t i = 0; i < n; ++i) {
        // The runs' own fields, not a LayoutPoint each: this runs for every plan a search bounds.
        const auto& run = stack.runs[i];
        k[i] = kernel(at.shape, at.features, run.shape, features_of(run), d.signal_var, d.length);
        out.max_corr = std::max(out.max_corr, d.signal_var > 0 ? k[i] / d.signal_var : 0.0);
        out.mean_log += k[i] * d.alpha[i];
    }
    double quad = 0;
    for (std::size_t i = 0; i < n; ++i) {
        if (k[i] == 0) continue;
        for (std::size_t j = 0; j < n; ++j) quad += k[i] * d.k_inv[i * n + j] * k[j];
    }
    out.var_log = std::max(0.0, d.signal_var - quad) + d.noise_var;
    return out;
}

} // namespace trainsim::model
