// The CUDA backend: plain C++ over trainsim::kernels (no CUDA headers here). Compiled into
// trainsim_calibrate_cuda only when CUDA was found at configure time.
#include "trainsim/calibrate/backends/cuda_backend.hpp"

#include "trainsim/calibrate/core/calibrate_error.hpp"
#include "trainsim/calibrate/measure/plan.hpp"
#include "trainsim/calibrate/measure/rendezvous.hpp"
#include "trainsim/kernels/attention.hpp"
#include "trainsim/kernels/gemm.hpp"
#include "trainsim/kernels/gpu_device.hpp"
#include "trainsim/kernels/kernel_error.hpp"
#include "trainsim/kernels/memory_op.hpp"
#include "trainsim/kernels/nccl_comm.hpp"
#include "trainsim/kernels/overlap.hpp"

#include <fmt/format.h>

#include <functional>
#include <map>
#include <utility>

namespace trainsim::calibrate {

namespace k = trainsim::kernels;

namespace {

std::pair<k::DType, k::DType> gemm_types(const std::string& dtype) {
    if (dtype == "bf16") return {k::DType::bf16, k::DType::bf16};
    if (dtype == "fp8_e4m3") return {k::DType::fp8_e4m3, k::DType::fp8_e4m3};
    if (dtype == "fp8_e5m2xfp8_e4m3") return {k::DType::fp8_e5m2, k::DType::fp8_e4m3};
    if (dtype == "fp8_e4m3xfp8_e5m2") return {k::DType::fp8_e4m3, k::DType::fp8_e5m2};
    throw OpUnsupported("the CUDA backend has no GEMM for element type '" + dtype + "'");
}

k::GemmSpec gemm_spec(const Descriptor& d) {
    k::GemmSpec s;
    s.m = d.m;
    s.n = d.n;
    s.k = d.k;
    std::tie(s.a, s.b) = gemm_types(d.dtype);
    s.fast_accum = d.fast_accum;
    s.policy = d.algo == AlgoChoice::first ? k::AlgoPolicy::heuristic_first : k::AlgoPolicy::best_of_n;
    s.candidates = 8;  // best_of_n: the heuristic's first 8 answers (the first is in them)
    return s;
}

k::MemoryKernel memory_kernel(const std::string& op) {
    for (auto m : {k::MemoryKernel::copy, k::MemoryKernel::triad, k::MemoryKernel::rmsnorm, k::MemoryKernel::adam,
                   k::MemoryKernel::cast_transpose})
        if (op == k::to_string(m)) return m;
    throw OpUnsupported("unknown memory kernel '" + op + "'");
}

k::CollectiveKind collective_kind(const std::string& op) {
    for (auto c : {k::CollectiveKind::all_reduce, k::CollectiveKind::all_gather, k::CollectiveKind::reduce_scatter,
                   k::CollectiveKind::all_to_all, k::CollectiveKind::send_recv})
        if (op == k::to_string(c)) return c;
    throw OpUnsupported("unknown collective '" + op + "'");
}

class GemmOp : public PreparedOp {
public:
    GemmOp(k::GpuDevice& dev, const Descriptor& d) : g_(dev, gemm_spec(d)) {}
    void run() override { g_.run(); }
    [[nodiscard]] std::string implementation() const override { return "cublaslt"; }
    [[nodiscard]] int algo_index() const override { return g_.algo_index(); }
    [[nodiscard]] int algo_count() const override { return g_.algo_count(); }

private:
    k::Gemm g_;
};

class AttentionOp : public PreparedOp {
public:
    AttentionOp(k::GpuDevice& dev, const Descriptor& d) : a_(dev, spec(d)) {}
    void run() override { a_.run(); }
    [[nodiscard]] std::string implementation() const override { return a_.implementation(); }

private:
    static k::AttentionSpec spec(const Descriptor& d) {
        k::AttentionSpec s;
        s.batch_heads = d.batch_heads;
        s.seq = d.seq;
        s.head_dim = d.head_dim;
        s.causal = d.causal;
        s.backward = d.op == "attention_bwd";
        s.dtype = d.dtype == "bf16" ? k::DType::bf16 : k::DType::fp8_e4m3;
        return s;
    }
    k::Attention a_;
};

class MemoryKernelOp : public PreparedOp {
public:
    MemoryKernelOp(k::GpuDevice& dev, const Descriptor& d)
        : m_(dev, k::MemorySpec{memory_kernel(d.op), d.elements, d.row > 0 ? d.row : 8192}) {}
    void run() override { m_.run(); }
    [[nodiscard]] std::string implementation() const override { return "cuda-kernel"; }

private:
    k::MemoryOp m_;
};

class CollectiveOp : public PreparedOp {
public:
    CollectiveOp(k::GpuDevice& dev, k::NcclComm& comm, const Descriptor& d)
        : c_(dev, comm, collective_kind(d.op), static_cast<std::size_t>(d.bytes)) {}
    void run() override { c_.run(); }
    [[nodiscard]] std::string implementation() const override { return "nccl"; }

private:
    k::Collective c_;
};

class OverlapOp : public PreparedOp {
public:
    OverlapOp(k::GpuDevice& dev, k::NcclComm& comm, const Descriptor& d)
        : o_(dev, comm, gemm_spec(d), static_cast<std::size_t>(d.comm_bytes)) {}
    void run() override { o_.run(); }
    void after_sample() override { o_.drain(); }
    [[nodiscard]] std::string implementation() const override { return "cublaslt+nccl"; }

private:
    k::OverlapGemm o_;
};

std::string version3(long v, long major_div, long minor_div) {
    return fmt::format("{}.{}.{}", v / major_div, (v % major_div) / minor_div, v % minor_div);
}

SampleTelemetry to_sample(const k::Telemetry& t) {
    SampleTelemetry s;
    s.sm_clock_mhz = t.sm_clock_mhz;
    s.mem_clock_mhz = t.mem_clock_mhz;
    s.temperature_c = t.temperature_c;
    s.power_w = t.power_w;
    s.throttle_reasons = t.throttle_reasons;
    return s;
}

class CudaBackend : public Backend {
public:
    explicit CudaBackend(const CudaOptions& o) : rank_(o.rank), world_(std::max(1, o.world)) {
        const int n = k::gpu_count();
        if (n == 0) throw NoDeviceError("no CUDA device: " + k::no_gpu_reason());
        const int local = o.local_rank >= 0 ? o.local_rank : rank_;
        const int ordinal = o.device >= 0 ? o.device : local % n;
        dev_ = std::make_unique<k::GpuDevice>(ordinal);
        dev_->set_wait_timeout(o.wait_timeout_s);
        hosts_.assign(static_cast<std::size_t>(world_), host_name());
        if (world_ > 1) {
            const auto make_id = [] {
                const k::NcclId id = k::make_nccl_id();
                return std::vector<unsigned char>(id.begin(), id.end());
            };
            // Rank 0 makes the NCCL id; MPI_Bcast (under mpirun) or the file rendezvous shares it.
            std::vector<unsigned char> shared;
            if (o.share_id) {
                shared = o.share_id(make_id);
                if (o.hosts.size() == hosts_.size()) hosts_ = o.hosts;
                max_over_group_ = o.max_over_group;
                mpi_ = true;
            } else {
                auto rv = rendezvous(o.rendezvous_dir, o.session, rank_, world_, make_id);
                hosts_ = std::move(rv.hosts);
                shared = std::move(rv.id);
            }
            k::NcclId id{};
            if (shared.size() != id.size())
                throw CalibrationInputError(o.share_id ? std::string("MPI bootstrap") : o.rendezvous_dir.string(),
                                            "malformed NCCL id");
            std::copy(shared.begin(), shared.end(), id.begin());
            world_comm_ = std::make_unique<k::NcclComm>(*dev_, id, world_, rank_);
            // Every rank splits for every group size, in the same order (ncclCommSplit is
            // collective); ranks outside a group get no communicator for it.
            for (int g : group_sizes(world_)) {
                if (g == world_) {
                    groups_[g] = world_comm_.get();
                    continue;
                }
                auto sub = world_comm_->split(rank_ < g ? 0 : -1, rank_);
                groups_[g] = sub.get();
                if (sub) owned_.push_back(std::move(sub));
            }
        }
        start_telemetry_ = dev_->telemetry();
    }

