// One descriptor per measured operation (nccl-tests style): what it is, its shape, how the shared
// timing loop runs it, and how its time is normalised into a rate (FLOP/s for GEMMs and attention,
// bytes moved per second for memory-bound kernels, algorithm and bus bandwidth for collectives).
// The normalisations below are the only definitions of FLOPs and bytes per call in calibrate/.
#pragma once

#include <cstdint>
#include <string>

namespace trainsim::calibrate {

enum class OpKind {
    gemm,       // C[m,n] = A[m,k] B[k,n]
    attention,  // causal attention forward or backward
    memory,     // a memory-bound kernel
    collective, // a collective over group_size ranks
    overlap,    // a GEMM timed alone ("gemm_alone") or under an all-reduce ("gemm_under_all_reduce"),
                // also after a long sustained load ("gemm_sustained_alone", "gemm_sustained_under_all_reduce")
};
[[nodiscard]] const char* to_string(OpKind k);

// Which GEMM algorithm is timed: the heuristic's first answer (what frameworks run) or the
// fastest of its first few (what a tuned library could reach).
enum class AlgoChoice { first, best };
[[nodiscard]] const char* to_string(AlgoChoice a);

struct Descriptor {
    std::string key;    // stable identity: resume skips keys already in samples.jsonl
    OpKind kind = OpKind::gemm;
    std::string op; // gemm | attention_fwd | attention_bwd | copy | triad | rmsnorm | adam |
                    // cast_transpose | all_reduce | all_gather | reduce_scatter | all_to_all |
                    // send_recv | gemm_alone | gemm_under_all_reduce | gemm_sustained_alone |
                    // gemm_sustained_under_all_reduce
    // Element types as measured: "bf16", "fp32", "fp8_e4m3" (both operands), or for mixed FP8
    // GEMMs "fp8_e5m2xfp8_e4m3" (A x B). Honest labels: the CPU backend measures fp32.
    std::string dtype;
    std::string label;  // where the shape comes from ("llama2-70b tp8 tokens=8192 fc1_dgrad")

    // gemm and overlap: C[m,n] = A[m,k] B[k,n] (the simulator's convention, model/workload.cpp)
    std::int64_t m = 0, n = 0, k = 0;
    AlgoChoice algo = AlgoChoice::first;
    bool fast_accum = false;  // FP8: TE's forward GEMMs accumulate fast, dgrad/wgrad do not

    // attention
    std::int64_t batch_heads = 0, seq = 0, head_dim = 0;
    bool causal = true;

    // memory: elements of the primary tensor; rows of `row` elements for rmsnorm / cast_transpose
    std::int64_t elements = 0, row = 0;

    // collective: the nccl-tests "size" in bytes (see kernels/nccl_comm.hpp), over the first
    // group_size ranks; scope intra_node (one host) or inter_node
    double bytes = 0;
    int group_size = 1;
    std::string scope = "intra_node";
    // overlap: bytes of the all-reduce running under the GEMM (over group_size ranks)
    double comm_bytes = 0;

    // How the shared timing loop runs it.
    int warmup = 3;            // untimed calls first
    int iters = 10;            // timed samples
    int calls_per_sample = 1;  // calls between two timestamps (tiny collectives: > 1)
    bool flush_l2 = true;      // flush caches before each timed sample (GPU)

    // --- normalisation ---
    // Useful floating-point operations per call: 2mnk for a GEMM; for attention the
    // FlashAttention convention (forward 4 * bh * d * s^2, halved plus the diagonal when causal:
    // 4 bh d s (s+1) / 2; backward 2.5x forward), as model/workload.cpp counts it.
    [[nodiscard]] double flops() const;
    // Bytes read + written per call by a memory-bound kernel (or a GEMM's operands).
    [[nodiscard]] double bytes_moved() const;
    // overlap: whether an all-reduce of comm_bytes runs in the background of the timed GEMM.
    [[nodiscard]] bool under_all_reduce() const;
    // overlap: whether the samples follow a long sustained load (warmup calls), so that they
    // see the clock the GPU holds under power and thermal limits rather than its boost clock.
    [[nodiscard]] bool sustained() const;
    // nccl-tests bus-bandwidth factor: busbw = algbw x factor; algbw = bytes / time.
    // all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all (n-1)/n; send_recv 1.
    [[nodiscard]] double bus_factor() const;
    // Bytes of one element of the given dtype ("bf16" 2, "fp32" 4, "fp8_*" 1).
    [[nodiscard]] static double element_bytes(const std::string& dtype);
};

// A key from the fields that identify a measurement (kind, op, dtype, shape, algo, group): two
// descriptors with the same key measure the same thing.
[[nodiscard]] std::string make_key(const Descriptor& d);

} // namespace trainsim::calibrate
