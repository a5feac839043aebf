#include "trainsim/calibrate/core/descriptor.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace trainsim::calibrate {

const char* to_string(OpKind k) {
    switch (k) {
    case OpKind::gemm: return "gemm";
    case OpKind::attention: return "attention";
    case OpKind::memory: return "memory";
    case OpKind::collective: return "collective";
    case OpKind::overlap: return "overlap";
    }
    return "?";
}

const char* to_string(AlgoChoice a) { return a == AlgoChoice::first ? "first" : "best"; }

double Descriptor::element_bytes(const std::string& dtype) {
    if (dtype == "fp32") return 4.0;
    if (dtype == "bf16" || dtype == "fp16") return 2.0;
    if (dtype.starts_with("fp8")) return 1.0;
    throw std::invalid_argument("unknown element type '" + dtype + "'");
}

namespace {
// Operand element sizes of a GEMM dtype: "fp8_e5m2xfp8_e4m3" is A x B.
std::pair<double, double> operand_bytes(const std::string& dtype) {
    if (dtype.starts_with("fp8")) return {1.0, 1.0};  // e4m3 and e5m2 are both one byte
    const double e = Descriptor::element_bytes(dtype);
    return {e, e};
}
// Output of a GEMM: BF16 on GPUs (what TE writes), fp32 on the CPU backend.
double output_bytes(const std::string& dtype) { return dtype == "fp32" ? 4.0 : 2.0; }
} // namespace

double Descriptor::flops() const {
    const auto M = static_cast<double>(m), N = static_cast<double>(n), K = static_cast<double>(k);
    switch (kind) {
    case OpKind::gemm:
    case OpKind::overlap: return 2.0 * M * N * K;
    case OpKind::attention: {
        const auto s = static_cast<double>(seq), bh = static_cast<double>(batch_heads), d = static_cast<double>(head_dim);
        const double fwd = causal ? 4.0 * bh * d * s * (s + 1.0) / 2.0 : 4.0 * bh * d * s * s;
        return op == "attention_bwd" ? 2.5 * fwd : fwd;
    }
    case OpKind::memory:
    case OpKind::collective: return 0.0;
    }
    return 0.0;
}

double Descriptor::bytes_moved() const {
    switch (kind) {
    case OpKind::gemm:
    case OpKind::overlap: {
        const auto [ea, eb] = operand_bytes(dtype);
        return ea * static_cast<double>(m * k) + eb * static_cast<double>(k * n) +
               output_bytes(dtype) * static_cast<double>(m * n);
    }
    case OpKind::attention: {
        // Q, K, V, O streamed once (backward: also dO, dQ, dK, dV), as model/workload.cpp.
        const double vec = static_cast<double>(batch_heads * seq * head_dim) * element_bytes(dtype);
        return (op == "attention_bwd" ? 8.0 : 4.0) * vec;
    }
    case OpKind::memory: {
        const auto E = static_cast<double>(elements);
        if (op == "cast_transpose") return E * (2.0 + 1.0 + 1.0);  // bf16 in, fp8 out twice
        const double e = element_bytes(dtype);
        if (op == "copy") return 2.0 * E * e;
        if (op == "triad") return 3.0 * E * e;
        if (op == "rmsnorm") return 2.0 * E * e + static_cast<double>(row) * e;  // x in, y out, weights once
        if (op == "adam") return E * (6.0 * 4.0 + e);  // fp32 param, m, v read and written; gradient read
        throw std::invalid_argument("unknown memory kernel '" + op + "'");
    }
    case OpKind::collective: return bytes;
    }
    return 0.0;
}

double Descriptor::bus_factor() const {
    if (kind != OpKind::collective || group_size <= 1) return 1.0;
    const double f = static_cast<double>(group_size - 1) / group_size;
    if (op == "all_reduce") return 2.0 * f;
    if (op == "all_gather" || op == "reduce_scatter" || op == "all_to_all") return f;
    return 1.0;  // send_recv
}

bool Descriptor::under_all_reduce() const {
    return kind == OpKind::overlap && (op == "gemm_under_all_reduce" || op == "gemm_sustained_under_all_reduce");
}

bool Descriptor::sustained() const {
    return kind == OpKind::overlap && op.rfind("gemm_sustained_", 0) == 0;
}

std::string make_key(const Descriptor& d) {
    switch (d.kind) {
    case OpKind::gemm:
        return fmt::format("gemm/{}/m={},n={},k={}/{}{}", d.dtype, d.m, d.n, d.k, to_string(d.algo),
                           d.fast_accum ? ",fast_accum" : "");
    case OpKind::attention:
        return fmt::format("{}/{}/bh={},s={},d={}{}", d.op, d.dtype, d.batch_heads, d.seq, d.head_dim,
                           d.causal ? ",causal" : "");
    case OpKind::memory:
        return d.row > 0 ? fmt::format("memory/{}/{}/n={},row={}", d.op, d.dtype, d.elements, d.row)
                         : fmt::format("memory/{}/{}/n={}", d.op, d.dtype, d.elements);
    case OpKind::collective:
        return fmt::format("{}/{}/g={},{}/bytes={:.0f}", d.op, d.dtype, d.group_size, d.scope, d.bytes);
    case OpKind::overlap:
        return fmt::format("{}/{}/m={},n={},k={}/g={},{}/comm_bytes={:.0f}", d.op, d.dtype, d.m, d.n, d.k,
                           d.group_size, d.scope, d.comm_bytes);
    }
    return {};
}

} // namespace trainsim::calibrate