    [[nodiscard]] std::string name() const override { return "cuda"; }
    [[nodiscard]] int ranks() const override { return world_; }
    [[nodiscard]] std::vector<std::string> rank_hosts() const override { return hosts_; }

    [[nodiscard]] nlohmann::json provenance() const override {
        const k::DeviceInfo& i = dev_->info();
        const std::string nccl = i.nccl_version > 0
                                     ? version3(i.nccl_version, 10000, 100)
                                     : std::string("not loaded (not needed with one GPU; NCCL_HOME points at it)");
        nlohmann::json tel = nlohmann::json::object();
        if (start_telemetry_.sm_clock_mhz) tel["sm_clock_mhz"] = *start_telemetry_.sm_clock_mhz;
        if (start_telemetry_.temperature_c) tel["temperature_c"] = *start_telemetry_.temperature_c;
        if (start_telemetry_.power_w) tel["power_w"] = *start_telemetry_.power_w;
        return {{"device", i.name},
                {"pci_bus_id", i.pci_bus_id},
                {"compute_capability", fmt::format("{}.{}", i.cc_major, i.cc_minor)},
                {"sm_count", i.sm_count},
                {"memory_bytes", i.memory_bytes},
                {"l2_bytes", i.l2_bytes},
                {"max_sm_clock_mhz", i.max_sm_clock_mhz},
                {"max_mem_clock_mhz", i.max_mem_clock_mhz},
                {"cuda_driver", fmt::format("{}.{}", i.driver_version / 1000, (i.driver_version % 1000) / 10)},
                {"cuda_runtime", fmt::format("{}.{}", i.runtime_version / 1000, (i.runtime_version % 1000) / 10)},
                {"nvidia_driver", i.nvidia_driver.empty() ? "unknown (no NVML)" : i.nvidia_driver},
                {"cublaslt", version3(static_cast<long>(i.cublaslt_version), 10000, 100)},
                {"nccl", nccl},
                {"nccl_library", i.nccl_library},
                {"attention",
                 "unfused fallback: cuBLASLt batched GEMMs + softmax kernel (cuDNN frontend not "
                 "available at build time)"},
                {"ranks", world_},
                {"bootstrap", world_ == 1 ? "none" : (mpi_ ? "mpi" : "file rendezvous")},
                {"hosts", hosts_},
                {"telemetry_at_start", tel}};
    }

