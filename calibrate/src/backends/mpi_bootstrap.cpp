#include "mpi_bootstrap.hpp"

#include "trainsim/calibrate/core/calibrate_error.hpp"
#include "trainsim/calibrate/measure/rendezvous.hpp"

#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <exception>
#include <map>
#include <stdexcept>
#include <thread>
#include <utility>

namespace trainsim::calibrate::detail {

namespace {

void check(int rc, const char* what) {
    if (rc == MPI_SUCCESS) return;
    char buf[MPI_MAX_ERROR_STRING] = {};
    int len = 0;
    MPI_Error_string(rc, buf, &len);
    throw std::runtime_error(fmt::format("{}: {}", what, std::string(buf, static_cast<std::size_t>(std::max(0, len)))));
}

int to_int(std::size_t n, const char* what) {
    if (n > static_cast<std::size_t>(INT_MAX))
        throw OpUnsupported(fmt::format("{}: {} elements exceed MPI's int counts", what, n));
    return static_cast<int>(n);
}

// This rank's part of one group's collectives, over fp32 buffers in the nccl-tests convention:
// out-of-place all-reduce, all-gather and reduce-scatter of `part` elements per rank, all-to-all,
// and send/recv as a ring shift (send right, receive from the left), as ThreadTeam does.
class MpiGroup : public CollectiveGroup {
public:
    MpiGroup(MPI_Comm comm, bool threads_ok) : comm_(comm), threads_ok_(threads_ok) {
        check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
        check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
    }
    ~MpiGroup() override {
        if (bg_.joinable()) {
            stop_ = true;
            bg_.join();
        }
    }
    MpiGroup(const MpiGroup&) = delete;
    MpiGroup& operator=(const MpiGroup&) = delete;

    void prepare(const std::string& op, std::size_t bytes) override {
        if (op != "all_reduce" && op != "all_gather" && op != "reduce_scatter" && op != "all_to_all" &&
            op != "send_recv")
            throw std::invalid_argument("MpiGroup: unknown collective '" + op + "'");
        op_ = op;
        const auto n = static_cast<std::size_t>(size_);
        const std::size_t part = std::max<std::size_t>(1, bytes / sizeof(float) / n);
        part_ = to_int(part, op.c_str());
        count_ = to_int(part * n, op.c_str());
        in_.assign(part * n, 0.0f);
        out_.assign(part * n, 0.0f);
        const auto r = static_cast<std::size_t>(rank_);
        for (std::size_t i = 0; i < in_.size(); ++i) in_[i] = 1e-3f * static_cast<float>((i * 7 + r) % 13);
    }

    void run() override {
        if (op_ == "all_reduce") {
            check(MPI_Allreduce(in_.data(), out_.data(), count_, MPI_FLOAT, MPI_SUM, comm_), "MPI_Allreduce");
        } else if (op_ == "all_gather") {
            check(MPI_Allgather(in_.data(), part_, MPI_FLOAT, out_.data(), part_, MPI_FLOAT, comm_), "MPI_Allgather");
        } else if (op_ == "reduce_scatter") {
            check(MPI_Reduce_scatter_block(in_.data(), out_.data(), part_, MPI_FLOAT, MPI_SUM, comm_),
                  "MPI_Reduce_scatter_block");
        } else if (op_ == "all_to_all") {
            check(MPI_Alltoall(in_.data(), part_, MPI_FLOAT, out_.data(), part_, MPI_FLOAT, comm_), "MPI_Alltoall");
        } else {
            const int right = (rank_ + 1) % size_, left = (rank_ + size_ - 1) % size_;
            check(MPI_Sendrecv(in_.data(), count_, MPI_FLOAT, right, 0, out_.data(), count_, MPI_FLOAT, left, 0, comm_,
                               MPI_STATUS_IGNORE),
                  "MPI_Sendrecv");
        }
    }

    // The op repeatedly on a thread of its own; after each call the group agrees (MPI_Allreduce
    // of the stop flags) whether to go on, so every rank runs the same number of calls.
    void start_background() override {
        if (!threads_ok_)
            throw OpUnsupported("the MPI library does not provide MPI_THREAD_SERIALIZED; the overlap measure needs "
                                "a background collective thread");
        stop_ = false;
        error_ = nullptr;
        bg_ = std::thread([this] {
            try {
                int any = 0;
                do {
                    run();
                    int mine = stop_.load() ? 1 : 0;
                    check(MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, comm_), "MPI_Allreduce (stop flag)");
                } while (any == 0);
            } catch (...) {
                error_ = std::current_exception();
            }
        });
    }
    void stop_background() override {
        stop_ = true;
        if (bg_.joinable()) bg_.join();
        if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    }

private:
    MPI_Comm comm_;
    bool threads_ok_;
    int rank_ = 0, size_ = 1, part_ = 0, count_ = 0;
    std::string op_;
    std::vector<float> in_, out_;
    std::thread bg_;
    std::atomic<bool> stop_{false};
    std::exception_ptr error_;
};

} // namespace

bool launched_by_mpi() {
    for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
        if (const char* s = std::getenv(v); s != nullptr && *s != '\0') return true;
    return false;
}

