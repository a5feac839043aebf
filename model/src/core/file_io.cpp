#include "trainsim/model/core/file_io.hpp"

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <mutex>
#include <ostream>
#include <streambuf>
#include <string>
#include <system_error>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace trainsim::model {

namespace fs = std::filesystem;

namespace {

// "a FIFO" ... for a stat mode that is not a regular file; empty for a regular one.
std::string kind_of(mode_t mode) {
    if (S_ISREG(mode)) return {};
    if (S_ISDIR(mode)) return "a folder";
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

// Why a path of this kind is no input, said after "'PATH' is KIND, not a regular file".
std::string kind_hint(mode_t mode) {
    if (S_ISFIFO(mode) || S_ISSOCK(mode)) return ": reading it would wait for a writer; save the data to a file";
    if (S_ISCHR(mode) || S_ISBLK(mode)) return " (a device such as /dev/zero may never end)";
    return {};
}

[[noreturn]] void refuse_read(const fs::path& file, const std::string& reason) {
    throw FileReadError(fmt::format("'{}' {}", file.string(), reason), reason);
}

[[noreturn]] void cannot_open(const fs::path& file, int err) {
    const std::string why = err == ENOENT ? std::string("no such file") : std::string(std::strerror(err));
    throw FileReadError(fmt::format("cannot open '{}': {}", file.string(), why), "cannot open: " + why);
}

} // namespace

std::string describe_non_regular(const fs::path& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return {};
    return kind_of(st.st_mode);
}

std::string read_regular_file(const fs::path& file, std::size_t max_bytes) {
    // stat before open: opening a FIFO for reading blocks until a writer comes.
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0) cannot_open(file, errno);
    if (!S_ISREG(st.st_mode))
        refuse_read(file, fmt::format("is {}, not a regular file{}", kind_of(st.st_mode), kind_hint(st.st_mode)));
    // O_NONBLOCK in case the path was swapped for a FIFO since: the open returns at once, and the
    // fstat below refuses it.
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) cannot_open(file, errno);
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{fd};
    if (::fstat(fd, &st) != 0) refuse_read(file, fmt::format("cannot be examined: {}", std::strerror(errno)));
    if (!S_ISREG(st.st_mode))
        refuse_read(file, fmt::format("is {}, not a regular file{}", kind_of(st.st_mode), kind_hint(st.st_mode)));
    const auto too_large = [&] {
        refuse_read(file, fmt::format("is larger than {} MiB, more than any input of this kind: a wrong file?",
                                      max_bytes >> 20));
    };
    if (static_cast<std::uint64_t>(st.st_size) > max_bytes) too_large();
    std::string text;
    text.resize(static_cast<std::size_t>(st.st_size));
    std::size_t got = 0;
    // Read up to the cap even if the file grows while it is read (a run still writing its log).
    while (true) {
        if (got == text.size()) {
            if (text.size() >= max_bytes + 1) break;
            text.resize(std::min(max_bytes + 1, std::max<std::size_t>(text.size() * 2, 4096)));
        }
        const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) refuse_read(file, fmt::format("cannot be read: {}", std::strerror(errno)));
        if (n == 0) break;
        got += static_cast<std::size_t>(n);
    }
    text.resize(got);
    if (got > max_bytes) too_large();
    return text;
}

// ---- temporary files removed on SIGINT / SIGTERM ----