    [[nodiscard]] std::optional<std::string> unsupported(const Descriptor& d) const override {
        const bool fp8 = d.dtype.starts_with("fp8");
        if (fp8 && !dev_->supports_fp8())
            return fmt::format("FP8 needs compute capability >= 8.9; {} is {}.{}", dev_->info().name,
                               dev_->info().cc_major, dev_->info().cc_minor);
        if ((d.kind == OpKind::collective || d.kind == OpKind::overlap) && d.group_size > world_)
            return fmt::format("needs {} GPUs; this run has {}", d.group_size, world_);
        if (d.dtype == "fp32") return std::string("the CUDA backend measures bf16 and fp8, not fp32");
        return std::nullopt;
    }

    [[nodiscard]] bool participates(const Descriptor& d) const override {
        if (d.kind == OpKind::collective || d.kind == OpKind::overlap) return rank_ < d.group_size;
        return rank_ == 0;
    }
    [[nodiscard]] bool writes_samples() const override { return rank_ == 0; }

    [[nodiscard]] std::unique_ptr<PreparedOp> prepare(const Descriptor& d) override {
        try {
            switch (d.kind) {
            case OpKind::gemm: return std::make_unique<GemmOp>(*dev_, d);
            case OpKind::attention: return std::make_unique<AttentionOp>(*dev_, d);
            case OpKind::memory: return std::make_unique<MemoryKernelOp>(*dev_, d);
            case OpKind::collective: return std::make_unique<CollectiveOp>(*dev_, comm(d), d);
            case OpKind::overlap:
                if (!d.under_all_reduce()) return std::make_unique<GemmOp>(*dev_, d);
                return std::make_unique<OverlapOp>(*dev_, comm(d), d);
            }
        } catch (const k::KernelUnsupported& e) {
            throw OpUnsupported(e.what());
        }
        throw OpUnsupported("unknown descriptor kind");
    }

    [[nodiscard]] bool healthy() override {
        if (dev_->aborted()) return false; // a wait gave up: waiting again would too
        try {
            dev_->synchronize(); // a sticky error (illegal address, ECC) fails every later call
            return true;
        } catch (const k::KernelError&) {
            return false;
        }
    }

    void barrier(const Descriptor& d) override {
        // MPI_Allreduce under MPI (nccl-tests barriers with MPI_Barrier), else a one-element NCCL
        // all-reduce and a wait for it, as PyTorch's ProcessGroupNCCL::barrier does.
        std::vector<double> one{0.0};
        max_over_group(d, one);
    }

    [[nodiscard]] int first_failing_rank(const Descriptor& d, bool ok) override {
        return lowest_failing_rank(rank_, world_, ok, [&](std::vector<double>& v) { max_over_group(d, v); });
    }

    void burn_in(double seconds) override {
        // The short benchmark's own GEMM (8192^3 BF16, heuristic's first algorithm), in batches of
        // 10 calls until `seconds` have passed; best effort: a device that cannot run it skips it.
        try {
            k::GemmSpec g;
            g.m = g.n = g.k = 8192;
            g.a = g.b = k::DType::bf16;
            k::Gemm gemm(*dev_, g);
            double spent = 0;
            while (spent < seconds) {
                dev_->start_timer();
                for (int i = 0; i < 10; ++i) gemm.run();
                spent += dev_->stop_timer();
            }
        } catch (const k::KernelUnsupported&) {
        }
        dev_->release_scratch();
    }

