#include "trainsim/calibrate/backends/cpu_backend.hpp"

#include "trainsim/calibrate/core/calibrate_error.hpp"
#include "trainsim/calibrate/measure/rendezvous.hpp"

#include "cpu_collectives.hpp"

#include <Eigen/Core>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <stdexcept>
#include <utility>
#include <thread>

namespace trainsim::calibrate {

namespace {

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Deterministic values in [-1, 1]: the CPU's speed does not depend on them, but NaNs or
// denormals would (x86 handles denormals in microcode).
Matrix random_matrix(std::int64_t rows, std::int64_t cols, unsigned seed) {
    Matrix m(rows, cols);
    std::uint32_t x = seed * 2654435761u + 1u;
    for (Eigen::Index i = 0; i < m.size(); ++i) {
        x = x * 1664525u + 1013904223u;  // Numerical Recipes LCG
        m.data()[i] = static_cast<float>(x >> 8) * (2.0f / 16777216.0f) - 1.0f;
    }
    return m;
}

class CpuGemm : public PreparedOp {
public:
    explicit CpuGemm(const Descriptor& d)
        : a_(random_matrix(d.m, d.k, 1)), b_(random_matrix(d.k, d.n, 2)), c_(Matrix::Zero(d.m, d.n)) {}
    void run() override { c_.noalias() = a_ * b_; }
    [[nodiscard]] std::string implementation() const override { return "eigen-fp32-1thread"; }

private:
    Matrix a_, b_, c_;
};

// Causal (or not) row softmax in place; row i of each seq x seq block keeps columns <= i.
void softmax_rows(Matrix& s, bool causal) {
    for (Eigen::Index i = 0; i < s.rows(); ++i) {
        const Eigen::Index valid = causal ? i + 1 : s.cols();
        auto row = s.row(i);
        const float mx = row.head(valid).maxCoeff();
        float sum = 0;
        for (Eigen::Index j = 0; j < valid; ++j) sum += (row(j) = std::exp(row(j) - mx));
        row.head(valid) /= sum;
        if (valid < s.cols()) row.tail(s.cols() - valid).setZero();
    }
}

// Unfused attention per head, the same work as the CUDA fallback (kernels/attention.hpp).
class CpuAttention : public PreparedOp {
public:
    explicit CpuAttention(const Descriptor& d) : d_(d) {
        for (std::int64_t h = 0; h < d.batch_heads; ++h) {
            const auto u = static_cast<unsigned>(h) * 8u;
            q_.push_back(random_matrix(d.seq, d.head_dim, u + 1));
            k_.push_back(random_matrix(d.seq, d.head_dim, u + 2));
            v_.push_back(random_matrix(d.seq, d.head_dim, u + 3));
            o_.push_back(random_matrix(d.seq, d.head_dim, u + 4));
        }
        s_ = Matrix(d.seq, d.seq);
        dp_ = Matrix(d.seq, d.seq);
        tmp_ = Matrix(d.seq, d.head_dim);
    }
    void run() override {
        const bool bwd = d_.op == "attention_bwd";
        for (std::size_t h = 0; h < q_.size(); ++h) {
            s_.noalias() = q_[h] * k_[h].transpose() * (1.0f / std::sqrt(static_cast<float>(d_.head_dim)));
            softmax_rows(s_, d_.causal);
            if (!bwd) {
                o_[h].noalias() = s_ * v_[h];
                continue;
            }
            // o_ plays dO; tmp_ receives dV, dQ, dK in turn (their values are not kept).
            tmp_.noalias() = s_.transpose() * o_[h];                    // dV = P^T dO
            dp_.noalias() = o_[h] * v_[h].transpose();                   // dP = dO V^T
            const Eigen::VectorXf dot = (s_.array() * dp_.array()).rowwise().sum();
            dp_ = (s_.array() * (dp_.array().colwise() - dot.array())).matrix();  // dS
            tmp_.noalias() = dp_ * k_[h];                                 // dQ = dS K
            tmp_.noalias() = dp_.transpose() * q_[h];                     // dK = dS^T Q
        }
    }
    [[nodiscard]] std::string implementation() const override { return "unfused-eigen-fp32"; }

private:
    Descriptor d_;
    std::vector<Matrix> q_, k_, v_, o_;
    Matrix s_, dp_, tmp_;
};

class CpuMemory : public PreparedOp {
public:
    explicit CpuMemory(const Descriptor& d) : d_(d) {
        const auto n = static_cast<std::size_t>(d.elements);
        auto fill = [&](std::vector<float>& v, std::size_t size, float base) {
            v.resize(size);
            for (std::size_t i = 0; i < size; ++i) v[i] = base + 1e-3f * static_cast<float>(i % 97);
        };
        fill(x_, n, 0.5f);
        fill(y_, n, 0.25f);
        if (d.op == "triad" || d.op == "adam") fill(z_, n, 0.125f);
        if (d.op == "adam") fill(w_, n, 0.01f);
        if (d.op == "rmsnorm") fill(w_, static_cast<std::size_t>(d.row), 1.0f);
    }
    void run() override {
        const std::size_t n = x_.size();
        if (d_.op == "copy") {
            std::memcpy(y_.data(), x_.data(), n * sizeof(float));
        } else if (d_.op == "triad") {
            const float s = 0.5f;
            for (std::size_t i = 0; i < n; ++i) x_[i] = y_[i] + s * z_[i];
        } else if (d_.op == "rmsnorm") {
            const auto row = static_cast<std::size_t>(d_.row);
            for (std::size_t r = 0; r + row <= n; r += row) {
                float ss = 0;
                for (std::size_t j = 0; j < row; ++j) ss += x_[r + j] * x_[r + j];
                const float inv = 1.0f / std::sqrt(ss / static_cast<float>(row) + 1e-5f);
                for (std::size_t j = 0; j < row; ++j) y_[r + j] = x_[r + j] * inv * w_[j];
            }
        } else {  // adam: x param, y m, z v, w gradient (constants as the CUDA kernel's)
            constexpr float lr = 1e-4f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f;
            for (std::size_t i = 0; i < n; ++i) {
                const float g = w_[i];
                const float m = b1 * y_[i] + (1 - b1) * g, v = b2 * z_[i] + (1 - b2) * g * g;
                y_[i] = m;
                z_[i] = v;
                x_[i] -= lr * (m / (std::sqrt(v) + eps) + wd * x_[i]);
            }
        }
    }
    [[nodiscard]] std::string implementation() const override { return "loop-fp32-1thread"; }

private:
    Descriptor d_;
    std::vector<float> x_, y_, z_, w_;
};

class CpuCollective : public PreparedOp {
public:
    CpuCollective(detail::CollectiveGroup& team, const Descriptor& d, std::string impl)
        : team_(team), impl_(std::move(impl)) {
        team_.prepare(d.op, static_cast<std::size_t>(d.bytes));
    }
    void run() override { team_.run(); }
    [[nodiscard]] std::string implementation() const override { return impl_; }

private:
    detail::CollectiveGroup& team_;
    std::string impl_;
};

// The GEMM on the calling thread, alone or while the team all-reduces in the background.
class CpuOverlap : public PreparedOp {
public:
    CpuOverlap(detail::CollectiveGroup& team, const Descriptor& d, std::string impl)
        : team_(team), gemm_(d), under_(d.under_all_reduce()), impl_(std::move(impl)) {
        if (under_) team_.prepare("all_reduce", static_cast<std::size_t>(d.comm_bytes));
    }
    void before_sample() override {
        if (under_) team_.start_background();
    }
    void after_sample() override {
        if (under_) team_.stop_background();
    }
    void run() override { gemm_.run(); }
    [[nodiscard]] std::string implementation() const override { return impl_; }

private:
    detail::CollectiveGroup& team_;
    CpuGemm gemm_;
    bool under_;
    std::string impl_;
};

std::string cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line))
        if (line.starts_with("model name")) {
            const auto colon = line.find(':');
            return colon == std::string::npos ? line : line.substr(colon + 2);
        }
    return "unknown";
}