namespace {

// A fixed table the signal handler can walk without allocating or locking: a slot is claimed
// (state 1), its path written, then published (state 2); the handler unlinks published paths only.
constexpr int kSlots = 256;
struct TempSlot {
    std::atomic<int> state{0}; // 0 free, 1 being filled, 2 a live temporary
    char path[PATH_MAX];
};
TempSlot g_slots[kSlots];
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler reads these");

extern "C" void remove_temporaries_and_die(int sig) {
    for (auto& s : g_slots)
        if (s.state.load(std::memory_order_acquire) == 2) ::unlink(s.path);
    // The default action (terminate), so that the exit status still says which signal it was.
    ::signal(sig, SIG_DFL);
    ::raise(sig);
}

void install_handlers() {
    static std::once_flag once;
    std::call_once(once, [] {
        for (const int sig : {SIGINT, SIGTERM}) {
            struct sigaction old {};
            if (::sigaction(sig, nullptr, &old) != 0) continue;
            // An ignored signal (nohup, a shell's background job) stays ignored; a handler someone
            // else installed stays theirs.
            if (old.sa_handler != SIG_DFL) continue;
            struct sigaction sa {};
            sa.sa_handler = remove_temporaries_and_die;
            sigemptyset(&sa.sa_mask);
            sa.sa_flags = 0;
            (void)::sigaction(sig, &sa, nullptr);
        }
    });
}

// The slot holding `path`, or -1 when the table is full or the path too long (the temporary is
// then only removed by the next write's stale-file sweep).
int register_temporary(const fs::path& path) {
    install_handlers();
    const std::string abs = fs::absolute(path).string();
    if (abs.size() >= PATH_MAX) return -1;
    for (int i = 0; i < kSlots; ++i) {
        int expected = 0;
        if (!g_slots[i].state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) continue;
        std::memcpy(g_slots[i].path, abs.c_str(), abs.size() + 1);
        g_slots[i].state.store(2, std::memory_order_release);
        return i;
    }
    return -1;
}

void unregister_temporary(int slot) noexcept {
    if (slot >= 0 && slot < kSlots) g_slots[slot].state.store(0, std::memory_order_release);
}

// ---- writing ----

[[noreturn]] void fail(const fs::path& path, const std::string& key, const std::string& message) {
    Diagnostic d;
    d.file = path.string();
    d.key = key;
    d.message = message;
    throw OutputError({d});
}

// An ostream buffer over a file descriptor that remembers the first write error (errno).
class FdBuf : public std::streambuf {
public:
    explicit FdBuf(int fd) : fd_(fd) { setp(buf_.data(), buf_.data() + buf_.size()); }
    [[nodiscard]] int error() const { return error_; }

protected:
    int_type overflow(int_type c) override {
        if (!drain()) return traits_type::eof();
        if (!traits_type::eq_int_type(c, traits_type::eof())) {
            *pptr() = traits_type::to_char_type(c);
            pbump(1);
        }
        return traits_type::not_eof(c);
    }
    int sync() override { return drain() ? 0 : -1; }

private:
    bool drain() {
        const char* p = pbase();
        auto left = static_cast<std::size_t>(pptr() - pbase());
        while (left > 0) {
            const ssize_t n = ::write(fd_, p, left);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                error_ = n < 0 ? errno : EIO;
                return false;
            }
            p += n;
            left -= static_cast<std::size_t>(n);
        }
        setp(buf_.data(), buf_.data() + buf_.size());
        return true;
    }
    int fd_;
    int error_ = 0;
    std::array<char, 1 << 16> buf_{};
};

// Runs `write` on `out` and checks that everything reached it; `cleanup` runs before any error
// propagates. `error` gives the errno of a failed write when the stream knows it.
void write_checked(std::ostream& out, const fs::path& path, const std::string& key,
                   const std::function<void(std::ostream&)>& write, const std::function<void()>& cleanup,
                   const std::function<int()>& error) {
    try {
        write(out);
    } catch (...) {
        cleanup();
        throw;
    }
    out.flush();
    if (!out) {
        const int err = error ? error() : errno;
        cleanup();
        fail(path, key, fmt::format("write failed: {}", std::strerror(err != 0 ? err : EIO)));
    }
}

// "-", or an existing character device / FIFO: no rename, the bytes go straight through.
void write_stream(const fs::path& path, const std::string& key, const std::function<void(std::ostream&)>& write) {
    if (path == "-") {
        write_checked(std::cout, path, key, write, [] {}, {});
        return;
    }
    // O_NONBLOCK: a FIFO that nothing reads fails at once (ENXIO) instead of waiting for a reader.
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENXIO) fail(path, key, "is a FIFO (named pipe) that nothing reads; refusing to wait for a reader");
        fail(path, key, fmt::format("cannot open for writing: {}", std::strerror(errno)));
    }
    // Writes block again from here (a reader that is slower than we are is no error).
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags >= 0) (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    FdBuf buf(fd);
    std::ostream out(&buf);
    write_checked(
        out, path, key, write, [fd] { ::close(fd); }, [&buf] { return buf.error(); });
    if (::close(fd) != 0 && errno != EINTR)
        fail(path, key, fmt::format("write failed when closing: {}", std::strerror(errno)));
}

