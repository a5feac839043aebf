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
#include <condition_variable>
#include <deque>
#include <climits>
#include <cstdint>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

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

namespace {

// Tasks on `n` threads: pushed by the calling thread, their rows collected by it.
class Pool {
public:
    Pool(unsigned n, const std::function<SweepTaskRows(std::size_t)>& compute) : compute_(compute) {
        for (unsigned i = 0; i < n; ++i) threads_.emplace_back([this] { loop(); });
    }
    // Joins the threads after the tasks they run (queued ones are dropped).
    ~Pool() {
        {
            std::lock_guard lock(mu_);
            stop_ = true;
        }
        work_.notify_all();
        for (auto& t : threads_) t.join();
    }
    Pool(const Pool&) = delete;
    Pool& operator=(const Pool&) = delete;

    void push(std::size_t task) {
        {
            std::lock_guard lock(mu_);
            queue_.push_back(task);
        }
        work_.notify_one();
    }
    // The tasks finished since the last call; a thread's exception is rethrown here.
    std::vector<std::pair<std::size_t, SweepTaskRows>> take_done() {
        std::lock_guard lock(mu_);
        if (error_) std::rethrow_exception(error_);
        return std::exchange(done_, {});
    }
    // Until a task is done (or failed), at most `d`.
    void wait_done(std::chrono::microseconds d) {
        std::unique_lock lock(mu_);
        done_cv_.wait_for(lock, d, [&] { return !done_.empty() || error_; });
    }

private:
    void loop() {
        for (;;) {
            std::size_t t = 0;
            {
                std::unique_lock lock(mu_);
                work_.wait(lock, [&] { return stop_ || !queue_.empty(); });
                if (stop_) return;
                t = queue_.front();
                queue_.pop_front();
            }
            try {
                auto rows = compute_(t);
                std::lock_guard lock(mu_);
                done_.emplace_back(t, std::move(rows));
            } catch (...) {
                std::lock_guard lock(mu_);
                if (!error_) error_ = std::current_exception();
            }
            done_cv_.notify_all();
        }
    }

    const std::function<SweepTaskRows(std::size_t)>& compute_;
    std::mutex mu_;
    std::condition_variable work_, done_cv_;
    std::deque<std::size_t> queue_;
    std::vector<std::pair<std::size_t, SweepTaskRows>> done_;
    std::exception_ptr error_;
    bool stop_ = false;
    std::vector<std::thread> threads_;
};

// What rank 0 (or a single process) keeps between starting tasks and writing them: the finished
// tasks that wait for an earlier one, and the first task not yet delivered.
struct InOrder {
    const SweepTasks& t;
    std::map<std::size_t, SweepTaskRows> ready;
    std::size_t first_undelivered = 0;
    std::size_t next() const { return t.order(first_undelivered); }
    // Delivers what is ready in order; returns whether it delivered any.
    bool deliver() {
        bool any = false;
        for (auto it = ready.find(first_undelivered); it != ready.end(); it = ready.find(first_undelivered)) {
            auto rows = std::move(it->second);
            ready.erase(it);
            t.deliver(first_undelivered, std::move(rows));
            ++first_undelivered;
            any = true;
        }
        return any;
    }
    bool done() const { return first_undelivered >= t.count; }
};

} // namespace

void run_sweep_tasks(const SweepTasks& t, unsigned workers) {
    workers = std::max(1U, workers);
    InOrder io{t, {}, 0};
    Pool pool(workers, t.compute);
    unsigned running = 0;
    while (!io.done()) {
        while (running < workers) {
            const std::size_t task = io.next();
            if (task >= t.count) break;
            pool.push(task);
            ++running;
        }
        pool.wait_done(std::chrono::milliseconds(100));
        for (auto& [task, rows] : pool.take_done()) {
            io.ready.emplace(task, std::move(rows));
            --running;
        }
        io.deliver();
    }
}

#ifdef TRAINSIM_HAVE_MPI

