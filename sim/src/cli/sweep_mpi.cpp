// `trainsim sweep` over MPI ranks (sweep_mpi.hpp). Only MPI's C API; every wait polls with a
// short sleep instead of spinning in a blocking call (Open MPI's blocking calls busy-poll, and a
// waiting rank would take a core from the searches on its node).
#include "sweep_mpi.hpp"

#include "trainsim/model/core/errors.hpp"

#include <fmt/format.h>

#ifdef TRAINSIM_HAVE_MPI
#include <mpi.h>
#endif

#include <algorithm>
#include <charconv>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

namespace trainsim::sim::cli {

namespace {

int positive_int(const char* s) {
    if (s == nullptr || *s == '\0') return 0;
    int n = 0;
    const auto end = s + std::strlen(s);
    const auto [p, ec] = std::from_chars(s, end, n);
    return ec == std::errc() && p == end && n > 0 ? n : 0;
}

} // namespace

bool sweep_built_with_mpi() {
#ifdef TRAINSIM_HAVE_MPI
    return true;
#else
    return false;
#endif
}

bool launched_by_mpi(const std::function<const char*(const char*)>& env) {
    for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
        const char* s = env(v);
        if (s != nullptr && *s != '\0') return true;
    }
    return false;
}

int launcher_world_size(const std::function<const char*(const char*)>& env) {
    for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
        if (const int n = positive_int(env(v)); n > 0) return n;
    return 1;
}

#ifdef TRAINSIM_HAVE_MPI