    void start_timer() override { dev_->start_timer(); }
    [[nodiscard]] double stop_timer() override { return dev_->stop_timer(); }
    void flush_caches() override { dev_->flush_l2(); }

    void reduce_times(const Descriptor& d, std::vector<double>& times) override {
        if ((d.kind == OpKind::collective || d.kind == OpKind::overlap) && d.group_size > 1) {
            max_over_group(d, times);
        }
    }

    [[nodiscard]] SampleTelemetry telemetry() const override { return to_sample(dev_->telemetry()); }

    [[nodiscard]] double rough_seconds(const Descriptor& d) const override {
        // H100-class rates (~600 TFLOP/s BF16 GEMMs, x2 FP8; 2.5 TB/s; 200 GB/s busbw), 10 us per
        // call and 20 ms of setup per descriptor; only the ETA uses these.
        const double calls = d.warmup + static_cast<double>(d.iters) * d.calls_per_sample;
        double per_call = 1e-5;
        switch (d.kind) {
        case OpKind::gemm:
        case OpKind::overlap: per_call += d.flops() / (d.dtype == "bf16" ? 6e14 : 1.2e15); break;
        case OpKind::attention: per_call += d.flops() / 2e14; break;
        case OpKind::memory: per_call += d.bytes_moved() / 2.5e12; break;
        case OpKind::collective: per_call += d.bytes * d.bus_factor() / 2e11; break;
        }
        const double best_of = d.kind == OpKind::gemm && d.algo == AlgoChoice::best ? 8 * 7 * per_call : 0.0;
        return 0.02 + calls * per_call + best_of;
    }

    void end_of_kind() override { dev_->release_scratch(); }

private:
    // Element-wise max over the descriptor's group: MPI_Allreduce under MPI, else NCCL's.
    void max_over_group(const Descriptor& d, std::vector<double>& v) {
        if (max_over_group_)
            max_over_group_(d.group_size, v);
        else
            comm(d).max_over_ranks(v);
    }

    k::NcclComm& comm(const Descriptor& d) {
        auto it = groups_.find(d.group_size);
        if (it == groups_.end() || it->second == nullptr)
            throw OpUnsupported(fmt::format("no communicator for a group of {} on rank {}", d.group_size, rank_));
        return *it->second;
    }

    int rank_, world_;
    std::unique_ptr<k::GpuDevice> dev_;
    std::unique_ptr<k::NcclComm> world_comm_;
    std::vector<std::unique_ptr<k::NcclComm>> owned_;
    std::map<int, k::NcclComm*> groups_;
    std::vector<std::string> hosts_;
    std::function<void(int, std::vector<double>&)> max_over_group_;  // MPI bootstrap only
    bool mpi_ = false;
    k::Telemetry start_telemetry_;
};

} // namespace

std::unique_ptr<Backend> make_cuda_backend(const CudaOptions& opts) {
    try {
        return std::make_unique<CudaBackend>(opts);
    } catch (const k::NoCudaDevice& e) {
        throw NoDeviceError(std::string("no CUDA device: ") + e.detail());
    } catch (const k::NcclNotFound& e) {
        // An environment problem, not a failure of the run: exit 2 with where it was looked for.
        throw CalibrationInputError("NCCL",
                                    fmt::format("{} GPUs need NCCL to communicate: {}", opts.world, e.detail()));
    }
}

nlohmann::json cuda_environment() {
    const k::RuntimeReport r = k::runtime_report();
    auto ver = [](int v) { return v > 0 ? fmt::format("{}.{}", v / 1000, (v % 1000) / 10) : std::string(); };
    nlohmann::json j;
    j["cuda_devices"] = r.device_count;
    j["devices"] = r.devices;
    if (r.device_count == 0) j["no_device_reason"] = "no CUDA device: " + r.no_device_reason;
    j["cuda_runtime"] = ver(r.runtime_version);
    j["cuda_driver"] = r.driver_version > 0 ? nlohmann::json(ver(r.driver_version)) : nlohmann::json(nullptr);
    j["cublaslt"] = version3(static_cast<long>(r.cublaslt_version), 10000, 100);
    j["cublaslt_library"] = r.cublaslt_library;
    if (r.nccl_library.empty()) {
        j["nccl"] = nullptr;
        j["nccl_missing"] = r.nccl_missing;
    } else {
        j["nccl"] = version3(r.nccl_version, 10000, 100);
        j["nccl_library"] = r.nccl_library;
    }
    return j;
}

int cuda_device_count() { return k::gpu_count(); }

} // namespace trainsim::calibrate
