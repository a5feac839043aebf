#include "trainsim/sim/stack/stack_fit.hpp"

#include "trainsim/model/core/stack_discrepancy.hpp"
#include "trainsim/model/framework/framework_profile.hpp"
#include "trainsim/sim/run/estimate.hpp"
#include "trainsim/sim/search/parallel_for.hpp"
#include "trainsim/sim/validate/validate.hpp"

#include <Eigen/Dense>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <stdexcept>

namespace trainsim::sim {

namespace {

constexpr std::size_t P = model::kStackParams;
// Finite-difference step in log factor: 5% moves every cost the parameter scales by 5%, far above
// the simulator's picosecond resolution and small against the parameters' prior widths (>= 0.2).
constexpr double kStep = 0.05;
// A parameter is freed only where the runs add at least this much precision to its prior (data
// information x prior variance): below it they barely exercise it.
constexpr double kMinInformation = 0.1;
// The runs constrain a parameter when its posterior sd is at most this fraction of its prior's.
constexpr double kConstrainedShare = 0.5;
// The runs' scatter is measured from the fit's residuals only with this many runs beyond the
// parameters fitted; with fewer the assumed scatter stays.
constexpr long kMinDofForScatter = 3;
// Up to this many runs, each run's leave-one-out error is that of a real refit without it (a
// single run's is the stock profile's error on it); beyond, the linearised r_i / (1 - h_ii).
constexpr std::size_t kExactLooRuns = 12;

using Factors = std::array<double, P>;

// A plan the simulator gives no throughput for (it does not run at these factors).
struct NoThroughput : std::runtime_error {
    NoThroughput() : std::runtime_error("a run simulated to no throughput") {}
};

Factors factors_of(const Eigen::VectorXd& u) {
    Factors f{};
    for (std::size_t j = 0; j < P; ++j) f[j] = std::exp(u(static_cast<Eigen::Index>(j)));
    return f;
}

double log_lo(std::size_t j) { return std::log(model::stack_param_specs()[j].lo); }
double log_hi(std::size_t j) { return std::log(model::stack_param_specs()[j].hi); }
double tau(std::size_t j) { return model::stack_param_specs()[j].prior_sd_log; }

// log tokens/s/GPU of a plan with the stack factors applied to `base` (the plan's own hardware).
double log_throughput(const model::Plan& plan, const model::HardwareProfile& base, const Factors& f) {
    model::Plan p = plan;
    p.hardware = model::apply_stack(base, f, "");
    p.stack.reset();  // the factors alone: no stack's discrepancy on top (fits and sensitivities)
    const auto e = estimate_plan(p, {}, /*simulate_even_if_too_big=*/true);
    if (!(e.tokens_per_s_per_gpu > 0)) throw NoThroughput{};
    return std::log(e.tokens_per_s_per_gpu);
}

struct Run {
    const model::ValidationRow* row;
    model::Plan plan;            // blank cells tuned (at the factors of the last tuning)
    double log_measured = 0;
};

class Fitter {
public:
    Fitter(std::vector<Run>& runs, const StackFitOptions& opt) : runs_(runs), opt_(opt) {}

    // Residuals r_i(u) (log predicted - log measured) of every run.
    Eigen::VectorXd residuals(const Eigen::VectorXd& u) {
        const auto f = factors_of(u);
        Eigen::VectorXd r(static_cast<Eigen::Index>(runs_.size()));
        parallel_for(runs_.size(), opt_.threads, [&](std::size_t i) {
            r(static_cast<Eigen::Index>(i)) =
                log_throughput(runs_[i].plan, runs_[i].row->plan.hardware, f) - runs_[i].log_measured;
        });
        sims_ += static_cast<int>(runs_.size());
        return r;
    }

    // d r / d u_j for the parameters in `cols`: a forward difference, backward at the upper bound.
    Eigen::MatrixXd jacobian(const Eigen::VectorXd& u, const Eigen::VectorXd& r0, const std::vector<std::size_t>& cols) {
        Eigen::MatrixXd J(r0.size(), static_cast<Eigen::Index>(cols.size()));
        for (std::size_t c = 0; c < cols.size(); ++c) {
            const auto j = static_cast<Eigen::Index>(cols[c]);
            Eigen::VectorXd up = u;
            double h = kStep;
            if (u(j) + h > log_hi(cols[c])) h = -kStep;
            up(j) += h;
            J.col(static_cast<Eigen::Index>(c)) = (residuals(up) - r0) / h;
        }
        return J;
    }

