// Stack profiles: what a team's own software stack makes of the hardware, as a few physical
// factors fitted on the team's own runs (`trainsim fit-stack`, docs/calibration.md "Calibrating on
// your own runs"). A hardware profile says what the machine can do; a stack profile says how much
// of it the user's trainer reaches: its GEMM and attention kernels' efficiency, its element-wise
// kernels' share of the memory bandwidth, the fixed cost of each kernel, the host's time per launch,
// its collectives' efficiency inside and across nodes, and how much communication slows the
// compute it overlaps. Each factor multiplies the hardware profile's value (1 = the profile as it
// is); apply_stack is the one place that does so.
#pragma once

#include "trainsim/model/core/hardware_profile.hpp"

#include <array>
#include <cmath>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace trainsim::model {

// The stack's parameters, in the fixed order of StackProfile::factors and of the covariance.
enum class StackParam : std::size_t {
    gemm,            // x compute.gemm_efficiency (every precision) and the measured GEMM table's rates
    attention,       // x every attention efficiency (fused, Triton, FlashAttention-2)
    memory_bound,    // x memory.hbm_efficiency: element-wise kernels' share of HBM bandwidth
    kernel_overhead, // x compute.kernel_overhead: the fixed launch + tail cost of every kernel
    host,            // x host time per launch and per call (divides node.host_cpu_speed)
    comm_intra,      // x NVLink / NVLS / PCIe efficiency; / measured intra-node collective times
    comm_inter,      // x NIC efficiency; / measured inter-node collective times
    overlap,         // x overlap.comm_compute_slowdown: compute slowed by concurrent communication
};
inline constexpr std::size_t kStackParams = 8;

// What each parameter is, its physical bounds (as a factor on the profile) and the width of its
// prior: the spread of that quantity between stacks on one GPU, before any run of the user's is
// seen (one standard deviation of the log factor).
struct StackParamSpec {
    StackParam param;
    std::string_view name;
    std::string_view scales;   // what it multiplies, for reports and docs
    double lo, hi;             // bounds of the factor
    double prior_sd_log;       // sd of log(factor) a priori
    std::string_view why;      // where the bounds and the prior width come from
};
[[nodiscard]] const std::array<StackParamSpec, kStackParams>& stack_param_specs();
[[nodiscard]] const StackParamSpec& spec_of(StackParam p);

// One measured run a stack profile was fitted on, and how the fit reproduces it.
struct StackFitRun {
    std::string id;
    int gpus = 0, nodes = 0, tp = 1, pp = 1, cp = 1, dp = 1;
    int micro_batch = 0;       // sequences per micro-batch (0: not written, an older profile)
    // What one GPU computes, apart from the layout (stack_discrepancy.hpp LayoutPoint::shape):
    // runs of one shape share their kernels' shapes at equal tp / cp / micro-batch.
    std::string shape;
    double measured = 0;       // tokens/s/GPU
    double prior = 0;          // predicted with the stock profiles (factors 1)
    double fitted = 0;         // predicted with the fitted factors
    double loo_error_pct = 0;  // leave-this-run-out prediction error, signed (+ = optimistic)
};

// What the fitted factors leave of the runs' errors, as a function of the layout: Kennedy and
// O'Hagan's model discrepancy ("Bayesian calibration of computer models", J. R. Stat. Soc. B 63,
// 2001), a Gaussian process over the runs' log residuals (log measured / fitted throughput) with a
// squared-exponential kernel in log2 of tp, pp, cp, dp and the micro-batch, between runs of one
// shape (the same model, sequence, GPU and precision) and none across shapes (Rasmussen and
// Williams, "Gaussian Processes for Machine Learning", 2006, ch. 2 and 5). A prediction near runs
// of its shape carries their residual (what the simulator gets wrong about those kernels' shapes:
// cuBLAS's choice of tile and split for each GEMM), a prediction far from them none, with the
// variance growing back to the runs' scatter. stack_discrepancy.hpp fits, prepares and evaluates it.
struct StackDiscrepancy {
    bool present = false;
    double signal_var = 0;  // variance of the residual shared by nearby runs (log^2)
    double noise_var = 0;   // variance of each run's own (log^2): run-to-run noise and what no neighbour shares
    // Length scales in log2 units of tp, pp, cp, dp, micro-batch (LayoutPoint::features order).
    std::array<double, 5> length{1, 1, 1, 1, 1};
    double loo_sd_log = 0;  // rms leave-one-run-out log error of fit + discrepancy
    // Derived by prepare_discrepancy (not written): (K + noise I)^-1 r and (K + noise I)^-1.
    std::vector<double> alpha, k_inv;
};

// What the runs covered: a plan beyond it is an extrapolation, and its band says so.
struct StackEvidence {
    int min_gpus = 0, max_gpus = 0;
    int max_nodes = 0;  // 1: every run inside one node (the inter-node factor is not constrained)
    int max_tp = 1, max_pp = 1, max_cp = 1;
    std::vector<std::string> gpus;        // hardware profile ids of the runs
    std::vector<std::string> frameworks;  // framework cells of the runs, canonical
};

struct StackProfile {
    std::string name;
    std::string source_file;  // where it was read from (for reports); empty when built in memory
    std::string description;  // what the user says it is
    // The factors, by StackParam; 1 = the hardware profile's own value.
    std::array<double, kStackParams> factors{1, 1, 1, 1, 1, 1, 1, 1};
    // --- present when fitted (`fitted` true) ---
    bool fitted = false;
    std::string fitted_with;  // the command line and version
    std::string fitted_on;    // the runs file(s)
    // Per parameter: fitted (free in the fit), constrained (the runs narrowed its prior to at most
    // half its width), at a bound (names a missing mechanism).
    std::array<bool, kStackParams> free{}, constrained{}, at_bound{};
    // Posterior covariance of the log factors (prior variance where not free), row-major.
    std::array<double, kStackParams * kStackParams> covariance_log{};
    double residual_sd_log = 0;  // rms of the fitted runs' log errors
    double loo_sd_log = 0;       // rms of their leave-one-run-out log errors
    std::vector<StackFitRun> runs;
    StackDiscrepancy discrepancy;
    StackEvidence evidence;
    std::vector<std::string> notes;  // what the fit could not say (unconstrained, at a bound ...)

    [[nodiscard]] double factor(StackParam p) const { return factors[static_cast<std::size_t>(p)]; }
    [[nodiscard]] double sd_log(StackParam p) const {
        const auto i = static_cast<std::size_t>(p);
        return covariance_log[i * kStackParams + i] > 0 ? std::sqrt(covariance_log[i * kStackParams + i]) : 0.0;
    }
};

// The hardware profile as the stack runs it: every value a factor scales, multiplied (efficiencies
// kept at most 1; measured times divided). Pure; the profile's sources say the stack was applied.
[[nodiscard]] HardwareProfile apply_stack(const HardwareProfile& hw, const std::array<double, kStackParams>& factors,
                                          const std::string& stack_name);
[[nodiscard]] inline HardwareProfile apply_stack(const HardwareProfile& hw, const StackProfile& stack) {
    return apply_stack(hw, stack.factors, stack.name);
}

} // namespace trainsim::model