// Ranks are threads of this process (the default), or processes of an MPI launch (`procs`).
class CpuBackend : public Backend {
public:
    explicit CpuBackend(int max_threads) : max_threads_(std::max(1, max_threads)) {}
    explicit CpuBackend(detail::ProcessRanks procs)
        : max_threads_(std::max(1, procs.world)), procs_(std::move(procs)) {}

    [[nodiscard]] std::string name() const override { return "cpu"; }
    [[nodiscard]] int ranks() const override { return max_threads_; }
    [[nodiscard]] std::vector<std::string> rank_hosts() const override {
        return procs_ ? procs_->hosts : std::vector<std::string>{};
    }

    [[nodiscard]] nlohmann::json provenance() const override {
        nlohmann::json j = {
            {"device", "cpu: " + cpu_model()},
            {"host", host_name()},
            {"hardware_threads", std::thread::hardware_concurrency()},
            {"gemm", fmt::format("Eigen {}.{}.{} fp32, one thread", EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION,
                                 EIGEN_MINOR_VERSION)},
            {"collectives", procs_ ? procs_->description
                                   : fmt::format("std::thread ranks over shared memory, up to {}", max_threads_)},
            {"compiler", __VERSION__},
            {"note", "CPU backend: measures this host to test the calibration pipeline; not a GPU"}};
        if (procs_) {
            j["bootstrap"] = "mpi";
            j["world_size"] = procs_->world;
            j["hosts"] = procs_->hosts;
        }
        return j;
    }

