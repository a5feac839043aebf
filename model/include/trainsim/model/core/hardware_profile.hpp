// The hardware-profile format shared by trainsim-calibrate (writer) and the simulator (reader).
// Every number is physical (a peak, a bandwidth, an efficiency, an overhead); in the YAML file each
// carries its unit and its source. See docs/profile-format.md.
#pragma once

#include "trainsim/model/core/errors.hpp"
#include "trainsim/model/core/units.hpp"

#include <algorithm>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace trainsim::model {

enum class Precision { bf16, fp16, fp8 };

// Where a profile's numbers come from.
enum class Provenance { datasheet_published, calibrated };

// One GEMM measurement (or table entry): C[M,N] = A[M,K] * B[K,N] in the given precision.
struct GemmSample {
    Precision precision = Precision::bf16;
    long m = 0, n = 0, k = 0;
    Time time;
};

// A bandwidth curve t(bytes) = t0 + bytes / bw, as fitted by trainsim-calibrate (alpha-beta).
struct AlphaBeta {
    Time alpha;         // fixed cost per call
    Bandwidth beta_bw;  // asymptotic bandwidth
};

// A calibrated collective curve for one (op, group size, scope).
struct CollectiveCurve {
    std::string op;     // all_reduce | all_gather | reduce_scatter | all_to_all | send_recv
    int group_size = 0;
    std::string scope;  // intra_node | inter_node
    AlphaBeta curve;    // busbw-normalised: t = alpha + bus_bytes / beta_bw
};

// One measured collective time: the out-of-place `time` of an nccl-tests row (bytes in nccl-tests
// terms: the all-reduce buffer, the all-gather output, the reduce-scatter input) or a
// trainsim-calibrate measurement. A profile's samples of one (op, group size, scope) form a curve
// read by piecewise log-log interpolation (sim/src/network/network.cpp).
struct CollectiveSample {
    std::string op;
    int group_size = 0;
    std::string scope;  // intra_node | inter_node
    Bytes bytes;
    Time time;
};

// A profile's measured table, as a vector whose copies share one buffer until one of them writes
// (copy on write): a plan carries its profile by value, and `validate` holds one plan per row,
// so 100,000 rows of one GPU would otherwise hold 100,000 copies of its nccl-tests table
// (issue #45: 1.2 GB). Reading goes through the const members; any non-const access takes a
// buffer of its own first.
template <class T>
class SharedVector {
public:
    using value_type = T;
    using const_iterator = typename std::vector<T>::const_iterator;
    using iterator = typename std::vector<T>::iterator;
    SharedVector() = default;
    SharedVector(std::initializer_list<T> init) : data_(std::make_shared<std::vector<T>>(init)) {}
    [[nodiscard]] const_iterator begin() const { return data().begin(); }
    [[nodiscard]] const_iterator end() const { return data().end(); }
    [[nodiscard]] const_iterator cbegin() const { return data().begin(); }
    [[nodiscard]] const_iterator cend() const { return data().end(); }
    [[nodiscard]] iterator begin() { return own().begin(); }
    [[nodiscard]] iterator end() { return own().end(); }
    [[nodiscard]] std::size_t size() const { return data().size(); }
    [[nodiscard]] bool empty() const { return data().empty(); }
    [[nodiscard]] const T& operator[](std::size_t i) const { return data()[i]; }
    [[nodiscard]] T& operator[](std::size_t i) { return own()[i]; }
    [[nodiscard]] const T& front() const { return data().front(); }
    [[nodiscard]] const T& back() const { return data().back(); }
    // The table as a plain vector (read only).
    [[nodiscard]] const std::vector<T>& vector() const { return data(); }
    void push_back(T v) { own().push_back(std::move(v)); }
    template <class... Args>
    T& emplace_back(Args&&... args) {
        return own().emplace_back(std::forward<Args>(args)...);
    }
    void clear() { data_.reset(); }
    template <class Pred>
    std::size_t erase_if(Pred pred) {
        if (std::none_of(data().begin(), data().end(), pred)) return 0;
        return std::erase_if(own(), pred);
    }
    friend bool operator==(const SharedVector& a, const SharedVector& b) { return a.data() == b.data(); }

private:
    [[nodiscard]] const std::vector<T>& data() const {
        static const std::vector<T> kEmpty;
        return data_ ? *data_ : kEmpty;
    }
    std::vector<T>& own() {
        if (!data_)
            data_ = std::make_shared<std::vector<T>>();
        else if (data_.use_count() > 1)
            data_ = std::make_shared<std::vector<T>>(*data_);
        return *data_;
    }
    std::shared_ptr<std::vector<T>> data_;
};