// Removes `.NAME.tmp.PID` files next to `target` whose writer is no longer running (a run killed
// while it wrote). Best effort: a file that cannot be removed is left, never an error.
void remove_stale_temporaries(const fs::path& dir, const std::string& name) {
    const std::string prefix = fmt::format(".{}.tmp.", name);
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string entry = it->path().filename().string();
        if (!entry.starts_with(prefix)) continue;
        const std::string pid_text = entry.substr(prefix.size());
        if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos || pid_text.size() > 9)
            continue;
        const long pid = std::stol(pid_text);
        if (pid == static_cast<long>(getpid())) continue;
        if (kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue; // alive, or not ours to judge
        std::error_code rm;
        fs::remove(it->path(), rm);
    }
}

void sync_folder(const fs::path& dir) {
    if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
        (void)::fsync(dfd);
        ::close(dfd);
    }
}

} // namespace

OutputBatch::~OutputBatch() {
    discard();
}

void OutputBatch::discard() noexcept {
    for (const Pending& p : pending_) {
        std::error_code ec;
        fs::remove(p.tmp, ec);
        unregister_temporary(p.slot);
    }
    pending_.clear();
}

std::string OutputBatch::stage(const fs::path& path, const std::string& key,
                               const std::function<void(std::ostream&)>& write, OutputOptions options) {
    if (path.empty()) fail(path, key, "empty file name");
    std::error_code ec;
    if (!options.replace && path != "-" && fs::exists(fs::symlink_status(path, ec)))
        fail(path, key, "already exists; refusing to overwrite it (use --force)");
    if (path == "-") {
        write_stream(path, key, write);
        return {};
    }
    std::string note;
    fs::path target = path;
    if (fs::is_symlink(fs::symlink_status(path, ec))) {
        // Followed link by link (a dangling link's target is created, as a shell redirection does);
        // 40 links is Linux's own limit (ELOOP).
        for (int links = 0; fs::is_symlink(fs::symlink_status(target, ec)); ++links) {
            if (links == 40) fail(path, key, "is a symlink that does not resolve (a loop of links)");
            const fs::path next = fs::read_symlink(target, ec);
            if (ec) fail(path, key, fmt::format("is a symlink that cannot be read: {}", ec.message()));
            target = next.is_absolute() ? next : target.parent_path() / next;
        }
        target = fs::weakly_canonical(target, ec);
        if (ec) fail(path, key, fmt::format("is a symlink that cannot be resolved: {}", ec.message()));
        note = fmt::format("{} {} is a symlink: wrote its target {}", key, path.string(), target.string());
    }
    const fs::file_status st = fs::status(target, ec);
    switch (st.type()) {
        case fs::file_type::not_found:
        case fs::file_type::regular:
            break;
        case fs::file_type::character:
        case fs::file_type::fifo:
            write_stream(target, key, write);
            return note;
        case fs::file_type::directory:
            fail(path, key, "is a folder, not a file name");
        case fs::file_type::block:
            fail(path, key, "is a block device; refusing to write a report over it");
        case fs::file_type::socket:
            fail(path, key, "is a socket; refusing to write a report over it");
        default:
            fail(path, key,
                 ec ? fmt::format("cannot be examined: {}", ec.message())
                    : std::string("is not a regular file, a device or a FIFO"));
    }
    if (!target.has_filename()) fail(path, key, "is a folder, not a file name");

    const fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
    remove_stale_temporaries(dir, target.filename().string());
    // Same folder (same file system) so that the rename is atomic; the pid keeps concurrent
    // writers of the same target apart.
    const fs::path tmp = dir / fmt::format(".{}.tmp.{}", target.filename().string(), static_cast<long>(getpid()));
    const int slot = register_temporary(tmp);
    auto remove_tmp = [&] {
        std::error_code rm;
        fs::remove(tmp, rm); // best effort: the original error is the one to report
        unregister_temporary(slot);
    };
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) {
            const int err = errno;
            unregister_temporary(slot);
            fail(path, key, fmt::format("cannot create a file in '{}': {}", dir.string(), std::strerror(err)));
        }
        write_checked(out, path, key, write,
                      [&] {
                          out.close();
                          remove_tmp();
                      },
                      {});
        out.close();
        if (out.fail()) {
            remove_tmp();
            fail(path, key, "write failed when closing the file");
        }
    }
    if (options.durable) {
        if (const int fd = ::open(tmp.c_str(), O_WRONLY | O_CLOEXEC); fd >= 0) {
            const bool synced = ::fsync(fd) == 0 || errno == EINVAL;
            const int err = errno;
            ::close(fd);
            if (!synced) {
                remove_tmp();
                fail(path, key, fmt::format("cannot flush the file to disk: {}", std::strerror(err)));
            }
        }
    }
    pending_.push_back(Pending{tmp, target, key, options, slot});
    return note;
}