namespace {

enum Tag : int { kRequest = 1, kResult = 2, kError = 3, kTask = 4, kStop = 5 };

// A task runs for milliseconds at least: a 200 us sleep between polls costs nothing measurable
// and leaves the core to the searches.
constexpr auto kPollSleep = std::chrono::microseconds(200);
constexpr int kSpinsBeforeSleep = 64;

void check(int rc, const char* what) {
    if (rc == MPI_SUCCESS) return;
    char buf[MPI_MAX_ERROR_STRING] = {};
    int len = 0;
    MPI_Error_string(rc, buf, &len);
    throw std::runtime_error(fmt::format("{}: {}", what, std::string(buf, static_cast<std::size_t>(std::max(0, len)))));
}

void wait(MPI_Request& req) {
    for (int spins = 0;; ++spins) {
        int done = 0;
        check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test");
        if (done != 0) return;
        if (spins >= kSpinsBeforeSleep) std::this_thread::sleep_for(kPollSleep);
    }
}

int to_count(std::size_t n) {
    if (n > static_cast<std::size_t>(INT_MAX))
        throw std::runtime_error(fmt::format("a sweep message of {} bytes exceeds MPI's int counts", n));
    return static_cast<int>(n);
}

struct Message {
    int source = 0;
    int tag = 0;
    std::string bytes;
};

std::optional<Message> try_receive(int source) {
    int flag = 0;
    MPI_Status st;
    check(MPI_Iprobe(source, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st), "MPI_Iprobe");
    if (flag == 0) return std::nullopt;
    int count = 0;
    check(MPI_Get_count(&st, MPI_BYTE, &count), "MPI_Get_count");
    Message m{st.MPI_SOURCE, st.MPI_TAG, std::string(static_cast<std::size_t>(count), '\0')};
    check(MPI_Recv(m.bytes.data(), count, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
          "MPI_Recv");
    return m;
}

Message receive(int source) {
    for (int spins = 0;; ++spins) {
        if (auto m = try_receive(source)) return std::move(*m);
        if (spins >= kSpinsBeforeSleep) std::this_thread::sleep_for(kPollSleep);
    }
}

void send(int dest, int tag, const std::string& bytes) {
    MPI_Request req;
    check(MPI_Isend(bytes.data(), to_count(bytes.size()), MPI_BYTE, dest, tag, MPI_COMM_WORLD, &req), "MPI_Isend");
    wait(req);
}

// Messages: 8-byte counts in the machine's byte order (every rank runs the same binary on the same
// kind of machine), then the bytes.
void put_u64(std::string& out, std::uint64_t v) {
    char b[8];
    std::memcpy(b, &v, 8);
    out.append(b, 8);
}
std::uint64_t get_u64(const std::string& in, std::size_t& pos) {
    if (pos + 8 > in.size()) throw std::runtime_error("a sweep message from another rank is cut short");
    std::uint64_t v = 0;
    std::memcpy(&v, in.data() + pos, 8);
    pos += 8;
    return v;
}
std::string get_bytes(const std::string& in, std::size_t& pos) {
    const std::uint64_t n = get_u64(in, pos);
    if (n > in.size() - pos) throw std::runtime_error("a sweep message from another rank is cut short");
    std::string s = in.substr(pos, static_cast<std::size_t>(n));
    pos += static_cast<std::size_t>(n);
    return s;
}
void put_bytes(std::string& out, const std::string& s) {
    put_u64(out, s.size());
    out += s;
}

std::string encode_rows(std::size_t task, const SweepTaskRows& rows) {
    std::string out;
    put_u64(out, task);
    put_u64(out, rows.size());
    for (const auto& r : rows) put_bytes(out, r);
    return out;
}

std::pair<std::size_t, SweepTaskRows> decode_rows(const std::string& in) {
    std::size_t pos = 0;
    const auto task = static_cast<std::size_t>(get_u64(in, pos));
    const auto n = static_cast<std::size_t>(get_u64(in, pos));
    if (n > in.size()) throw std::runtime_error("a sweep message from another rank is malformed");
    SweepTaskRows rows;
    rows.reserve(n);
    for (std::size_t i = 0; i < n; ++i) rows.push_back(get_bytes(in, pos));
    return {task, std::move(rows)};
}

} // namespace

struct SweepWorld::Impl {
    int rank = 0;
    int size = 1;
    int local = 1;
    std::string host;
    bool owns = false; // this object initialised MPI (and so finalises it)
};

SweepWorld::SweepWorld() : impl_(std::make_unique<Impl>()) {
    int initialised = 0;
    check(MPI_Initialized(&initialised), "MPI_Initialized");
    if (initialised == 0) {
        int provided = 0;
        // FUNNELED: rank 0 runs searches on a second thread, which never calls MPI.
        check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
        impl_->owns = true;
    }
    check(MPI_Comm_rank(MPI_COMM_WORLD, &impl_->rank), "MPI_Comm_rank");
    check(MPI_Comm_size(MPI_COMM_WORLD, &impl_->size), "MPI_Comm_size");
    MPI_Comm node = MPI_COMM_NULL;
    check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
    check(MPI_Comm_size(node, &impl_->local), "MPI_Comm_size");
    MPI_Comm_free(&node);
    char name[MPI_MAX_PROCESSOR_NAME] = {};
    int len = 0;
    if (MPI_Get_processor_name(name, &len) == MPI_SUCCESS)
        impl_->host.assign(name, static_cast<std::size_t>(std::max(0, len)));
}

SweepWorld::~SweepWorld() {
    if (abandoned_ || !impl_->owns) return;
    // Every rank reaches here once the sweep is over; a rank that finished early waits in the
    // barrier without spinning, then all finalise together.
    MPI_Request req;
    if (MPI_Ibarrier(MPI_COMM_WORLD, &req) != MPI_SUCCESS) return;
    try {
        wait(req);
    } catch (...) {
        return;
    }
    MPI_Finalize();
}

int SweepWorld::rank() const {
    return impl_->rank;
}
int SweepWorld::size() const {
    return impl_->size;
}
int SweepWorld::local_size() const {
    return impl_->local;
}
std::string SweepWorld::host() const {
    return impl_->host;
}

std::string SweepWorld::broadcast(const std::string& value) const {
    std::uint64_t n = value.size();
    MPI_Request req;
    check(MPI_Ibcast(&n, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD, &req), "MPI_Ibcast");
    wait(req);
    std::string out = impl_->rank == 0 ? value : std::string(static_cast<std::size_t>(n), '\0');
    check(MPI_Ibcast(out.data(), to_count(out.size()), MPI_CHAR, 0, MPI_COMM_WORLD, &req), "MPI_Ibcast");
    wait(req);
    return out;
}

void SweepWorld::run_root(const Root& r) {
    std::mutex mu;
    std::map<std::size_t, SweepTaskRows> ready; // finished tasks not yet delivered
    std::size_t first_unwritten = 0;
    bool stop = false;
    std::exception_ptr local_error;
    auto take = [&]() -> std::optional<std::size_t> {
        std::lock_guard lock(mu);
        if (stop) return std::nullopt;
        const std::size_t t = r.order(first_unwritten);
        return t < r.count ? std::optional<std::size_t>(t) : std::nullopt;
    };
    std::thread local([&] {
        try {
            while (const auto t = take()) {
                auto rows = r.compute(*t);
                std::lock_guard lock(mu);
                ready.emplace(*t, std::move(rows));
            }
        } catch (...) {
            std::lock_guard lock(mu);
            local_error = std::current_exception();
        }
    });
    // On any exit, the local thread takes no further task and is joined (after the task it runs).
    struct Joiner {
        std::thread& t;
        std::mutex& m;
        bool& stop;
        ~Joiner() {
            {
                std::lock_guard lock(m);
                stop = true;
            }
            t.join();
        }
    } joiner{local, mu, stop};
    try {
        int active = impl_->size - 1; // ranks not yet told to stop
        while (true) {
            bool busy = false;
            for (;;) {
                SweepTaskRows rows;
                std::size_t t = 0;
                {
                    std::lock_guard lock(mu);
                    if (local_error) std::rethrow_exception(local_error);
                    const auto it = ready.find(first_unwritten);
                    if (it == ready.end()) break;
                    t = it->first;
                    rows = std::move(it->second);
                    ready.erase(it);
                }
                r.deliver(t, std::move(rows));
                std::lock_guard lock(mu);
                ++first_unwritten;
                busy = true;
            }
            if (active == 0) {
                std::lock_guard lock(mu);
                if (first_unwritten >= r.count) break;
            }
            if (auto m = try_receive(MPI_ANY_SOURCE)) {
                busy = true;
                if (m->tag == kError) {
                    std::size_t pos = 0;
                    SweepRankFailure f;
                    f.rank = m->source;
                    f.input = get_u64(m->bytes, pos) != 0;
                    f.host = get_bytes(m->bytes, pos);
                    f.message = get_bytes(m->bytes, pos);
                    throw SweepRankFailed(std::move(f));
                }
                if (m->tag == kResult) {
                    auto [task, rows] = decode_rows(m->bytes);
                    std::lock_guard lock(mu);
                    ready.emplace(task, std::move(rows));
                } else if (m->tag != kRequest) {
                    throw std::runtime_error(fmt::format("rank {} sent an unknown sweep message ({})", m->source, m->tag));
                }
                if (const auto t = take()) {
                    std::string b;
                    put_u64(b, *t);
                    send(m->source, kTask, b);
                } else {
                    send(m->source, kStop, std::string());
                    --active;
                }
            }
            if (!busy) std::this_thread::sleep_for(kPollSleep);
        }
    } catch (...) {
        abandon();
        throw;
    }
}

void SweepWorld::run_worker(const std::function<SweepTaskRows(std::size_t)>& compute) {
    send(0, kRequest, std::string());
    for (;;) {
        const Message m = receive(0);
        if (m.tag == kStop) return;
        if (m.tag != kTask) throw std::runtime_error(fmt::format("rank 0 sent an unknown sweep message ({})", m.tag));
        std::size_t pos = 0;
        const auto task = static_cast<std::size_t>(get_u64(m.bytes, pos));
        SweepTaskRows rows;
        try {
            rows = compute(task);
        } catch (const model::InputError& e) {
            fail_worker({impl_->rank, impl_->host, true, e.what()});
        } catch (const std::exception& e) {
            fail_worker({impl_->rank, impl_->host, false, e.what()});
        }
        send(0, kResult, encode_rows(task, rows));
    }
}

void SweepWorld::fail_worker(const SweepRankFailure& why) {
    std::string b;
    put_u64(b, why.input ? 1 : 0);
    put_bytes(b, why.host);
    put_bytes(b, why.message);
    send(0, kError, b);
    abandon();
    // Rank 0 reports the failure and exits; the launcher then ends this rank.
    for (;;) std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

#else // !TRAINSIM_HAVE_MPI

struct SweepWorld::Impl {};

SweepWorld::SweepWorld() {
    throw std::runtime_error("this trainsim was built without MPI");
}
SweepWorld::~SweepWorld() = default;
int SweepWorld::rank() const {
    return 0;
}
int SweepWorld::size() const {
    return 1;
}
int SweepWorld::local_size() const {
    return 1;
}
std::string SweepWorld::host() const {
    return {};
}
std::string SweepWorld::broadcast(const std::string& value) const {
    return value;
}
void SweepWorld::run_root(const Root&) {
    throw std::runtime_error("this trainsim was built without MPI");
}
void SweepWorld::run_worker(const std::function<SweepTaskRows(std::size_t)>&) {
    throw std::runtime_error("this trainsim was built without MPI");
}
void SweepWorld::fail_worker(const SweepRankFailure&) {
    throw std::runtime_error("this trainsim was built without MPI");
}

#endif

} // namespace trainsim::sim::cli