// Where each value of a profile comes from (path in the profile file -> source text). Copies share
// one map until one of them writes (copy on write): the plan search copies a profile into every
// layout it tries, and the ~40 source strings are only read after loading.
class SourceMap {
public:
    using Map = std::map<std::string, std::string>;
    using const_iterator = Map::const_iterator;
    [[nodiscard]] const_iterator begin() const { return map().begin(); }
    [[nodiscard]] const_iterator end() const { return map().end(); }
    [[nodiscard]] const_iterator find(const std::string& key) const { return map().find(key); }
    [[nodiscard]] bool contains(const std::string& key) const { return map().contains(key); }
    [[nodiscard]] const std::string& at(const std::string& key) const { return map().at(key); }
    [[nodiscard]] std::size_t size() const { return map().size(); }
    [[nodiscard]] bool empty() const { return map().empty(); }
    std::string& operator[](const std::string& key) { return own()[key]; }
    std::size_t erase(const std::string& key) { return own().erase(key); }
    friend bool operator==(const SourceMap& a, const SourceMap& b) { return a.map() == b.map(); }

private:
    [[nodiscard]] const Map& map() const {
        static const Map kEmpty;
        return map_ ? *map_ : kEmpty;
    }
    Map& own() {
        if (!map_)
            map_ = std::make_shared<Map>();
        else if (map_.use_count() > 1)
            map_ = std::make_shared<Map>(*map_);
        return *map_;
    }
    std::shared_ptr<Map> map_;
};

struct HardwareProfile {
    std::string id;
    std::string name;
    Provenance provenance = Provenance::datasheet_published;
    // The shipped profile a calibrated profile was fitted on (`trainsim-calibrate fit --base`), by
    // id; empty for a profile that is not a fit. The error bands judge the plan by this GPU's
    // published runs (docs/trust.md "Calibrated profiles"): a fitted node is that GPU, measured.
    std::string base;
    std::string source_file;  // path the profile was read from (for reports)

    // --- compute ---
    int sm_count = 0;
    std::map<Precision, FlopRate> dense_peak;  // absent key: precision unsupported by tensor cores
    std::map<Precision, std::string> unsupported_reason;  // why (e.g. "A100 has no FP8 tensor cores")
    // Fraction of dense peak reached by large, well-shaped GEMMs (cuBLASLt, measured/published).
    std::map<Precision, double> gemm_efficiency;
    // Tensor-core clock sustained through a training run (every GPU of the node at its power cap,
    // communication overlapping compute) relative to the clock of the short GEMM / attention
    // benchmarks the efficiencies above come from. Scales GEMM and attention throughput, not
    // memory-bound kernels (the memory clock does not throttle).
    double sustained_clock_ratio = 1.0;
    // FP8 GEMM throughput with split (FP32-promoted) accumulation, as Transformer Engine and
    // torchao run the backward (dgrad / wgrad) GEMMs, relative to fast accumulation (forward).
    double fp8_split_accumulate_speed = 1.0;
    // Output tile of the GEMM kernels used for wave quantisation (tiles spread over SMs).
    int gemm_tile_m = 128;
    int gemm_tile_n = 256;
    // Fraction of the BF16 dense peak reached by causal flash attention at long sequence.
    double attention_fwd_efficiency = 0.5;
    double attention_bwd_efficiency = 0.4;
    // The same for the Triton flash-attention kernel (llm-foundry's attn_impl: triton); 0 = not
    // given, then 0.65 x the fused kernel's (FlashAttention-2 paper, A100).
    double triton_attention_fwd_efficiency = 0.0;
    double triton_attention_bwd_efficiency = 0.0;
    // The same for FlashAttention-2 kernels (PyTorch SDPA's flash backend); 0 = not given, then
    // the fused kernel's (on GPUs where FlashAttention-2 is the fastest kernel, e.g. Ampere).
    double flash2_attention_fwd_efficiency = 0.0;
    double flash2_attention_bwd_efficiency = 0.0;
    // Fixed per-kernel cost (launch + tail), added to every kernel.
    Time kernel_overhead = Time::us(4);
    // Host time of one eager PyTorch op issued from Python (binding + dispatcher), for host loops
    // that issue one op per rank (list-API collectives). PyTorch operator micro-benchmark of a
    // view op (split, eager, CUDA): 3.3 us (pytorch/pytorch PR #32194).
    Time host_op_overhead = Time::us(3.3);

    // --- memory ---
    Bytes hbm_capacity;
    Bandwidth hbm_bandwidth;
    double hbm_efficiency = 0.8;  // achievable fraction of HBM bandwidth (STREAM-like)
    Bytes reserved_memory;        // CUDA context, NCCL buffers, allocator fragmentation

