#include "trainsim/calibrate/fit/fit.hpp"

#include "trainsim/calibrate/core/calibrate_error.hpp"
#include "trainsim/model/input/profile_io.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>

namespace trainsim::calibrate {

using model::Precision;
using nlohmann::json;

namespace {

// The simulator's attention curve: efficiency(s) = e * s / (s + kAttentionHalfSeq)
// (sim/src/cost/compute_cost.cpp, from FlashAttention-2 Fig. 4/6).
constexpr double kAttentionHalfSeq = 320.0;
// The shape profile GEMM efficiencies are quoted at (sim/src/cost/compute_cost.cpp kRefDim).
constexpr std::int64_t kRefDim = 8192;

std::optional<Precision> mapped(const FitOptions& o, const std::string& dtype) {
    auto it = o.precision_map.find(dtype);
    if (it == o.precision_map.end()) return std::nullopt;
    return it->second;
}

std::string tflops(double r) { return fmt::format("{:.4g} TFLOP/s", r / 1e12); }
std::string gbps(double r) { return fmt::format("{:.4g} GB/s", r / 1e9); }
std::string micros(double s) { return fmt::format("{:.3g} us", s * 1e6); }

// The fastest link a collective inside one node can use: NVLink (NVLS may exceed the link rate:
// up to twice, the in-switch reduction's best case) or else PCIe.
double intra_node_limit(const model::HardwareProfile& p) {
    if (p.nvlink_bandwidth.value() > 0) return p.nvlink_bandwidth.value() * (p.nvls ? 2.0 : 1.0);
    return p.pcie_bandwidth.value();
}

} // namespace

FitOptions default_fit_options() {
    FitOptions o;
    o.precision_map = {{"bf16", Precision::bf16},
                       {"fp16", Precision::fp16},
                       {"fp8_e4m3", Precision::fp8},
                       {"fp8_e5m2xfp8_e4m3", Precision::fp8},
                       {"fp8_e4m3xfp8_e5m2", Precision::fp8}};
    return o;
}

LineFit fit_line(const std::vector<double>& x, const std::vector<double>& t) {
    if (x.size() != t.size() || x.size() < 2) throw std::invalid_argument("fit_line: need at least two points");
    const auto n = static_cast<Eigen::Index>(x.size());
    Eigen::MatrixXd a(n, 2);
    Eigen::VectorXd b(n);
    for (Eigen::Index i = 0; i < n; ++i) {
        const auto u = static_cast<std::size_t>(i);
        if (!(t[u] > 0)) throw std::invalid_argument("fit_line: times must be positive");
        const double w = 1.0 / t[u];  // relative error of each point
        a(i, 0) = w;
        a(i, 1) = w * x[u];
        b(i) = 1.0;  // w * t
    }
    const Eigen::Vector2d sol = a.colPivHouseholderQr().solve(b);
    LineFit f;
    f.points = x.size();
    f.alpha = sol(0);
    f.slope = sol(1);
    if (f.alpha < 0) {
        // Through the origin: minimise sum((s x_i - t_i) / t_i)^2 -> s = sum(x/t) / sum(x^2/t^2).
        double num = 0, den = 0;
        for (std::size_t i = 0; i < x.size(); ++i) {
            num += x[i] / t[i];
            den += x[i] * x[i] / (t[i] * t[i]);
        }
        f.alpha = 0;
        f.slope = den > 0 ? num / den : 0;
    }
    double mean = 0;
    for (double v : t) mean += v;
    mean /= static_cast<double>(t.size());
    double ss_res = 0, ss_tot = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        const double fit = f.alpha + f.slope * x[i];
        ss_res += (t[i] - fit) * (t[i] - fit);
        ss_tot += (t[i] - mean) * (t[i] - mean);
        f.max_rel_err = std::max(f.max_rel_err, std::abs(fit - t[i]) / t[i]);
    }
    f.r2 = ss_tot > 0 ? 1.0 - ss_res / ss_tot : (ss_res == 0 ? 1.0 : 0.0);
    return f;
}