    [[nodiscard]] int simulations() const { return sims_; }

private:
    std::vector<Run>& runs_;
    const StackFitOptions& opt_;
    int sims_ = 0;
};

double objective(const Eigen::VectorXd& r, const Eigen::VectorXd& u, const std::vector<std::size_t>& free,
                 double sigma) {
    double v = r.squaredNorm() / (sigma * sigma);
    for (std::size_t j : free) v += std::pow(u(static_cast<Eigen::Index>(j)) / tau(j), 2);
    return v;
}

// Projected Levenberg-Marquardt on the MAP objective over the `free` parameters, from `u` (with its
// residuals `r`); leaves the optimum in u and r. Returns the iterations taken.
int minimise(Fitter& fitter, const std::vector<std::size_t>& free, double sigma, int max_iterations, Eigen::VectorXd& u,
             Eigen::VectorXd& r) {
    const auto k = static_cast<Eigen::Index>(free.size());
    if (k == 0) return 0;
    const double sigma2 = sigma * sigma;
    double mu = 1e-3;
    double obj = objective(r, u, free, sigma);
    int it = 0;
    while (it < max_iterations) {
        ++it;
        const Eigen::MatrixXd J = fitter.jacobian(u, r, free);
        Eigen::MatrixXd A = J.transpose() * J / sigma2;
        Eigen::VectorXd g = J.transpose() * r / sigma2;
        for (Eigen::Index c = 0; c < k; ++c) {
            const std::size_t j = free[static_cast<std::size_t>(c)];
            A(c, c) += 1.0 / (tau(j) * tau(j));
            g(c) += u(static_cast<Eigen::Index>(j)) / (tau(j) * tau(j));
        }
        // A parameter at a bound that the descent pushes further out is held there: the others'
        // step is solved without it (projecting afterwards would aim them at a point it cannot reach).
        for (Eigen::Index c = 0; c < k; ++c) {
            const std::size_t j = free[static_cast<std::size_t>(c)];
            const double uj = u(static_cast<Eigen::Index>(j));
            const bool held = (uj >= log_hi(j) - 1e-12 && g(c) < 0) || (uj <= log_lo(j) + 1e-12 && g(c) > 0);
            if (!held) continue;
            A.row(c).setZero();
            A.col(c).setZero();
            A(c, c) = 1.0;
            g(c) = 0;
        }
        bool accepted = false;
        double step_norm = 0;
        for (int tries = 0; tries < 8 && !accepted; ++tries) {
            Eigen::MatrixXd D = A;
            D.diagonal() *= 1.0 + mu;
            const Eigen::VectorXd delta = -D.ldlt().solve(g);
            Eigen::VectorXd trial = u;
            for (Eigen::Index c = 0; c < k; ++c) {
                const std::size_t j = free[static_cast<std::size_t>(c)];
                const auto jj = static_cast<Eigen::Index>(j);
                trial(jj) = std::clamp(u(jj) + delta(c), log_lo(j), log_hi(j));
            }
            Eigen::VectorXd rt;
            try {
                rt = fitter.residuals(trial);
            } catch (const NoThroughput&) {
                mu *= 10; // a run stops running there: a shorter step
                continue;
            }
            const double ot = objective(rt, trial, free, sigma);
            if (ot < obj) {
                step_norm = (trial - u).norm();
                u = trial;
                r = rt;
                obj = ot;
                mu = std::max(mu / 10, 1e-7);
                accepted = true;
            } else {
                mu *= 10;
            }
        }
        if (!accepted || step_norm < 1e-4) break;
    }
    return it;
}

void tune(std::vector<Run>& runs, const Factors& f, unsigned threads) {
    parallel_for(runs.size(), threads, [&](std::size_t i) {
        model::ValidationRow row = *runs[i].row;
        row.plan.hardware = model::apply_stack(row.plan.hardware, f, "");
        std::vector<std::string> choices = row.choices;
        model::Plan p = tune_blank_cells(row, choices);
        p.hardware = runs[i].row->plan.hardware; // the factors are applied per evaluation
        runs[i].plan = std::move(p);
    });
}

} // namespace

std::vector<std::string> beyond_evidence(const model::Plan& plan, const model::StackEvidence& e) {
    std::vector<std::string> out;
    if (e.max_gpus == 0) return out; // a hand-written stack profile states no evidence
    const auto& par = plan.parallel;
    // More GPUs or nodes than the runs had is not listed: the parameters they exercise (the network
    // across nodes above all) keep their priors' width where the runs did not constrain them, and
    // the plan's sensitivity to them widens its band (stack_band). Listed is what no parameter
    // stands for: a layout or a machine the runs never had.
    if (par.tp > e.max_tp) out.push_back(fmt::format("tp {} beyond the runs' {}", par.tp, e.max_tp));
    if (par.pp > e.max_pp) out.push_back(fmt::format("pp {} beyond the runs' {}", par.pp, e.max_pp));
    if (par.cp > e.max_cp) out.push_back(fmt::format("cp {} beyond the runs' {}", par.cp, e.max_cp));
    if (!e.gpus.empty() && std::find(e.gpus.begin(), e.gpus.end(), plan.hardware.id) == e.gpus.end())
        out.push_back(fmt::format("GPU '{}' not among the runs' ({})", plan.hardware.id, fmt::join(e.gpus, ", ")));
    const std::string fw = model::canonical_name(par.framework);
    if (!e.frameworks.empty() && std::find(e.frameworks.begin(), e.frameworks.end(), fw) == e.frameworks.end())
        out.push_back(fmt::format("framework '{}' not among the runs' ({})",
                                  par.framework.empty() ? std::string("none written: Megatron-Core defaults") : par.framework,
                                  fmt::join(e.frameworks, ", ")));
    return out;
}

StackFitResult fit_stack(const std::vector<model::ValidationRow>& rows, const StackFitOptions& opt) {
    StackFitResult res;
    std::vector<Run> runs;
    std::set<std::string> ids;
    for (const auto& row : rows) {
        if (!row.skip_reason.empty()) {
            res.unused.push_back(fmt::format("{}: {}", row.id, row.skip_reason));
            continue;
        }
        if (row.kind != "step") {
            res.unused.push_back(fmt::format("{}: kind '{}': only steady-state step runs fit a stack", row.id, row.kind));
            continue;
        }
        if (!ids.insert(row.id).second)
            throw std::invalid_argument(fmt::format("line {}: run id '{}' appears twice (each run is one row)", row.line,
                                                    row.id));
        try {
            (void)log_throughput(row.plan, row.plan.hardware, Factors{1, 1, 1, 1, 1, 1, 1, 1});
        } catch (const NoThroughput&) {
            res.unused.push_back(fmt::format("{} (line {}): the simulator gives it no throughput", row.id, row.line));
            continue;
        }
        runs.push_back({&row, row.plan, std::log(row.measured_tokens_per_s_per_gpu)});
    }
    if (runs.empty()) {
        std::string why = "no run can be fitted";
        for (const auto& u : res.unused) why += "; " + u;
        throw std::invalid_argument(why);
    }
    const auto n = static_cast<Eigen::Index>(runs.size());
    Factors ones{};
    ones.fill(1.0);
    tune(runs, ones, opt.threads);
    Fitter fitter(runs, opt);
    Eigen::VectorXd u = Eigen::VectorXd::Zero(P);
    Eigen::VectorXd r = fitter.residuals(u);
    const Eigen::VectorXd r_prior = r;

    // Which parameters the runs can say something about: data information x prior variance.
    std::vector<std::size_t> all(P);
    std::iota(all.begin(), all.end(), 0);
    const Eigen::MatrixXd J0 = fitter.jacobian(u, r, all);
    std::array<double, P> info{};
    for (std::size_t j = 0; j < P; ++j)
        info[j] = J0.col(static_cast<Eigen::Index>(j)).squaredNorm() / (opt.sigma_log * opt.sigma_log) * tau(j) * tau(j);
    std::vector<std::size_t> order = all;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return info[a] > info[b]; });
    std::vector<std::size_t> free;
    for (std::size_t j : order)
        if (info[j] >= kMinInformation && free.size() < runs.size()) free.push_back(j);
    std::sort(free.begin(), free.end());
    auto& s = res.stack;
    for (std::size_t j : order)
        if (info[j] >= kMinInformation && std::find(free.begin(), free.end(), j) == free.end())
            s.notes.push_back(fmt::format("{}: the runs exercise it but {} run{} fit at most {} parameter{}; it keeps "
                                          "its prior (add runs to fit it)",
                                          model::stack_param_specs()[j].name, runs.size(), runs.size() == 1 ? "" : "s",
                                          runs.size(), runs.size() == 1 ? "" : "s"));

    // Projected Levenberg-Marquardt over the free parameters, one retuning of blank cells between
    // two passes (a blank micro-batch or recompute tuned at the stock profile may not be the one
    // the fitted stack prefers).
    const auto k0 = static_cast<Eigen::Index>(free.size());
    Eigen::MatrixXd J;
    std::array<bool, P> released{};
    // The scatter of the runs about the model: assumed for the first pass; for the second, what the
    // first pass left (the model's own error on these runs counts as scatter, so that factors are
    // not pushed far from their priors to chase what no factor explains) -- never below the assumed
    // one, and only where enough runs are left over the parameters to measure it.
    double sigma_fit = opt.sigma_log;
    for (int pass = 0; pass < 2 && k0 > 0; ++pass) {
        if (pass == 1) {
            tune(runs, factors_of(u), opt.threads);
            r = fitter.residuals(u);
            if (n - k0 >= kMinDofForScatter)
                sigma_fit = std::clamp(std::sqrt(r.squaredNorm() / static_cast<double>(n - k0)), opt.sigma_log, 0.5);
        }
        res.iterations += minimise(fitter, free, sigma_fit, opt.max_iterations, u, r);
    }
    // A parameter the runs no longer feel at the optimum (another one took over what it stood for:
    // a host-bound step does not care about GEMM speed) is not constrained by them, and its MAP
    // value is its prior: it goes back there instead of keeping wherever the path left it. The
    // others are fitted again without it.
    if (!free.empty()) {
        J = fitter.jacobian(u, r, free);
        std::vector<std::size_t> kept;
        for (std::size_t c = 0; c < free.size(); ++c) {
            const std::size_t j = free[c];
            const double info_here = J.col(static_cast<Eigen::Index>(c)).squaredNorm() / (sigma_fit * sigma_fit) * tau(j) * tau(j);
            if (info_here >= kMinInformation) {
                kept.push_back(j);
                continue;
            }
            released[j] = true;
        }
        if (kept.size() != free.size()) {
            // Taken only where the data cannot tell the two apart: the objective may rise by at most
            // one (a chi-square unit) per parameter released; else the runs did depend on where
            // the released ones were, and the fit stays as it was.
            const double obj_before = objective(r, u, free, sigma_fit);
            const std::size_t n_released = free.size() - kept.size();
            Eigen::VectorXd u_try = u;
            for (std::size_t j = 0; j < P; ++j)
                if (released[j]) u_try(static_cast<Eigen::Index>(j)) = 0;
            Eigen::VectorXd r_try = fitter.residuals(u_try);
            res.iterations += minimise(fitter, kept, sigma_fit, opt.max_iterations, u_try, r_try);
            if (objective(r_try, u_try, kept, sigma_fit) <= obj_before + static_cast<double>(n_released)) {
                u = u_try;
                r = r_try;
                free = kept;
            } else {
                released.fill(false);
            }
            if (!free.empty()) J = fitter.jacobian(u, r, free);
        }
    }
    const auto k = static_cast<Eigen::Index>(free.size());

    // The uncertainty uses the scatter the fit used (the runs' own where they are enough to say it).
    const double sigma = sigma_fit;
    Eigen::MatrixXd cov = Eigen::MatrixXd::Zero(P, P);
    for (std::size_t j = 0; j < P; ++j) cov(static_cast<Eigen::Index>(j), static_cast<Eigen::Index>(j)) = tau(j) * tau(j);
    Eigen::VectorXd loo = r;
    if (k > 0) {
        Eigen::MatrixXd A = J.transpose() * J / (sigma * sigma);
        for (Eigen::Index c = 0; c < k; ++c) A(c, c) += 1.0 / std::pow(tau(free[static_cast<std::size_t>(c)]), 2);
        const Eigen::MatrixXd Ainv = A.inverse();
        for (Eigen::Index a = 0; a < k; ++a)
            for (Eigen::Index b = 0; b < k; ++b)
                cov(static_cast<Eigen::Index>(free[static_cast<std::size_t>(a)]),
                    static_cast<Eigen::Index>(free[static_cast<std::size_t>(b)])) = Ainv(a, b);
        // Leave-one-run-out residuals of the linearised fit: r_i / (1 - h_ii), h the hat matrix.
        const Eigen::MatrixXd H = J * Ainv * J.transpose() / (sigma * sigma);
        for (Eigen::Index i = 0; i < n; ++i) loo(i) = r(i) / std::max(1e-3, 1.0 - H(i, i));
        if (runs.size() <= kExactLooRuns) {
            // Few runs: refit without each (from the full fit, same parameters and scatter).
            for (std::size_t i = 0; i < runs.size(); ++i) {
                std::vector<Run> others;
                for (std::size_t o = 0; o < runs.size(); ++o)
                    if (o != i) others.push_back(runs[o]);
                Eigen::VectorXd ui = Eigen::VectorXd::Zero(P);
                if (!others.empty()) {
                    std::vector<std::size_t> free_i; // the most informative first, as the full fit chose
                    for (std::size_t j : order)
                        if (std::find(free.begin(), free.end(), j) != free.end() && free_i.size() < others.size())
                            free_i.push_back(j);
                    std::sort(free_i.begin(), free_i.end());
                    Fitter fi(others, opt);
                    ui = u;
                    for (std::size_t j = 0; j < P; ++j)
                        if (std::find(free_i.begin(), free_i.end(), j) == free_i.end()) ui(static_cast<Eigen::Index>(j)) = 0;
                    Eigen::VectorXd ri = fi.residuals(ui);
                    (void)minimise(fi, free_i, sigma_fit, opt.max_iterations, ui, ri);
                    res.simulations += fi.simulations();
                }
                std::vector<Run> just{runs[i]};
                Fitter one(just, opt);
                loo(static_cast<Eigen::Index>(i)) = one.residuals(ui)(0);
                res.simulations += one.simulations();
            }
        }
    }

    // A fit that predicts its own runs worse, each left out, than the stock profiles do has no
    // predictive value on them (its factors chase what differs between the runs, not what they
    // share): the priors stay, and the note says so. A single run's leave-one-out error is the
    // stock error by definition, so it is kept.
    if (k > 0 && loo.squaredNorm() > r_prior.squaredNorm() * (1 + 1e-9)) {
        s.notes.push_back(fmt::format(
            "the fit predicted its runs, each left out, worse than the stock profiles (rms {:.1f}% against {:.1f}%): "
            "the factors were not kept; the runs disagree in a way no factor stands for (add runs of other "
            "layouts or sizes, or read docs/accuracy.md for the mechanism)",
            100 * std::sqrt(loo.squaredNorm() / static_cast<double>(n)),
            100 * std::sqrt(r_prior.squaredNorm() / static_cast<double>(n))));
        u.setZero();
        r = r_prior;
        loo = r_prior;
        free.clear();
        for (std::size_t a = 0; a < P; ++a)
            for (std::size_t b = 0; b < P; ++b)
                cov(static_cast<Eigen::Index>(a), static_cast<Eigen::Index>(b)) = a == b ? tau(a) * tau(a) : 0.0;
    }

    s.name = opt.name;
    s.fitted = true;
    s.fitted_with = opt.fitted_with;
    s.fitted_on = opt.fitted_on;
    s.factors = factors_of(u);
    for (std::size_t a = 0; a < P; ++a)
        for (std::size_t b = 0; b < P; ++b)
            s.covariance_log[a * P + b] = cov(static_cast<Eigen::Index>(a), static_cast<Eigen::Index>(b));
    s.residual_sd_log = std::sqrt(r.squaredNorm() / static_cast<double>(n));
    s.loo_sd_log = std::sqrt(loo.squaredNorm() / static_cast<double>(n));
    for (std::size_t j = 0; j < P; ++j) {
        const auto& spec = model::stack_param_specs()[j];
        const bool is_free = std::find(free.begin(), free.end(), j) != free.end();
        s.free[j] = is_free;
        s.constrained[j] = is_free && s.sd_log(spec.param) <= kConstrainedShare * tau(j);
        const double uj = u(static_cast<Eigen::Index>(j));
        s.at_bound[j] = is_free && (uj <= log_lo(j) + 1e-9 || uj >= log_hi(j) - 1e-9);
        if (s.at_bound[j])
            s.notes.push_back(fmt::format(
                "{} ends at its bound {:.3g}: the runs want more than this parameter can physically give, so a "
                "mechanism the model lacks is at work (look at what {} stands for in these runs)",
                spec.name, s.factors[j], spec.scales));
        else if (released[j])
            s.notes.push_back(fmt::format("{}: the runs stopped constraining it once the others were fitted (the step no "
                                          "longer depends on it there); back at its prior 1",
                                          spec.name));
        else if (!is_free && info[j] < kMinInformation)
            s.notes.push_back(fmt::format("{}: not constrained by these runs (they barely exercise it); it keeps its "
                                          "prior 1 (sd {:.0f}% in log)",
                                          spec.name, 100 * tau(j)));
        else if (is_free && !s.constrained[j])
            s.notes.push_back(fmt::format("{}: fitted but weakly constrained (sd {:.2f} in log against the prior's "
                                          "{:.2f})",
                                          spec.name, s.sd_log(spec.param), tau(j)));
    }
    if (runs.size() == 1)
        s.notes.push_back("a single run fits at most one parameter: the others keep their priors");

    auto& ev = s.evidence;
    ev.min_gpus = runs.front().plan.num_gpus();
    for (std::size_t i = 0; i < runs.size(); ++i) {
        const auto& p = runs[i].plan;
        ev.min_gpus = std::min(ev.min_gpus, p.num_gpus());
        ev.max_gpus = std::max(ev.max_gpus, p.num_gpus());
        ev.max_nodes = std::max(ev.max_nodes, p.cluster.nodes);
        ev.max_tp = std::max(ev.max_tp, p.parallel.tp);
        ev.max_pp = std::max(ev.max_pp, p.parallel.pp);
        ev.max_cp = std::max(ev.max_cp, p.parallel.cp);
        if (std::find(ev.gpus.begin(), ev.gpus.end(), p.hardware.id) == ev.gpus.end()) ev.gpus.push_back(p.hardware.id);
        const std::string fw = model::canonical_name(p.parallel.framework);
        if (std::find(ev.frameworks.begin(), ev.frameworks.end(), fw) == ev.frameworks.end()) ev.frameworks.push_back(fw);
        model::StackFitRun fr;
        fr.id = runs[i].row->id;
        fr.gpus = p.num_gpus();
        fr.nodes = p.cluster.nodes;
        fr.tp = p.parallel.tp;
        fr.pp = p.parallel.pp;
        fr.cp = p.parallel.cp;
        fr.dp = p.parallel.dp;
        fr.micro_batch = p.training.micro_batch;
        fr.shape = model::layout_point(p).shape;
        const auto ii = static_cast<Eigen::Index>(i);
        fr.measured = runs[i].row->measured_tokens_per_s_per_gpu;
        fr.prior = std::exp(r_prior(ii) + runs[i].log_measured);
        fr.fitted = std::exp(r(ii) + runs[i].log_measured);
        fr.loo_error_pct = (std::exp(loo(ii)) - 1.0) * 100.0;
        s.runs.push_back(fr);
    }
    res.simulations += fitter.simulations();
    // What the factors leave, as a function of the layout (stack_profile.hpp StackDiscrepancy).
    s.discrepancy = model::fit_discrepancy(s.runs);
    if (s.discrepancy.present)
        s.notes.push_back(fmt::format(
            "discrepancy: the runs' residuals after the factors share a structure over the layout (sd {:.1f}% shared "
            "by neighbours, {:.1f}% per run; length scales in log2 of tp {:.3g}, pp {:.3g}, cp {:.3g}, dp {:.3g}, "
            "micro-batch {:.3g}); a prediction near runs of its shape carries their residual (leave-one-run-out "
            "{:.1f}% against {:.1f}% without)",
            100 * std::sqrt(s.discrepancy.signal_var), 100 * std::sqrt(s.discrepancy.noise_var),
            s.discrepancy.length[0], s.discrepancy.length[1], s.discrepancy.length[2], s.discrepancy.length[3],
            s.discrepancy.length[4], 100 * s.discrepancy.loo_sd_log, 100 * s.loo_sd_log));
    else if (s.runs.size() >= model::kDiscrepancyMinRuns)
        s.notes.push_back("discrepancy: none carried (the residuals after the factors show no structure over the "
                          "layout that independent scatter does not explain as well, or there are too many runs)");
    return res;
}