    // --- interconnect ---
    Bandwidth nvlink_bandwidth;   // per GPU, per direction; zero = no NVLink
    double nvlink_efficiency = 0.8;  // fraction NCCL reaches (busbw / link rate)
    bool nvls = false;            // NVLink SHARP on NVSwitch
    double nvls_efficiency = 0.0; // busbw / link rate with NVLS all-reduce
    Bandwidth pcie_bandwidth;     // host link per GPU, per direction
    double pcie_efficiency = 0.8;
    // GeForce cards: the driver refuses peer-to-peer DMA over PCIe (and GPUDirect RDMA), so NCCL
    // moves every intra-node byte not carried by NVLink through host memory (its SHM transport:
    // GPU -> PCIe -> host DRAM -> PCIe -> GPU) and stages network traffic in host buffers. The
    // topology then routes those transfers through the receiving socket's DRAM (needs
    // host_memory_bandwidth; docs/network.md "No peer-to-peer").
    bool pcie_p2p_disabled = false;
    Time intra_node_latency = Time::us(8);  // per collective step inside a node
    Time inter_node_latency = Time::us(20); // per collective step across nodes
    double nic_efficiency = 0.9;  // fraction of the NIC line rate reached by NCCL

    // --- overlap ---
    // Compute slowdown while communication kernels run concurrently (SM and HBM contention):
    // a compute kernel runs at 1/(1+x) speed while a collective is in flight on the same GPU.
    double comm_compute_slowdown = 0.1;

    // --- the typical node this GPU ships in (defaults for the cluster section and validation) ---
    int default_gpus_per_node = 8;
    // The typical node pairs its GPUs with NVLink bridges (0-1, 2-3, ...) rather than an NVSwitch:
    // the scenario's cluster.intra_node defaults to nvlink-bridge for this GPU (PCIe cards with an
    // NVLink bridge connector: RTX 3090, A100 PCIe).
    bool nvlink_bridge_pairs = false;
    int default_nics_per_node = 8;                      // e.g. DGX A100 / H100: one NIC per GPU
    Bandwidth default_nic_rate = Bandwidth(400e9 / 8);  // per NIC, per direction
    // The node's host side, for CPU offload (zero: not given): its memory, the peak bandwidth of
    // that memory (all sockets), and the fraction of it CPU Adam streams at.
    Bytes default_host_memory;
    Bandwidth host_memory_bandwidth;
    double cpu_adam_efficiency = 0;
    // Single-thread speed of the node's host CPU relative to the CPU the host costs were measured
    // on (model::host_costs: bench/host-bench, an AMD EPYC Zen 3 "Milan" core, 3.5 GHz boost). The
    // host timeline divides every launch and collective call by it: an older or slower-clocked host
    // issues the same Python, dispatcher and autograd work in proportionally more time. 1 = the
    // reference CPU (a profile that does not say).
    double host_cpu_speed = 1.0;

    // --- power (the optional `power:` section; all zero = not given, then energy is unknown) ---
    // Board power of one GPU while tensor-core kernels run (compute-busy), while only collectives
    // and memory-bound kernels run (comm-busy), and idle but allocated to the job (waiting in a
    // pipeline bubble or for its host); and what one node draws beyond its GPUs (CPUs, memory,
    // NICs, NVSwitches, fans, power-supply loss). Used by sim/src/run/energy.cpp.
    Power power_compute_busy;
    Power power_comm_busy;
    Power power_idle;
    Power power_node_overhead;
    [[nodiscard]] bool has_power() const { return power_compute_busy.value() > 0; }

    // --- calibrated tables (empty for datasheet profiles) ---
    // The largest relative error of the fits behind the compute tables (GEMM sweep, memory
    // curve, attention) and behind the collective curves, over their own samples; present (in
    // `sources`) only in profiles trainsim-calibrate fitted.
    double compute_fit_residual = 0;
    double comm_fit_residual = 0;
    SharedVector<GemmSample> gemm_table;
    std::map<Precision, AlphaBeta> memory_curve;
    SharedVector<CollectiveCurve> collectives;
    SharedVector<CollectiveSample> collective_times;
    // The datasheet figures the calibrated tables were measured on (`calibrated.measured_on`:
    // profile key -> the figure as written, e.g. "interconnect.nvlink_bandwidth" -> "300 GB/s"), a
    // fingerprint written by `trainsim-calibrate fit`. The reader drops the tables a changed figure
    // governs (a profile copied and edited by hand) with a warning naming the key: keys in
    // kMeasuredOnKeys (profile_io.hpp).
    std::map<std::string, std::string> measured_on;
    // Load warnings (file:line:col and key): said, not fatal (the scenario loader passes them on
    // with its own).
    std::vector<Diagnostic> warnings;

    // Where each value comes from, keyed by its path in the profile file ("memory.hbm_bandwidth",
    // "compute.dense_peak.fp8"; "calibrated" for the calibrated tables). Filled by load_profile;
    // write_profile refuses to write a value without one.
    SourceMap sources;
};

[[nodiscard]] std::string to_string(Precision p);
[[nodiscard]] std::string to_string(Provenance p);

} // namespace trainsim::model