namespace {

enum Tag : int { kRequest = 1, kResult = 2, kError = 3, kTask = 4, kStop = 5 };

// A task finishes in milliseconds at the least: waiting 200 us between polls costs nothing
// measurable and leaves the cores to the searches.
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

void SweepWorld::run_root(const SweepTasks& t, unsigned workers) {
    workers = std::max(1U, workers);
    try {
        InOrder io{t, {}, 0};
        Pool pool(workers, t.compute);
        unsigned running = 0;
        int unheard = impl_->size - 1; // ranks whose first request has not come yet
        std::size_t remote = 0;        // threads of other ranks not yet told to stop
        // A task for a thread of `rank`, or stop.
        auto answer = [&](int dest) {
            const std::size_t task = io.next();
            if (task < t.count) {
                std::string b;
                put_u64(b, task);
                send(dest, kTask, b);
            } else {
                send(dest, kStop, std::string());
                --remote;
            }
        };
        while (true) {
            while (running < workers) {
                const std::size_t task = io.next();
                if (task >= t.count) break;
                pool.push(task);
                ++running;
            }
            bool busy = false;
            for (auto& [task, rows] : pool.take_done()) {
                io.ready.emplace(task, std::move(rows));
                --running;
                busy = true;
            }
            busy = io.deliver() || busy;
            if (io.done() && unheard == 0 && remote == 0) break;
            if (auto m = try_receive(MPI_ANY_SOURCE)) {
                busy = true;
                std::size_t pos = 0;
                if (m->tag == kError) {
                    SweepRankFailure f;
                    f.rank = m->source;
                    f.input = get_u64(m->bytes, pos) != 0;
                    f.host = get_bytes(m->bytes, pos);
                    f.message = get_bytes(m->bytes, pos);
                    throw SweepRankFailed(std::move(f));
                }
                if (m->tag == kRequest) {
                    const auto threads = static_cast<std::size_t>(get_u64(m->bytes, pos));
                    --unheard;
                    remote += threads;
                    for (std::size_t i = 0; i < threads; ++i) answer(m->source);
                } else if (m->tag == kResult) {
                    auto [task, rows] = decode_rows(m->bytes);
                    io.ready.emplace(task, std::move(rows));
                    answer(m->source);
                } else {
                    throw std::runtime_error(fmt::format("rank {} sent an unknown sweep message ({})", m->source, m->tag));
                }
            }
            if (!busy) pool.wait_done(kPollSleep);
        }
    } catch (...) {
        abandon();
        throw;
    }
}

void SweepWorld::run_worker(const std::function<SweepTaskRows(std::size_t)>& compute, unsigned workers) {
    workers = std::max(1U, workers);
    try {
        Pool pool(workers, compute);
        std::string hello;
        put_u64(hello, workers);
        send(0, kRequest, hello);
        unsigned stops = 0, running = 0;
        while (stops < workers || running > 0) {
            bool busy = false;
            for (const auto& [task, rows] : pool.take_done()) {
                send(0, kResult, encode_rows(task, rows));
                --running;
                busy = true;
            }
            if (auto m = try_receive(0)) {
                busy = true;
                if (m->tag == kStop) {
                    ++stops;
                } else if (m->tag == kTask) {
                    std::size_t pos = 0;
                    pool.push(static_cast<std::size_t>(get_u64(m->bytes, pos)));
                    ++running;
                } else {
                    throw std::runtime_error(fmt::format("rank 0 sent an unknown sweep message ({})", m->tag));
                }
            }
            if (!busy) pool.wait_done(kPollSleep);
        }
    } catch (const model::InputError& e) {
        fail_worker({impl_->rank, impl_->host, true, e.what()});
    } catch (const std::exception& e) {
        fail_worker({impl_->rank, impl_->host, false, e.what()});
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
void SweepWorld::run_root(const SweepTasks&, unsigned) {
    throw std::runtime_error("this trainsim was built without MPI");
}
void SweepWorld::run_worker(const std::function<SweepTaskRows(std::size_t)>&, unsigned) {
    throw std::runtime_error("this trainsim was built without MPI");
}
void SweepWorld::fail_worker(const SweepRankFailure&) {
    throw std::runtime_error("this trainsim was built without MPI");
}

#endif

} // namespace trainsim::sim::cli
