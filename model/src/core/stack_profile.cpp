#include "trainsim/model/core/stack_profile.hpp"

#include <algorithm>
#include <stdexcept>

namespace trainsim::model {

const std::array<StackParamSpec, kStackParams>& stack_param_specs() {
    // Bounds are physical limits on what a stack can make of the profile's figure; the prior width
    // is the spread seen between stacks on one GPU before a run of the user's is seen. The fitted
    // efficiencies are kept at most 1 by apply_stack whatever the factor.
    static const std::array<StackParamSpec, kStackParams> specs{{
        {StackParam::gemm, "gemm_efficiency", "compute.gemm_efficiency (every precision); measured GEMM rates",
         0.3, 1.5, 0.2,
         "cuBLASLt through Transformer Engine vs PyTorch's matmul on unpadded or transposed shapes: the "
         "same GEMM runs 10-30% apart between stacks (docs/accuracy.md); 0.3: tensor cores mostly missed"},
        {StackParam::attention, "attention_efficiency",
         "compute.attention_*_efficiency (fused, Triton, FlashAttention-2)", 0.25, 2.0, 0.35,
         "FlashAttention-2 runs ~2x FlashAttention-1 and ~1.3x Triton on A100 (Dao 2023, Fig. 4-6): "
         "attention kernels differ by up to 2x between stacks"},
        {StackParam::memory_bound, "memory_bandwidth", "memory.hbm_efficiency (element-wise kernels)", 0.3, 1.25,
         0.25,
         "eager PyTorch element-wise kernels reach 40-90% of HBM bandwidth depending on size and "
         "vectorisation; fused ones near STREAM"},
        {StackParam::kernel_overhead, "kernel_overhead", "compute.kernel_overhead (launch + tail per kernel)", 0.25,
         4.0, 0.5, "a kernel's fixed cost is 2-10 us on current GPUs (launch latency + tail effect)"},
        {StackParam::host, "host_time", "host time per launch and per call (1 / node.host_cpu_speed)", 0.2, 5.0, 0.5,
         "eager PyTorch spends ~5-25 us of CPU per op issued (model::host_costs): a stack's Python, hooks "
         "and dispatcher move it by up to 5x either way"},
        {StackParam::comm_intra, "comm_intra_node", "interconnect.nvlink / nvls / pcie efficiency; measured intra-node "
         "collective times", 0.3, 1.25, 0.25,
         "NCCL versions, channel counts and buffer registration move intra-node busbw by 10-40%"},
        {StackParam::comm_inter, "comm_inter_node", "interconnect.nic_efficiency; measured inter-node collective times",
         0.2, 1.25, 0.35,
         "RoCE / IB tuning, GPUDirect RDMA and NCCL settings move inter-node busbw by up to 2-3x"},
        {StackParam::overlap, "comm_compute_slowdown", "overlap.comm_compute_slowdown", 0.1, 5.0, 0.7,
         "compute slowed 0-30% by concurrent NCCL kernels depending on SMs they take (NCCL_NCHANNELS)"},
    }};
    return specs;
}

const StackParamSpec& spec_of(StackParam p) {
    return stack_param_specs()[static_cast<std::size_t>(p)];
}

HardwareProfile apply_stack(const HardwareProfile& hw, const std::array<double, kStackParams>& f,
                            const std::string& stack_name) {
    for (const double v : f)
        if (!(v > 0) || !std::isfinite(v)) throw std::invalid_argument("apply_stack: a factor is not a positive number");
    HardwareProfile out = hw;
    // An efficiency scaled by a factor stays at most 1, or at most what the profile gives where it
    // is above 1 (NVLS all-reduce's bus bandwidth exceeds the link rate: 1.06-1.07 on Hopper), so
    // that factors of 1 leave every profile exactly as it is.
    auto scaled = [](double e, double factor) { return std::min(e * factor, std::max(e, 1.0)); };
    const double gemm = f[static_cast<std::size_t>(StackParam::gemm)];
    for (auto& [p, e] : out.gemm_efficiency) e = scaled(e, gemm);
    for (auto& s : out.gemm_table) s.time = Time::from_seconds(s.time.seconds() / gemm);
    const double att = f[static_cast<std::size_t>(StackParam::attention)];
    for (double* e : {&out.attention_fwd_efficiency, &out.attention_bwd_efficiency, &out.triton_attention_fwd_efficiency,
                      &out.triton_attention_bwd_efficiency, &out.flash2_attention_fwd_efficiency,
                      &out.flash2_attention_bwd_efficiency})
        *e = scaled(*e, att);
    out.hbm_efficiency = scaled(out.hbm_efficiency, f[static_cast<std::size_t>(StackParam::memory_bound)]);
    for (auto& [p, c] : out.memory_curve)
        c.beta_bw = c.beta_bw * f[static_cast<std::size_t>(StackParam::memory_bound)];
    out.kernel_overhead =
        Time::from_seconds(out.kernel_overhead.seconds() * f[static_cast<std::size_t>(StackParam::kernel_overhead)]);
    const double host = f[static_cast<std::size_t>(StackParam::host)];
    out.host_cpu_speed /= host;
    out.host_op_overhead = Time::from_seconds(out.host_op_overhead.seconds() * host);
    const double intra = f[static_cast<std::size_t>(StackParam::comm_intra)];
    const double inter = f[static_cast<std::size_t>(StackParam::comm_inter)];
    out.nvlink_efficiency = scaled(out.nvlink_efficiency, intra);
    out.nvls_efficiency = scaled(out.nvls_efficiency, intra);
    out.pcie_efficiency = scaled(out.pcie_efficiency, intra);
    out.nic_efficiency = scaled(out.nic_efficiency, inter);
    for (auto& s : out.collective_times)
        s.time = Time::from_seconds(s.time.seconds() / (s.scope == "inter_node" ? inter : intra));
    // Measured collectives (times, and the alpha-beta curves fitted on them) are divided whole, as
    // the stack's collectives run: their latency and their bandwidth alike. The modelled ones take
    // the factor on the link efficiency above (the per-hop latencies are the fabric's).
    for (auto& c : out.collectives) {
        const double k = c.scope == "inter_node" ? inter : intra;
        c.curve.beta_bw = c.curve.beta_bw * k;
        c.curve.alpha = Time::from_seconds(c.curve.alpha.seconds() / k);
    }
    out.comm_compute_slowdown *= f[static_cast<std::size_t>(StackParam::overlap)];
    if (!stack_name.empty()) out.sources["stack"] = "stack profile '" + stack_name + "' applied (factors on this profile)";
    return out;
}

} // namespace trainsim::model