void check_against_profile(const SampleFile& file, const model::HardwareProfile& base, const FitOptions& opts) {
    std::vector<model::Diagnostic> problems;
    auto problem = [&](std::size_t i, const std::string& msg) {
        problems.push_back(model::Diagnostic{file.path.string(), file.lines[i], 1, file.samples[i].desc.key, msg});
    };
    const std::string base_name = fmt::format("base profile '{}'", base.id);
    for (std::size_t i = 0; i < file.samples.size(); ++i) {
        const Sample& s = file.samples[i];
        if (!s.ok()) continue;
        const Descriptor& d = s.desc;
        switch (d.kind) {
        case OpKind::gemm:
        case OpKind::overlap:
        case OpKind::attention: {
            const auto p = mapped(opts, d.dtype);
            if (!p) break;  // not used by the fit (reported as such)
            // Attention efficiencies are fractions of the BF16 peak (docs/formats.md).
            const Precision peak_of = d.kind == OpKind::attention ? Precision::bf16 : *p;
            auto it = base.dense_peak.find(peak_of);
            if (it == base.dense_peak.end()) {
                auto why = base.unsupported_reason.find(peak_of);
                problem(i, fmt::format("{} has no {} dense peak{}: measured on another GPU? (pass the matching --base)",
                                       base_name, model::to_string(peak_of),
                                       why != base.unsupported_reason.end() ? " (" + why->second + ")" : ""));
                break;
            }
            if (s.flop_rate() > it->second.value())
                problem(i, fmt::format("throughput {} is above the {} dense peak {} of {}: impossible (a wrong time, "
                                       "or the wrong --base)",
                                       tflops(s.flop_rate()), model::to_string(peak_of), tflops(it->second.value()),
                                       base_name));
            break;
        }
        case OpKind::memory:
            if (mapped(opts, d.dtype) && s.bandwidth() > base.hbm_bandwidth.value())
                problem(i, fmt::format("bandwidth {} is above the HBM bandwidth {} of {}: impossible", gbps(s.bandwidth()),
                                       gbps(base.hbm_bandwidth.value()), base_name));
            break;
        case OpKind::collective:
            if (d.scope == "intra_node" && s.busbw() > intra_node_limit(base))
                problem(i, fmt::format("bus bandwidth {} is above the fastest intra-node link ({}) of {}: impossible",
                                       gbps(s.busbw()), gbps(intra_node_limit(base)), base_name));
            break;
        }
    }
    if (!problems.empty()) throw SampleError(std::move(problems));
}

namespace {
// Board power from the NVML telemetry of the samples (docs/calibration.md "Power"). NVML reports
// the board power averaged over the last second or less; read right after a GEMM sample's timed
// loop, a short loop is diluted by the idle moments around it, so the highest reading over the
// GEMMs is the closest to the sustained draw under tensor-core load (a lower bound of it).
template <class Replace>
void fit_power(const SampleFile& file, const FitOptions& opts, model::HardwareProfile& p, FitReport& rep,
               Replace replace) {
    std::optional<double> busy;
    std::size_t readings = 0;
    for (const auto& s : file.samples) {
        if (!s.ok() || s.desc.kind != OpKind::gemm || !s.telemetry.power_w || !(*s.telemetry.power_w > 0)) continue;
        busy = std::max(busy.value_or(0.0), *s.telemetry.power_w);
        ++readings;
    }
    rep.compute_busy_power_w = busy;
    if (opts.idle_power_w && *opts.idle_power_w > 0) rep.idle_power_w = opts.idle_power_w;
    if (!busy && !rep.idle_power_w) {
        rep.notes.push_back(
            "no board power in the samples (NVML unavailable or the CPU backend): the profile keeps "
            "the base profile's power section");
        return;
    }
    if (!p.has_power()) {
        rep.notes.push_back(
            "board power measured but not written: the base profile has no power section (it needs "
            "comm_busy and node_overhead too)");
        return;
    }
    if (busy) {
        p.power_compute_busy = model::Power(*busy);
        replace("power.compute_busy",
                fmt::format("NVML board power, highest of {} readings after the GEMM samples", readings));
        if (p.power_comm_busy > p.power_compute_busy) {
            // Derived, not measured: said as such, not through replace's "measured:".
            p.power_comm_busy = p.power_compute_busy;
            p.sources["power.comm_busy"] = "derived: capped at the measured compute-busy board power (NVML)";
            rep.replaced.push_back("power.comm_busy");
        }
    }
    if (rep.idle_power_w) {
        if (model::Power(*rep.idle_power_w) <= p.power_comm_busy) {
            p.power_idle = model::Power(*rep.idle_power_w);
            replace("power.idle", "NVML board power of the idle device before the run (run.json)");
        } else {
            rep.notes.push_back(fmt::format("idle board power {:.0f} W not written: above the comm-busy power {:.0f} W",
                                            *rep.idle_power_w, p.power_comm_busy.value()));
        }
    }
    // The profile must stay loadable (idle <= comm-busy <= compute-busy): a base idle figure above
    // a low measured busy power is capped, and said.
    if (p.power_idle > p.power_comm_busy) {
        rep.notes.push_back(fmt::format("idle power {:.0f} W of the base profile capped at the comm-busy power {:.0f} W",
                                        p.power_idle.value(), p.power_comm_busy.value()));
        p.power_idle = p.power_comm_busy;
        p.sources["power.idle"] = "derived: capped at the comm-busy power, itself capped at the measured compute-busy "
                                  "board power (NVML)";
        rep.replaced.push_back("power.idle");
    }
}
} // namespace