void OutputBatch::commit() {
    while (!pending_.empty()) {
        Pending p = pending_.front();
        std::error_code ec;
        // The replaced file's permissions carry over (a report made group-readable stays so).
        if (const auto old = fs::status(p.target, ec); !ec && fs::is_regular_file(old))
            fs::permissions(p.tmp, old.permissions(), ec);
        ec.clear();
        if (p.options.replace) {
            fs::rename(p.tmp, p.target, ec);
        } else {
            // A hard link is an atomic create-if-absent: it fails if the file appeared meanwhile.
            fs::create_hard_link(p.tmp, p.target, ec);
            if (ec && ec != std::errc::file_exists) {
                // File systems without hard links: rename after a fresh check.
                std::error_code ec2;
                if (fs::exists(fs::symlink_status(p.target, ec2)))
                    ec = std::make_error_code(std::errc::file_exists);
                else
                    fs::rename(p.tmp, p.target, ec);
            }
        }
        if (ec) {
            const std::string why = ec == std::errc::file_exists
                                        ? std::string("already exists; refusing to overwrite it (use --force)")
                                        : fmt::format("cannot rename the finished file into place: {}", ec.message());
            discard(); // this one's temporary and those not yet renamed
            fail(p.target, p.key, why);
        }
        std::error_code rm;
        if (!p.options.replace) fs::remove(p.tmp, rm); // after a link the temporary is a second name
        unregister_temporary(p.slot);
        if (p.options.durable) sync_folder(p.target.parent_path().empty() ? fs::path(".") : p.target.parent_path());
        pending_.erase(pending_.begin());
    }
}

std::string write_file_atomically(const fs::path& path, const std::string& key,
                                  const std::function<void(std::ostream&)>& write, OutputOptions options) {
    OutputBatch batch;
    std::string note = batch.stage(path, key, write, options);
    batch.commit();
    return note;
}

// ---- standard streams ----

bool standard_streams_ok(std::string& error) {
    std::cout.flush();
    const bool out_ok = static_cast<bool>(std::cout);
    errno = 0;
    const bool out_flushed = std::fflush(stdout) == 0 && std::ferror(stdout) == 0;
    const int out_err = errno;
    // Standard error is flushed too, but a failure there changes no exit status: it carries notes
    // and messages, not the result, and there would be nowhere left to say so.
    std::cerr.flush();
    (void)std::fflush(stderr);
    if (out_ok && out_flushed) return true;
    error = fmt::format("cannot write to standard output{}", out_err != 0 ? ": " + std::string(std::strerror(out_err))
                                                                          : std::string(" (the output is cut)"));
    return false;
}

void guard_standard_descriptors() noexcept {
    for (int fd = 0; fd <= 2; ++fd) {
        if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
        const int opened = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (opened >= 0 && opened != fd) {
            (void)::dup2(opened, fd);
            ::close(opened);
        }
    }
}

} // namespace trainsim::model
