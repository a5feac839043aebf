// Hand-built plans and profiles for unit tests (independent of the shipped data files).
#pragma once

#include "trainsim/model/core/scenario.hpp"

namespace trainsim::test {

// An H100-SXM-like profile with round numbers so expected values are easy to derive by hand.
inline model::HardwareProfile test_profile() {
    using namespace model;
    HardwareProfile hw;
    hw.id = "test-gpu";
    hw.name = "Test GPU";
    hw.sm_count = 132;
    hw.dense_peak = {{Precision::bf16, tflop_per_s(1000)}, {Precision::fp16, tflop_per_s(1000)},
                     {Precision::fp8, tflop_per_s(2000)}};
    hw.gemm_efficiency = {{Precision::bf16, 0.8}, {Precision::fp16, 0.8}, {Precision::fp8, 0.7}};
    hw.attention_fwd_efficiency = 0.5;
    hw.attention_bwd_efficiency = 0.4;
    hw.kernel_overhead = Time::us(4);
    hw.hbm_capacity = gib(80);
    hw.hbm_bandwidth = Bandwidth(3e12);
    hw.hbm_efficiency = 0.8;
    hw.reserved_memory = gib(2);
    hw.nvlink_bandwidth = gb_per_s(450);
    hw.nvlink_efficiency = 0.8;
    hw.pcie_bandwidth = gb_per_s(64);
    hw.pcie_efficiency = 0.8;
    hw.intra_node_latency = Time::us(1);
    hw.inter_node_latency = Time::us(5);
    hw.nic_efficiency = 0.9;
    hw.comm_compute_slowdown = 0.1;
    return hw;
}

// A small GPT-style model (MHA, GELU 4h) that keeps simulations fast.
inline model::ModelArch small_model() {
    model::ModelArch m;
    m.name = "test-1b";
    m.layers = 8;
    m.hidden = 2048;
    m.heads = 16;
    m.kv_heads = 16;
    m.head_dim = 128;
    m.ffn = 8192;
    m.ffn_type = model::FfnType::gelu;
    m.vocab = 32000;
    return m;
}

inline model::Plan small_plan(int tp, int pp, int dp, int global_batch = 16, int micro_batch = 1) {
    model::Plan p;
    p.name = "test";
    p.model = small_model();
    p.training.tokens = 1e9;
    p.training.seq_len = 2048;
    p.training.global_batch = global_batch;
    p.training.micro_batch = micro_batch;
    p.parallel.tp = tp;
    p.parallel.pp = pp;
    p.parallel.dp = dp;
    p.parallel.sequence_parallel = tp > 1;
    p.parallel.sharding = model::Sharding::dist_opt;
    p.cluster.gpu = "test-gpu";
    p.cluster.gpus_per_node = 8;
    p.cluster.nodes = (tp * pp * dp + 7) / 8;
    if (tp * pp * dp < 8) p.cluster.gpus_per_node = tp * pp * dp;
    p.hardware = test_profile();
    return p;
}

} // namespace trainsim::test