FitResult fit(const SampleFile& file, const model::HardwareProfile& base, const FitOptions& opts_in) {
    FitOptions opts = opts_in;
    check_against_profile(file, base, opts);

    FitResult res;
    FitReport& rep = res.report;
    model::HardwareProfile& p = res.profile;
    p = base;
    p.provenance = model::Provenance::calibrated;
    p.id = opts.id.empty() ? base.id + ".calibrated" : opts.id;
    // The shipped GPU it was fitted on, through a refit of a fit: its trust domain (docs/trust.md).
    p.base = base.base.empty() ? base.id : base.base;
    p.name = opts.name.empty() ? base.name + " (calibrated)" : opts.name;
    p.source_file.clear();
    p.gemm_table.clear();
    p.memory_curve.clear();
    p.collectives.clear();
    p.collective_times.clear();
    // The datasheet figures the tables are measured on: a copy of this profile with an edited
    // link rate or peak drops the tables that figure governs (docs/formats.md, issue #45).
    p.measured_on = model::datasheet_fingerprint(base);

    rep.samples_file = file.path.string();
    rep.samples = file.samples.size();
    std::string first_at, last_at;
    std::set<std::string> unmapped;
    for (const auto& s : file.samples) {
        if (s.ok()) ++rep.ok;
        else ++rep.unsupported;
        if (rep.backend.empty()) rep.backend = s.backend;
        if (!s.measured_at.empty()) {
            if (first_at.empty() || s.measured_at < first_at) first_at = s.measured_at;
            last_at = std::max(last_at, s.measured_at);
        }
        if (s.ok() && s.desc.kind != OpKind::collective && !mapped(opts, s.desc.dtype)) unmapped.insert(s.desc.dtype);
    }
    rep.device = opts.device;
    const std::string origin =
        fmt::format("trainsim-calibrate fit of {} ({} samples, backend {}{}{})", file.path.string(), rep.samples,
                    rep.backend, opts.device.empty() ? "" : ", " + opts.device,
                    first_at.empty() ? "" : ", measured " + first_at.substr(0, 10));
    auto replace = [&](const std::string& path, const std::string& what) {
        p.sources[path] = "measured: " + what + " (" + origin + ")";
        rep.replaced.push_back(path);
    };
    for (const auto& dt : unmapped)
        rep.notes.push_back(fmt::format("{} samples not used: no profile precision for them (fit --map {}=bf16 enters "
                                        "them as bf16)",
                                        dt, dt));

    // ---- GEMMs ----
    std::map<Precision, std::vector<const Sample*>> gemms;
    std::map<Precision, std::vector<std::string>> unsupported_gemm;
    for (const auto& s : file.samples) {
        if (s.desc.kind != OpKind::gemm) continue;
        const auto pr = mapped(opts, s.desc.dtype);
        if (!pr) continue;
        if (s.ok()) gemms[*pr].push_back(&s);
        else unsupported_gemm[*pr].push_back(s.reason);
    }
    for (const auto& [prec, reasons] : unsupported_gemm) {
        if (gemms.contains(prec)) {
            rep.notes.push_back(fmt::format("{} of the {} GEMM shapes were unsupported (e.g. {})", reasons.size(),
                                            model::to_string(prec), reasons.front()));
            continue;
        }
        // Nothing of this precision ran: the measured device does not support it.
        const std::string ps = model::to_string(prec);
        p.dense_peak.erase(prec);
        p.gemm_efficiency.erase(prec);
        p.sources.erase("compute.dense_peak." + ps);
        p.sources.erase("compute.gemm_efficiency." + ps);
        p.unsupported_reason[prec] = "measured: " + reasons.front();
        rep.replaced.push_back("compute.unsupported." + ps);
        rep.notes.push_back(fmt::format("{} GEMMs unsupported on the measured device: {}", ps, reasons.front()));
    }
    // FP8 split-accumulator speed: fast / split time of the same squares.
    if (gemms.contains(Precision::fp8)) {
        std::map<std::int64_t, std::pair<double, double>> fast_split;
        for (const Sample* s : gemms.at(Precision::fp8)) {
            const Descriptor& d = s->desc;
            if (d.algo != AlgoChoice::first || d.m != d.n || d.n != d.k) continue;
            (d.fast_accum ? fast_split[d.m].first : fast_split[d.m].second) = s->time.median;
        }
        std::vector<double> big, all;
        for (const auto& [n, fs] : fast_split) {
            if (fs.first <= 0 || fs.second <= 0) continue;
            all.push_back(fs.first / fs.second);
            if (n >= 2048) big.push_back(fs.first / fs.second);
        }
        auto& r = big.empty() ? all : big;
        if (!r.empty()) {
            std::sort(r.begin(), r.end());
            const double med = r.size() % 2 ? r[r.size() / 2] : 0.5 * (r[r.size() / 2 - 1] + r[r.size() / 2]);
            const double speed = std::min(1.0, med);
            rep.fp8_split_accumulate_speed = speed;
            p.fp8_split_accumulate_speed = speed;
            replace("compute.fp8_split_accumulate_speed",
                    fmt::format("FP8 squares with the split accumulator ran at {:.4g} of their fast-accumulation speed "
                                "(median of {})",
                                med, r.size()));
        }
    }
    for (const auto& [prec, list] : gemms) {
        GemmFit g;
        g.precision = model::to_string(prec);
        std::set<std::string> dts;
        std::vector<double> x, t;
        std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::string>, std::pair<double, double>> first_best;
        double best_square_rate = 0;
        // Fast-accumulation shapes, so a square measured both ways enters the table once.
        std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t>> fast_shapes;
        for (const Sample* s : list)
            if (s->desc.algo == AlgoChoice::first && s->desc.fast_accum) fast_shapes.insert({s->desc.m, s->desc.n, s->desc.k});
        for (const Sample* s : list) {
            const Descriptor& d = s->desc;
            dts.insert(d.dtype);
            auto& fb = first_best[{d.m, d.n, d.k, d.dtype}];
            (d.algo == AlgoChoice::first ? fb.first : fb.second) = s->time.median;
            if (d.algo != AlgoChoice::first) continue;
            const bool split = prec == Precision::fp8 && !d.fast_accum;
            if (split && fast_shapes.contains({d.m, d.n, d.k})) continue;
            // Split-accumulator rows as fast-accumulation equivalents (see fit.hpp).
            const double entered = split ? s->time.median * p.fp8_split_accumulate_speed : s->time.median;
            p.gemm_table.push_back(model::GemmSample{prec, static_cast<long>(d.m), static_cast<long>(d.n),
                                                     static_cast<long>(d.k), model::Time::from_seconds(entered)});
            ++g.table_rows;
            if (d.m == d.n && d.n == d.k && !split) {
                x.push_back(d.flops());
                t.push_back(s->time.median);
                best_square_rate = std::max(best_square_rate, s->flop_rate());
                if (d.m == kRefDim) g.rate_8192 = std::max(g.rate_8192, s->flop_rate());
            }
        }
        g.dtypes.assign(dts.begin(), dts.end());
        double ratio_sum = 0;
        int ratio_n = 0;
        for (const auto& [shape, ft] : first_best)
            if (ft.first > 0 && ft.second > 0) {
                ratio_sum += ft.first / ft.second;
                ++ratio_n;
            }
        if (ratio_n > 0) g.best_over_first = ratio_sum / ratio_n;
        if (x.size() >= 2) {
            g.quality = fit_line(x, t);
            g.t0 = g.quality.alpha;
            g.rate = g.quality.slope > 0 ? 1.0 / g.quality.slope : 0.0;
        } else {
            rep.notes.push_back(fmt::format("{}: fewer than two square GEMMs, no t0 + FLOPs/R fit", g.precision));
        }
        g.peak = p.dense_peak.contains(prec) ? p.dense_peak.at(prec).value() : 0.0;
        const double quoted = g.rate_8192 > 0 ? g.rate_8192 : best_square_rate;
        if (g.peak > 0 && quoted > 0) {
            g.efficiency = std::min(1.0, quoted / g.peak);
            p.gemm_efficiency[prec] = g.efficiency;
            replace("compute.gemm_efficiency." + g.precision,
                    g.rate_8192 > 0 ? fmt::format("{} at 8192^3 = {:.4g} of the dense peak", tflops(g.rate_8192), g.efficiency)
                                    : fmt::format("{} at the largest square GEMM measured = {:.4g} of the dense peak "
                                                  "(8192^3 not measured)",
                                                  tflops(best_square_rate), g.efficiency));
        }
        rep.gemm.push_back(std::move(g));
    }
    std::sort(p.gemm_table.begin(), p.gemm_table.end(), [](const model::GemmSample& a, const model::GemmSample& b) {
        return std::tie(a.precision, a.m, a.n, a.k) < std::tie(b.precision, b.m, b.n, b.k);
    });

    // ---- memory-bound kernels ----
    // Each kernel is fitted alone; the joint curve ("all", written to the profile) pools only the
    // kernels that stream at HBM speed. Kernels that move their bytes in 16-byte vectors reach the
    // same bandwidth give or take a few percent whatever their arithmetic (memory-bound); one far
    // slower is not bandwidth-bound as written (scalar loads, too little parallelism), and pooling
    // it would put its inefficiency into hbm_efficiency, which the simulator applies to every
    // element-wise op. Criterion, not a measured constant: a kernel below kPoolFraction of the
    // fastest kernel's bandwidth of its precision stays out of the pool, and the report says so.
    constexpr double kPoolFraction = 0.8;
    std::map<Precision, std::map<std::string, std::pair<std::vector<double>, std::vector<double>>>> mem;
    for (const auto& s : file.samples) {
        if (s.desc.kind != OpKind::memory || !s.ok()) continue;
        const auto pr = mapped(opts, s.desc.dtype);
        if (!pr) continue;
        mem[*pr][s.desc.op].first.push_back(s.desc.bytes_moved());
        mem[*pr][s.desc.op].second.push_back(s.time.median);
    }
    std::int64_t largest_copy = 0;
    for (const auto& s : file.samples)
        if (s.ok() && s.desc.kind == OpKind::memory && s.desc.op == "copy" && mapped(opts, s.desc.dtype) &&
            s.desc.elements >= largest_copy) {
            largest_copy = s.desc.elements;
            rep.copy_bandwidth = s.bandwidth();
        }
    auto memory_fit = [&](Precision prec, const std::string& kernel, const std::vector<double>& bytes,
                          const std::vector<double>& t) {
        MemoryFit m;
        m.precision = model::to_string(prec);
        m.kernel = kernel;
        m.quality = fit_line(bytes, t);
        m.alpha = m.quality.alpha;
        m.bandwidth = m.quality.slope > 0 ? 1.0 / m.quality.slope : 0.0;
        m.efficiency = base.hbm_bandwidth.value() > 0 ? m.bandwidth / base.hbm_bandwidth.value() : 0.0;
        return m;
    };
    for (const auto& [prec, kernels] : mem) {
        std::vector<MemoryFit> fits;
        for (const auto& [kernel, pts] : kernels) {
            if (std::set<double>(pts.first.begin(), pts.first.end()).size() < 2) {
                rep.notes.push_back(fmt::format("memory {} {}: one size only, no fit", model::to_string(prec), kernel));
                continue;
            }
            fits.push_back(memory_fit(prec, kernel, pts.first, pts.second));
        }
        double fastest = 0;
        for (const auto& m : fits) fastest = std::max(fastest, m.bandwidth);
        std::vector<double> pool_bytes, pool_t;
        std::vector<std::string> pooled;
        for (auto& m : fits) {
            m.pooled = m.bandwidth >= kPoolFraction * fastest;
            if (m.pooled) {
                const auto& pts = kernels.at(m.kernel);
                pool_bytes.insert(pool_bytes.end(), pts.first.begin(), pts.first.end());
                pool_t.insert(pool_t.end(), pts.second.begin(), pts.second.end());
                pooled.push_back(m.kernel);
            } else {
                rep.notes.push_back(fmt::format(
                    "memory {} {}: {} is below {:.0f}% of the fastest kernel's {}: not "
                    "bandwidth-bound as written, left out of the joint curve",
                    model::to_string(prec), m.kernel, gbps(m.bandwidth), 100 * kPoolFraction, gbps(fastest)));
            }
        }
        for (auto& m : fits) rep.memory.push_back(std::move(m));
        if (pooled.empty()) continue;
        MemoryFit all = memory_fit(prec, "all", pool_bytes, pool_t);
        all.pooled = true;
        // With a single kernel of several sizes the joint curve is that kernel's.
        if (all.bandwidth > 0) {
            p.memory_curve[prec] =
                model::AlphaBeta{model::Time::from_seconds(all.alpha), model::Bandwidth(all.bandwidth)};
            if (prec == Precision::bf16) {
                // The simulator's elementwise model is bytes / (hbm_bandwidth * hbm_efficiency)
                // + kernel_overhead: the bf16 curve sets both.
                p.hbm_efficiency = std::min(1.0, all.efficiency);
                replace("memory.hbm_efficiency",
                        fmt::format("memory-bound kernels ({}) reach {} = {:.4g} of {} (t = t0 + bytes / BW fit, R^2 "
                                    "{:.4f})",
                                    fmt::join(pooled, ", "), gbps(all.bandwidth), all.efficiency,
                                    gbps(base.hbm_bandwidth.value()), all.quality.r2));
                if (all.alpha > 0) {
                    p.kernel_overhead = model::Time::from_seconds(all.alpha);
                    replace("compute.kernel_overhead",
                            fmt::format("fixed cost t0 = {} of the memory-bound kernel fit", micros(all.alpha)));
                }
            }
        }
        rep.memory.push_back(std::move(all));
    }

    // ---- collectives ----
    std::map<std::tuple<std::string, int, std::string>, std::pair<std::vector<double>, std::vector<double>>> coll;
    // The measured curve itself (calibrated.collective_times): the median of the samples' medians
    // at each size, which the simulator interpolates (docs/network.md, "Measured collective times");
    // the alpha-beta fit below summarises it and sets the latency per ring step.
    std::map<std::tuple<std::string, int, std::string, double>, std::vector<double>> at_size;
    for (const auto& s : file.samples) {
        if (s.desc.kind != OpKind::collective || !s.ok()) continue;
        auto& pts = coll[{s.desc.op, s.desc.group_size, s.desc.scope}];
        pts.first.push_back(s.desc.bytes * s.desc.bus_factor());
        pts.second.push_back(s.time.median);
        if (s.desc.bytes >= 1.0 && s.time.median > 0)
            at_size[{s.desc.op, s.desc.group_size, s.desc.scope, s.desc.bytes}].push_back(s.time.median);
    }
    for (auto& [key, times] : at_size) {
        const auto& [op, g, scope, bytes] = key;
        std::sort(times.begin(), times.end());
        const std::size_t n = times.size();
        const double med = n % 2 == 1 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
        p.collective_times.push_back(
            model::CollectiveSample{op, g, scope, model::Bytes(bytes), model::Time::from_seconds(med)});
    }
    std::vector<double> hop_x, hop_t;
    for (const auto& [key, pts] : coll) {
        const auto& [op, g, scope] = key;
        if (std::set<double>(pts.first.begin(), pts.first.end()).size() < 2) {
            rep.notes.push_back(fmt::format("{} over {} ({}): one size only, no fit", op, g, scope));
            continue;
        }
        CollectiveFit c;
        c.op = op;
        c.group_size = g;
        c.scope = scope;
        c.quality = fit_line(pts.first, pts.second);
        c.alpha = c.quality.alpha;
        c.busbw = c.quality.slope > 0 ? 1.0 / c.quality.slope : 0.0;
        if (c.busbw > 0)
            p.collectives.push_back(model::CollectiveCurve{
                op, g, scope, model::AlphaBeta{model::Time::from_seconds(c.alpha), model::Bandwidth(c.busbw)}});
        else
            rep.notes.push_back(fmt::format("{} over {} ({}): time does not grow with size (noise?); no curve written",
                                            op, g, scope));
        if (op == "all_reduce" && scope == "intra_node") {
            hop_x.push_back(2.0 * (g - 1));  // ring steps of an all-reduce (reduce-scatter + all-gather)
            hop_t.push_back(c.alpha);
        }
        rep.collectives.push_back(std::move(c));
    }
    if (hop_x.size() >= 2) {
        // alpha(g) = a0 + hop * 2(g-1), unweighted least squares (alphas can be zero).
        const auto n = static_cast<Eigen::Index>(hop_x.size());
        Eigen::MatrixXd a(n, 2);
        Eigen::VectorXd b(n);
        for (Eigen::Index i = 0; i < n; ++i) {
            a(i, 0) = 1.0;
            a(i, 1) = hop_x[static_cast<std::size_t>(i)];
            b(i) = hop_t[static_cast<std::size_t>(i)];
        }
        const Eigen::Vector2d sol = a.colPivHouseholderQr().solve(b);
        if (sol(1) > 0) {
            rep.hop_latency_s = sol(1);
            p.intra_node_latency = model::Time::from_seconds(sol(1));
            replace("interconnect.intra_node_latency",
                    fmt::format("slope of the all-reduce alpha over ring steps 2(g-1), {} group sizes: {} per step",
                                hop_x.size(), micros(sol(1))));
        } else {
            rep.notes.push_back("all-reduce alpha does not grow with the group size: intra_node_latency kept");
        }
    }
    if (!p.collectives.empty()) {
        std::sort(p.collectives.begin(), p.collectives.end(), [](const auto& a, const auto& b) {
            return std::tie(a.op, a.scope, a.group_size) < std::tie(b.op, b.scope, b.group_size);
        });
    }

    // ---- compute under sustained load and under communication ----
    // Per GEMM shape and group: the median time alone and under an all-reduce, in a short
    // benchmark and after sustained load (and the warm-up calls of that load).
    struct OverlapTimes {
        double alone = 0, under = 0, sustained_alone = 0, sustained_under = 0;
        int sustain_calls = 0;
    };
    std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, int>, OverlapTimes> overlap;
    for (const auto& s : file.samples) {
        if (s.desc.kind != OpKind::overlap || !s.ok()) continue;
        auto& o = overlap[{s.desc.m, s.desc.n, s.desc.k, s.desc.group_size}];
        const bool under = s.desc.under_all_reduce();
        if (s.desc.sustained()) {
            (under ? o.sustained_under : o.sustained_alone) = s.time.median;
            o.sustain_calls = s.desc.warmup;
        } else {
            (under ? o.under : o.alone) = s.time.median;
        }
    }
    for (const auto& [shape, o] : overlap) {
        const auto dim = std::get<0>(shape);
        const int ranks = std::get<3>(shape);
        // The sustained clock: the same GEMM's short-benchmark time over its time after the load.
        if (o.alone > 0 && o.sustained_alone > 0) {
            const double ratio = std::clamp(o.alone / o.sustained_alone, 0.0, 1.0);
            rep.sustained_clock_ratio = ratio;
            p.sustained_clock_ratio = ratio;
            replace("compute.sustained_clock_ratio",
                    fmt::format("{}^3 GEMM on {} ranks: {} in a short benchmark vs {} after {} calls of sustained "
                                "load",
                                dim, ranks, micros(o.alone), micros(o.sustained_alone), o.sustain_calls));
        }
        // Compute next to communication, relative to the same clock: the sustained pair when it
        // was measured (a training step runs under sustained load), the short pair otherwise.
        const bool sustained = o.sustained_alone > 0 && o.sustained_under > 0;
        const double alone = sustained ? o.sustained_alone : o.alone, under = sustained ? o.sustained_under : o.under;
        if (alone <= 0 || under <= 0) continue;
        const double slow = std::clamp(under / alone - 1.0, 0.0, 1.0);
        rep.comm_compute_slowdown = slow;
        p.comm_compute_slowdown = slow;
        replace("overlap.comm_compute_slowdown",
                fmt::format("{}^3 GEMM {} alone vs {} under an all-reduce over {} ranks{}", dim, micros(alone),
                            micros(under), ranks, sustained ? ", both after sustained load" : ""));
    }

    // ---- attention ----
    for (const char* dir : {"attention_fwd", "attention_bwd"}) {
        std::vector<const Sample*> pts;
        std::vector<std::string> unsupported;
        for (const auto& s : file.samples) {
            if (s.desc.kind != OpKind::attention || s.desc.op != dir) continue;
            const auto pr = mapped(opts, s.desc.dtype);
            if (!pr) continue;
            if (!s.ok()) unsupported.push_back(s.desc.dtype + ": " + s.reason);
            else if (*pr == Precision::bf16) pts.push_back(&s);
        }
        for (const auto& u : unsupported) rep.notes.push_back(fmt::format("{} {}", dir, u));
        if (pts.empty() || !base.dense_peak.contains(Precision::bf16)) continue;
        AttentionFit a;
        a.direction = std::string(dir) == "attention_fwd" ? "fwd" : "bwd";
        a.impl = pts.front()->impl;
        a.points = pts.size();
        const double peak = base.dense_peak.at(Precision::bf16).value();
        // rate_i = peak * e * s/(s+320): least squares for e.
        double num = 0, den = 0;
        for (const Sample* s : pts) {
            const double xs = peak * static_cast<double>(s->desc.seq) / (static_cast<double>(s->desc.seq) + kAttentionHalfSeq);
            num += xs * s->flop_rate();
            den += xs * xs;
        }
        a.efficiency = den > 0 ? num / den : 0.0;
        for (const Sample* s : pts) {
            const double xs = peak * static_cast<double>(s->desc.seq) / (static_cast<double>(s->desc.seq) + kAttentionHalfSeq);
            a.max_rel_err = std::max(a.max_rel_err, std::abs(a.efficiency * xs - s->flop_rate()) / s->flop_rate());
            if (s->flop_rate() > a.best_rate) {
                a.best_rate = s->flop_rate();
                a.best_seq = s->desc.seq;
            }
        }
        const bool fused = a.impl.find("fused") != std::string::npos && a.impl.find("unfused") == std::string::npos;
        if (fused && a.efficiency > 0 && a.efficiency <= 1) {
            a.written = true;
            (a.direction == "fwd" ? p.attention_fwd_efficiency : p.attention_bwd_efficiency) = a.efficiency;
            replace("compute.attention_efficiency." + a.direction,
                    fmt::format("{} causal attention, {} sequence lengths: {:.3f} of the BF16 peak at long sequence",
                                a.impl, a.points, a.efficiency));
        } else {
            rep.notes.push_back(fmt::format("attention {}: measured with '{}' ({:.4g} of the BF16 peak); not written: "
                                            "the profile's efficiency is that of fused flash attention",
                                            a.direction, a.impl, a.efficiency));
        }
        rep.attention.push_back(std::move(a));
    }

    // What the fits miss, for the simulator's error bands (docs/trust.md): the largest relative
    // error of any fit written, compute (GEMM sweeps, the joint memory curve, fused attention) and
    // communication (the collective curves) apart.
    std::optional<double> compute_resid, comm_resid;
    auto worst = [](std::optional<double>& acc, double x) { acc = std::max(acc.value_or(0.0), x); };
    for (const auto& g : rep.gemm) worst(compute_resid, g.quality.max_rel_err);
    for (const auto& m : rep.memory)
        if (m.kernel == "all") worst(compute_resid, m.quality.max_rel_err);
    for (const auto& a : rep.attention)
        if (a.written) worst(compute_resid, a.max_rel_err);
    for (const auto& c : rep.collectives) worst(comm_resid, c.quality.max_rel_err);
    if (compute_resid) {
        p.compute_fit_residual = std::min(1.0, *compute_resid);
        replace("calibration.compute_residual", "largest relative error of the GEMM, memory and attention fits");
    }
    if (comm_resid) {
        p.comm_fit_residual = std::min(1.0, *comm_resid);
        replace("calibration.comm_residual", "largest relative error of the collective fits");
    }

    fit_power(file, opts, p, rep, replace);

    if (!p.gemm_table.empty() || !p.memory_curve.empty() || !p.collectives.empty() || !p.collective_times.empty())
        p.sources["calibrated"] = origin;
    else p.sources.erase("calibrated");
    return res;
}

