#include "trainsim/kernels/nccl_comm.hpp"

#include "nccl_impl.hpp"
#include "wait_loop.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

namespace trainsim::kernels {

static_assert(sizeof(ncclUniqueId) == std::tuple_size_v<NcclId>, "NcclId must hold an ncclUniqueId");

const char* to_string(CollectiveKind k) {
    switch (k) {
    case CollectiveKind::all_reduce: return "all_reduce";
    case CollectiveKind::all_gather: return "all_gather";
    case CollectiveKind::reduce_scatter: return "reduce_scatter";
    case CollectiveKind::all_to_all: return "all_to_all";
    case CollectiveKind::send_recv: return "send_recv";
    }
    return "?";
}

NcclId make_nccl_id() {
    ncclUniqueId id{};
    TS_NCCL(detail::nccl().GetUniqueId(&id), "nccl bootstrap (rank 0)");
    NcclId out{};
    std::memcpy(out.data(), &id, sizeof(id));
    return out;
}

NcclComm::NcclComm(GpuDevice& device, std::unique_ptr<Impl> impl) : device_(device), impl_(std::move(impl)) {}

NcclComm::NcclComm(GpuDevice& device, const NcclId& id, int nranks, int rank)
    : device_(device), impl_(std::make_unique<Impl>()) {
    impl_->dev = &device.impl();
    impl_->rank = rank;
    impl_->size = nranks;
    ncclUniqueId uid{};
    std::memcpy(&uid, id.data(), sizeof(uid));
    const std::string ctx = "nccl init rank " + std::to_string(rank) + " of " + std::to_string(nranks);
    TS_CUDA(cudaSetDevice(device.info().ordinal), ctx);
    ncclConfig_t config = detail::nonblocking_config();
    const ncclResult_t r = detail::nccl().CommInitRankConfig(&impl_->comm, nranks, uid, rank, &config);
    // Every rank must join: one that never starts or cannot reach the others would otherwise
    // hang this one inside ncclCommInitRank for ever.
    detail::settle(impl_->comm, r, "ncclCommInitRankConfig", ctx + " (waiting for every rank to join)",
                   device.impl().wait_timeout_s);
    impl_->watch();
}

NcclComm::~NcclComm() = default;

int NcclComm::rank() const { return impl_->rank; }
int NcclComm::size() const { return impl_->size; }

std::unique_ptr<NcclComm> NcclComm::split(int color, int key) {
    const std::string ctx = "nccl split color " + std::to_string(color) + " of rank " + std::to_string(impl_->rank);
    ncclComm_t sub = nullptr;
    ncclConfig_t config = detail::nonblocking_config();
    const ncclResult_t r =
        detail::nccl().CommSplit(impl_->comm, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &sub, &config);
    // A nonblocking split runs as a job of the parent, which stays ncclInProgress until it ends
    // and writes *newcomm last (NCCL src/init.cc, ncclCommInitChildComm): poll the parent, and
    // only then read `sub` (and settle it too).
    detail::settle(impl_->comm, r, "ncclCommSplit", ctx, impl_->dev->wait_timeout_s);
    if (sub == nullptr) return nullptr;
    detail::settle(sub, ncclInProgress, "ncclCommSplit", ctx, impl_->dev->wait_timeout_s);
    auto impl = std::make_unique<Impl>();
    impl->comm = sub;
    impl->dev = impl_->dev;
    impl->watch();
    TS_NCCL(detail::nccl().CommUserRank(sub, &impl->rank), ctx, sub);
    TS_NCCL(detail::nccl().CommCount(sub, &impl->size), ctx, sub);
    return std::unique_ptr<NcclComm>(new NcclComm(device_, std::move(impl)));
}

void NcclComm::max_over_ranks(std::vector<double>& values) {
    if (values.empty() || impl_->size == 1) return;
    auto& I = *impl_;
    const std::string ctx = "max over " + std::to_string(I.size) + " ranks of " + std::to_string(values.size()) + " times";
    if (I.values_n < values.size()) {
        if (I.values != nullptr) TS_CUDA(cudaFree(I.values), ctx);
        I.values = nullptr;
        TS_CUDA(cudaMalloc(reinterpret_cast<void**>(&I.values), values.size() * sizeof(double)), ctx);
        I.values_n = values.size();
    }
    cudaStream_t st = I.dev->stream;
    TS_CUDA(cudaMemcpyAsync(I.values, values.data(), values.size() * sizeof(double), cudaMemcpyHostToDevice, st), ctx);
    detail::settle(I.comm, detail::nccl().AllReduce(I.values, I.values, values.size(), ncclFloat64, ncclMax, I.comm, st),
                   "ncclAllReduce", ctx, I.dev->wait_timeout_s);
    TS_CUDA(cudaMemcpyAsync(values.data(), I.values, values.size() * sizeof(double), cudaMemcpyDeviceToHost, st), ctx);
    I.dev->wait(st, nullptr, ctx);
}

// ---------------------------------------------------------------------------------------------

std::size_t Collective::bytes_needed(CollectiveKind, std::size_t bytes, int) {
    // Send and receive buffers of `bytes` each cover every op in the nccl-tests convention
    // (all_gather sends bytes/n, reduce_scatter receives bytes/n).
    return 2 * bytes;
}

Collective::Collective(GpuDevice& device, NcclComm& comm, CollectiveKind kind, std::size_t bytes)
    : impl_(std::make_unique<Impl>()) {
    auto& I = *impl_;
    I.kind = kind;
    I.bytes = bytes;
    I.comm = &comm.impl();
    I.dev = &device.impl();
    I.context = std::string(to_string(kind)) + " " + std::to_string(bytes) + " B over " + std::to_string(comm.size()) +
                " ranks";
    const auto n = static_cast<std::size_t>(comm.size());
    if (bytes == 0 || bytes % (2 * n) != 0)
        throw KernelUnsupported("nccl collective", I.context, "size must be a positive multiple of 2 x ranks bytes (bf16 elements)");
    I.dev->check_memory(bytes_needed(kind, bytes, comm.size()), I.context);
    I.send = I.dev->scratch("coll.send", bytes, DType::bf16, I.context);
    I.recv = I.dev->scratch("coll.recv", bytes, DType::bf16, I.context);
}

Collective::~Collective() = default;

void Collective::run() { detail::run_collective(*impl_, impl_->dev->stream); }

namespace detail {

ncclConfig_t nonblocking_config() {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    return config;
}

namespace {
// Polls ncclCommGetAsyncError until the communicator's state leaves ncclInProgress (true; the
// state in `state`) or `timeout_s` pass (false). A failing query reads as ncclInternalError.
bool poll_state(ncclComm_t comm, double timeout_s, ncclResult_t& state) {
    auto ready = [&] {
        if (nccl().CommGetAsyncError(comm, &state) != ncclSuccess) state = ncclInternalError;
        return state != ncclInProgress;
    };
    auto no_error = []() -> std::optional<std::string> { return std::nullopt; };  // the state says it
    return wait_until(ready, no_error, timeout_s) == WaitEnd::done;
}
} // namespace

void settle(ncclComm_t& comm, ncclResult_t r, std::string_view expr, const std::string& what, double timeout_s) {
    check_nccl(r, expr, what, comm);
    if (r == ncclSuccess || comm == nullptr) return;
    ncclResult_t state = ncclInProgress;
    const bool done = poll_state(comm, timeout_s, state);
    if (done && state == ncclSuccess) return;
    try {
        if (done) check_nccl(state, expr, what, comm);  // throws: an error, with NCCL's last message
    } catch (...) {
        nccl().CommAbort(comm);
        comm = nullptr;
        throw;
    }
    nccl().CommAbort(comm);
    comm = nullptr;
    throw KernelTimeout(call_name(expr), what,
                        "still in progress after " + std::to_string(static_cast<long>(timeout_s)) +
                            " s (--gpu-timeout): a rank did not start, died, or cannot reach the others (check "
                            "NCCL_SOCKET_IFNAME and that every rank runs); the communicator was aborted");
}

bool finalize(ncclComm_t comm, double timeout_s) noexcept {
    try {
        ncclResult_t state = nccl().CommFinalize(comm);
        if (state == ncclInProgress && !poll_state(comm, timeout_s, state)) return false;
        return state == ncclSuccess;
    } catch (...) {
        return false;
    }
}

void run_collective(Collective::Impl& I, cudaStream_t st) {
    ncclComm_t& c = I.comm->comm;
    const double timeout_s = I.dev->wait_timeout_s;
    const int n = I.comm->size, r = I.comm->rank;
    const std::size_t count = I.bytes / 2;  // bf16 elements in the nccl-tests "size"
    const std::size_t part = count / static_cast<std::size_t>(n);
    auto* send = static_cast<char*>(I.send);
    auto* recv = static_cast<char*>(I.recv);
    switch (I.kind) {
    case CollectiveKind::all_reduce:
        settle(c, nccl().AllReduce(send, recv, count, ncclBfloat16, ncclSum, c, st), "ncclAllReduce", I.context,
               timeout_s);
        break;
    case CollectiveKind::all_gather:
        settle(c, nccl().AllGather(send, recv, part, ncclBfloat16, c, st), "ncclAllGather", I.context, timeout_s);
        break;
    case CollectiveKind::reduce_scatter:
        settle(c, nccl().ReduceScatter(send, recv, part, ncclBfloat16, ncclSum, c, st), "ncclReduceScatter", I.context,
               timeout_s);
        break;
    case CollectiveKind::all_to_all:
        // NCCL has no all-to-all primitive: grouped point-to-point, as nccl-tests alltoall_perf.
        TS_NCCL(detail::nccl().GroupStart(), I.context, c);
        for (int p = 0; p < n; ++p) {
            const std::size_t off = static_cast<std::size_t>(p) * part * 2;
            TS_NCCL(detail::nccl().Send(send + off, part, ncclBfloat16, p, c, st), I.context, c);
            TS_NCCL(detail::nccl().Recv(recv + off, part, ncclBfloat16, p, c, st), I.context, c);
        }
        settle(c, nccl().GroupEnd(), "ncclGroupEnd", I.context, timeout_s);
        break;
    case CollectiveKind::send_recv:
        TS_NCCL(detail::nccl().GroupStart(), I.context, c);
        TS_NCCL(detail::nccl().Send(send, count, ncclBfloat16, (r + 1) % n, c, st), I.context, c);
        TS_NCCL(detail::nccl().Recv(recv, count, ncclBfloat16, (r + n - 1) % n, c, st), I.context, c);
        settle(c, nccl().GroupEnd(), "ncclGroupEnd", I.context, timeout_s);
        break;
    }
}

} // namespace detail

} // namespace trainsim::kernels