StackBand stack_band(const model::Plan& plan, const model::StackProfile& stack, double prior_var_cap) {
    StackBand b;
    b.beyond = beyond_evidence(plan, stack.evidence);
    if (!stack.fitted) return b;
    // The plan's sensitivity to each parameter: the factors on top of those already applied.
    Factors ones{};
    ones.fill(1.0);
    double base = 0;
    try {
        base = log_throughput(plan, plan.hardware, ones);
    } catch (const NoThroughput&) {
        b.beyond.push_back("the plan simulates to no throughput: no band");
        return b;
    }
    Eigen::VectorXd g = Eigen::VectorXd::Zero(P);
    for (std::size_t j = 0; j < P; ++j) {
        if (stack.covariance_log[j * P + j] <= 0) continue;
        Factors f = ones;
        f[j] = std::exp(kStep);
        try {
            g(static_cast<Eigen::Index>(j)) = (log_throughput(plan, plan.hardware, f) - base) / kStep;
        } catch (const NoThroughput&) {
            g(static_cast<Eigen::Index>(j)) = 0;
        }
    }
    // The fitted parameters' part (their posterior) and the others' (their priors), apart: the
    // caller may cap the second by the uncalibrated band (band_with_stack).
    Eigen::VectorXd gf = g, gp = g;
    for (std::size_t j = 0; j < P; ++j) (stack.free[j] ? gp : gf)(static_cast<Eigen::Index>(j)) = 0;
    Eigen::MatrixXd cov(P, P);
    for (std::size_t a = 0; a < P; ++a)
        for (std::size_t c = 0; c < P; ++c)
            cov(static_cast<Eigen::Index>(a), static_cast<Eigen::Index>(c)) = stack.covariance_log[a * P + c];
    b.fit_var = gf.dot(cov * gf);
    b.prior_var = std::min(gp.dot(cov * gp), prior_var_cap);
    // What the factors leave: with a discrepancy, its predictive variance at this plan (small near
    // runs of its shape, back to the runs' scatter far from them); else the leave-one-out scatter.
    b.discrepancy = model::discrepancy_at(stack, model::layout_point(plan));
    b.scatter_var = b.discrepancy.var_log;
    // No growth with the GPU count beyond the runs is added: fitted on one node and predicting up to
    // 64 (llm-foundry, 8 -> 16..512 GPUs) the error stayed at 4.0% against 6.3% on the runs
    // themselves (docs/trust.md "Bands after a fit"); what more GPUs lean on that the runs did not
    // show (the network across nodes) widens the band through prior_var.
    const double var = b.fit_var + b.prior_var + b.scatter_var;
    b.sd_log = std::sqrt(std::max(0.0, var));
    b.time_p10 = std::exp(-kZ80 * b.sd_log);
    b.time_p90 = std::exp(kZ80 * b.sd_log);
    return b;
}

} // namespace trainsim::sim