// ---------------------------------------------------------------------------------------------

namespace {
json line_json(const LineFit& f) {
    return {{"alpha_s", f.alpha}, {"slope", f.slope}, {"r2", f.r2}, {"max_rel_err", f.max_rel_err}, {"points", f.points}};
}
} // namespace

json to_json(const FitReport& r) {
    json j;
    j["samples_file"] = r.samples_file;
    j["samples"] = r.samples;
    j["ok"] = r.ok;
    j["unsupported"] = r.unsupported;
    j["backend"] = r.backend;
    j["device"] = r.device;
    j["gemm"] = json::array();
    for (const auto& g : r.gemm)
        j["gemm"].push_back({{"precision", g.precision}, {"dtypes", g.dtypes}, {"table_rows", g.table_rows},
                             {"rate_flops", g.rate}, {"t0_s", g.t0}, {"fit", line_json(g.quality)},
                             {"rate_8192_flops", g.rate_8192}, {"peak_flops", g.peak}, {"efficiency", g.efficiency},
                             {"best_over_first", g.best_over_first}});
    j["memory"] = json::array();
    for (const auto& m : r.memory)
        j["memory"].push_back({{"precision", m.precision},
                               {"kernel", m.kernel},
                               {"alpha_s", m.alpha},
                               {"bandwidth", m.bandwidth},
                               {"efficiency", m.efficiency},
                               {"fit", line_json(m.quality)},
                               {"in_joint_curve", m.pooled}});
    j["collectives"] = json::array();
    for (const auto& c : r.collectives)
        j["collectives"].push_back({{"op", c.op}, {"group_size", c.group_size}, {"scope", c.scope}, {"alpha_s", c.alpha},
                                    {"busbw", c.busbw}, {"fit", line_json(c.quality)}});
    j["attention"] = json::array();
    for (const auto& a : r.attention)
        j["attention"].push_back({{"direction", a.direction}, {"impl", a.impl}, {"points", a.points},
                                  {"efficiency", a.efficiency}, {"max_rel_err", a.max_rel_err},
                                  {"best_rate_flops", a.best_rate}, {"best_seq", a.best_seq}, {"written", a.written}});
    j["copy_bandwidth"] = r.copy_bandwidth;
    j["fp8_split_accumulate_speed"] = r.fp8_split_accumulate_speed ? json(*r.fp8_split_accumulate_speed) : json(nullptr);
    j["comm_compute_slowdown"] = r.comm_compute_slowdown ? json(*r.comm_compute_slowdown) : json(nullptr);
    j["sustained_clock_ratio"] = r.sustained_clock_ratio ? json(*r.sustained_clock_ratio) : json(nullptr);
    j["compute_busy_power_w"] = r.compute_busy_power_w ? json(*r.compute_busy_power_w) : json(nullptr);
    j["idle_power_w"] = r.idle_power_w ? json(*r.idle_power_w) : json(nullptr);
    j["hop_latency_s"] = r.hop_latency_s ? json(*r.hop_latency_s) : json(nullptr);
    j["replaced"] = r.replaced;
    j["notes"] = r.notes;
    return j;
}