    [[nodiscard]] std::optional<std::string> unsupported(const Descriptor& d) const override {
        if (d.dtype != "fp32")
            return fmt::format("the CPU backend computes fp32 only; {} needs a GPU with tensor cores", d.dtype);
        if ((d.kind == OpKind::collective || d.kind == OpKind::overlap) && d.group_size > max_threads_)
            return procs_ ? fmt::format("needs {} ranks; this MPI run has {}", d.group_size, max_threads_)
                          : fmt::format("needs {} ranks; the CPU backend was given {} threads", d.group_size,
                                        max_threads_);
        return std::nullopt;
    }

    // Threads: this process does everything. Processes: rank 0 runs single-process ops, the
    // first group_size ranks each collective (as the CUDA backend's ranks do).
    [[nodiscard]] bool participates(const Descriptor& d) const override {
        if (!procs_) return true;
        if (d.kind == OpKind::collective || d.kind == OpKind::overlap) return procs_->rank < d.group_size;
        return procs_->rank == 0;
    }
    [[nodiscard]] bool writes_samples() const override { return !procs_ || procs_->rank == 0; }

    [[nodiscard]] std::unique_ptr<PreparedOp> prepare(const Descriptor& d) override {
        switch (d.kind) {
        case OpKind::gemm: return std::make_unique<CpuGemm>(d);
        case OpKind::attention: return std::make_unique<CpuAttention>(d);
        case OpKind::memory: return std::make_unique<CpuMemory>(d);
        case OpKind::collective:
            return std::make_unique<CpuCollective>(team(d.group_size), d,
                                                   procs_ ? "mpi-processes" : "threads-shared-memory");
        case OpKind::overlap:
            return std::make_unique<CpuOverlap>(team(d.group_size), d, procs_ ? "eigen-fp32+mpi" : "eigen-fp32+threads");
        }
        throw OpUnsupported("unknown descriptor kind");
    }

    void start_timer() override { start_ = std::chrono::steady_clock::now(); }
    [[nodiscard]] double stop_timer() override {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    }
    // CPU caches are not flushed: the CPU backend tests the pipeline, it does not model a GPU's
    // cold-L2 operands.
    void flush_caches() override {}
    void reduce_times(const Descriptor& d, std::vector<double>& times) override {
        // Threads: one process, one clock. Processes: the slowest rank of the group decides.
        if (procs_ && procs_->max_over_group && (d.kind == OpKind::collective || d.kind == OpKind::overlap) &&
            d.group_size > 1)
            procs_->max_over_group(d.group_size, times);
    }
    // Processes: an MPI_Allreduce over the group's ranks is the barrier and the vote. Threads: one
    // process decides for all of them, and its ranks meet inside every collective step.
    void barrier(const Descriptor& d) override {
        if (!procs_ || !procs_->max_over_group) return;
        std::vector<double> one{0.0};
        procs_->max_over_group(d.group_size, one);
    }
    [[nodiscard]] int first_failing_rank(const Descriptor& d, bool ok) override {
        if (!procs_ || !procs_->max_over_group) return ok ? -1 : 0;
        return lowest_failing_rank(procs_->rank, procs_->world, ok,
                                   [&](std::vector<double>& v) { procs_->max_over_group(d.group_size, v); });
    }

    [[nodiscard]] SampleTelemetry telemetry() const override { return {}; }

    [[nodiscard]] double rough_seconds(const Descriptor& d) const override {
        // ~10 GFLOP/s for an SSE2 Eigen GEMM, ~5 GB/s for loops and thread copies, ~50 us per
        // barrier-separated collective step; only the ETA uses these.
        const double calls = d.warmup + static_cast<double>(d.iters) * d.calls_per_sample;
        double per_call = 1e-6;
        switch (d.kind) {
        case OpKind::gemm:
        case OpKind::overlap:
        case OpKind::attention: per_call += d.flops() / 1e10; break;
        case OpKind::memory: per_call += d.bytes_moved() / 5e9; break;
        case OpKind::collective: per_call += d.bytes * d.bus_factor() / 5e9 + 5e-5 * 2 * d.group_size; break;
        }
        return calls * per_call;
    }

    void end_of_kind() override { teams_.clear(); }

private:
    detail::CollectiveGroup& team(int ranks) {
        auto& t = teams_[ranks];
        if (!t) {
            if (procs_) t = procs_->make_group(ranks);
            else t = std::make_unique<detail::ThreadTeam>(ranks);
        }
        return *t;
    }

    int max_threads_;
    std::optional<detail::ProcessRanks> procs_;
    std::map<int, std::unique_ptr<detail::CollectiveGroup>> teams_;
    std::chrono::steady_clock::time_point start_;
};

} // namespace

std::unique_ptr<Backend> make_cpu_backend(int max_threads) { return std::make_unique<CpuBackend>(max_threads); }

std::unique_ptr<Backend> detail::make_process_cpu_backend(ProcessRanks ranks) {
    if (!ranks.make_group) throw std::invalid_argument("make_process_cpu_backend: no make_group");
    return std::make_unique<CpuBackend>(std::move(ranks));
}

} // namespace trainsim::calibrate