struct MpiSession::Impl {
    bool owns = false;        // this session initialised MPI
    bool threads_ok = false;  // MPI_THREAD_SERIALIZED or better
    int rank = 0, world = 1;
    int uncaught = 0;
    std::map<int, MPI_Comm> groups;  // ranks [0, size) -> communicator

    MPI_Comm comm(int size) {
        if (size < 1 || size > world || rank >= size)
            throw std::invalid_argument(fmt::format("MPI group of {} asked for on rank {} of {}", size, rank, world));
        auto it = groups.find(size);
        if (it != groups.end()) return it->second;
        MPI_Group all = MPI_GROUP_NULL, sub = MPI_GROUP_NULL;
        check(MPI_Comm_group(MPI_COMM_WORLD, &all), "MPI_Comm_group");
        int range[1][3] = {{0, size - 1, 1}};
        check(MPI_Group_range_incl(all, 1, range, &sub), "MPI_Group_range_incl");
        MPI_Comm c = MPI_COMM_NULL;
        // Collective over the group's members only: ranks outside it never call this.
        const int rc = MPI_Comm_create_group(MPI_COMM_WORLD, sub, size, &c);
        MPI_Group_free(&sub);
        MPI_Group_free(&all);
        check(rc, "MPI_Comm_create_group");
        groups.emplace(size, c);
        return c;
    }
};

MpiSession::MpiSession() : impl_(std::make_unique<Impl>()) {
    impl_->uncaught = std::uncaught_exceptions();
    int initialized = 0;
    MPI_Initialized(&initialized);
    int provided = MPI_THREAD_SINGLE;
    if (initialized == 0) {
        check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
        impl_->owns = true;
    } else {
        MPI_Query_thread(&provided);
    }
    impl_->threads_ok = provided >= MPI_THREAD_SERIALIZED;
    // Errors come back as codes (turned into exceptions), not as an abort of the whole job.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    check(MPI_Comm_rank(MPI_COMM_WORLD, &impl_->rank), "MPI_Comm_rank");
    check(MPI_Comm_size(MPI_COMM_WORLD, &impl_->world), "MPI_Comm_size");
}

MpiSession::~MpiSession() {
    if (!impl_->owns) return;
    if (std::uncaught_exceptions() > impl_->uncaught) return;  // see the header
    for (auto& [size, c] : impl_->groups)
        if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
    MPI_Finalize();
}

int MpiSession::rank() const { return impl_->rank; }
int MpiSession::world() const { return impl_->world; }

std::vector<std::string> MpiSession::hosts() const {
    constexpr int kLen = 256;
    std::string mine = host_name();
    mine.resize(kLen - 1);
    std::vector<char> all(static_cast<std::size_t>(kLen) * static_cast<std::size_t>(impl_->world), '\0');
    std::vector<char> buf(kLen, '\0');
    std::copy(mine.begin(), mine.end(), buf.begin());
    check(MPI_Allgather(buf.data(), kLen, MPI_CHAR, all.data(), kLen, MPI_CHAR, MPI_COMM_WORLD), "MPI_Allgather");
    std::vector<std::string> hosts;
    for (int r = 0; r < impl_->world; ++r) hosts.emplace_back(all.data() + static_cast<std::ptrdiff_t>(r) * kLen);
    return hosts;
}

std::string MpiSession::broadcast(const std::string& value) const {
    unsigned long long n = impl_->rank == 0 ? value.size() : 0;
    check(MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD), "MPI_Bcast");
    std::string out = impl_->rank == 0 ? value : std::string(static_cast<std::size_t>(n), '\0');
    if (n > 0) check(MPI_Bcast(out.data(), to_int(out.size(), "broadcast"), MPI_CHAR, 0, MPI_COMM_WORLD), "MPI_Bcast");
    return out;
}

void MpiSession::barrier() const { check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

void MpiSession::max_over_group(int size, std::vector<double>& times) {
    check(MPI_Allreduce(MPI_IN_PLACE, times.data(), to_int(times.size(), "times"), MPI_DOUBLE, MPI_MAX,
                        impl_->comm(size)),
          "MPI_Allreduce (times)");
}

std::unique_ptr<CollectiveGroup> MpiSession::group(int size) {
    return std::make_unique<MpiGroup>(impl_->comm(size), impl_->threads_ok);
}

std::string MpiSession::library() const {
    char buf[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int len = 0;
    MPI_Get_library_version(buf, &len);
    std::string s(buf, static_cast<std::size_t>(std::max(0, len)));
    if (const auto nl = s.find_first_of("\r\n"); nl != std::string::npos) s.resize(nl);
    if (const auto comma = s.find(','); comma != std::string::npos) s.resize(comma);
    return s;
}

ProcessRanks MpiSession::process_ranks() {
    ProcessRanks p;
    p.rank = rank();
    p.world = world();
    p.hosts = hosts();
    p.description = fmt::format("MPI processes ({}), {} ranks: MPI_Allreduce / MPI_Allgather / "
                                "MPI_Reduce_scatter_block / MPI_Alltoall / MPI_Sendrecv",
                                library(), world());
    p.make_group = [this](int size) { return group(size); };
    p.max_over_group = [this](int size, std::vector<double>& times) { max_over_group(size, times); };
    return p;
}

} // namespace trainsim::calibrate::detail