std::string format_report(const FitReport& r) {
    std::string s = fmt::format("Fit of {}: {} samples ({} ok, {} unsupported), backend {}{}\n", r.samples_file,
                                r.samples, r.ok, r.unsupported, r.backend, r.device.empty() ? "" : ", " + r.device);
    // One line with the figures people compare nodes by (scripts/gpu-check prints it).
    std::string head;
    for (const auto& g : r.gemm)
        if (g.rate_8192 > 0) head += fmt::format("{} GEMM 8192^3 {} | ", g.precision, tflops(g.rate_8192));
    if (r.copy_bandwidth > 0) head += fmt::format("HBM copy {} | ", gbps(r.copy_bandwidth));
    for (const auto& a : r.attention)
        head += fmt::format("attention {} {} (seq {}, {}) | ", a.direction, tflops(a.best_rate), a.best_seq, a.impl);
    if (!head.empty()) s += "Headline: " + head.substr(0, head.size() - 3) + "\n";
    auto quality = [](const LineFit& f) {
        return fmt::format("R^2 {:.5f}  max err {:.1f}%  ({} points)", f.r2, 100.0 * f.max_rel_err, f.points);
    };
    if (!r.gemm.empty()) {
        s += "GEMM: table = heuristic-first times; t = t0 + FLOPs / R over the square sweep\n";
        for (const auto& g : r.gemm) {
            s += fmt::format("  {:<5} {:>4} shapes  R {}  t0 {}  {}\n", g.precision, g.table_rows, tflops(g.rate),
                             micros(g.t0), quality(g.quality));
            s += fmt::format("        efficiency {:.4g} of {}{}{}\n", g.efficiency, tflops(g.peak),
                             g.rate_8192 > 0 ? fmt::format("  (8192^3: {})", tflops(g.rate_8192)) : "",
                             g.best_over_first > 0 ? fmt::format("  best algo / first: {:.3f}x", g.best_over_first) : "");
        }
    }
    if (!r.memory.empty()) {
        s += "Memory-bound kernels: t = t0 + bytes / BW\n";
        for (const auto& m : r.memory)
            s += fmt::format("  {:<5} {:<14} t0 {:>9}  BW {:>12} ({:.4g} of HBM)  {}{}\n", m.precision, m.kernel,
                             micros(m.alpha), gbps(m.bandwidth), m.efficiency, quality(m.quality),
                             m.pooled ? "" : "  (not in the joint curve)");
    }
    if (!r.collectives.empty()) {
        s += "Collectives: t = alpha + bus bytes / busbw (nccl-tests busbw)\n";
        for (const auto& c : r.collectives)
            s += fmt::format("  {:<14} g={:<3} {:<10} alpha {:>9}  busbw {:>12}  {}\n", c.op, c.group_size, c.scope,
                             micros(c.alpha), gbps(c.busbw), quality(c.quality));
    }
    if (r.fp8_split_accumulate_speed)
        s += fmt::format("FP8 split-accumulator speed (vs fast accumulation): {:.4g}\n", *r.fp8_split_accumulate_speed);
    if (r.hop_latency_s) s += fmt::format("Intra-node hop latency (from all-reduce alphas): {}\n", micros(*r.hop_latency_s));
    for (const auto& a : r.attention)
        s += fmt::format("Attention {} ({}, {} points): {:.4g} of the BF16 peak, max err {:.1f}%{}\n", a.direction,
                         a.impl, a.points, a.efficiency, 100.0 * a.max_rel_err, a.written ? "" : " (not written)");
    if (r.sustained_clock_ratio)
        s += fmt::format("GEMM rate after sustained load / short benchmark: {:.3f}\n", *r.sustained_clock_ratio);
    if (r.comm_compute_slowdown)
        s += fmt::format("GEMM slowdown under an all-reduce: {:.3f}\n", *r.comm_compute_slowdown);
    if (r.compute_busy_power_w || r.idle_power_w)
        s += fmt::format("board power (NVML): {} under GEMMs, {} idle\n",
                         r.compute_busy_power_w ? fmt::format("{:.0f} W", *r.compute_busy_power_w) : "not measured",
                         r.idle_power_w ? fmt::format("{:.0f} W", *r.idle_power_w) : "not measured");
    if (!r.replaced.empty()) {
        s += "Replaced in the profile:";
        for (const auto& x : r.replaced) s += " " + x;
        s += "\n";
    }
    for (const auto& n : r.notes) s += "Note: " + n + "\n";
    return s;
}

} // namespace trainsim::calibrate
