#include "trainsim/sim/report/output_file.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <system_error>

#include <unistd.h>

namespace trainsim::sim {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail(const fs::path& path, const std::string& key, const std::string& message) {
    model::Diagnostic d;
    d.file = path.string();
    d.key = key;
    d.message = message;
    throw OutputError({d});
}

// Runs `write` on `out` and checks that everything reached it; `cleanup` runs before any error
// propagates.
void write_checked(std::ostream& out, const fs::path& path, const std::string& key,
                   const std::function<void(std::ostream&)>& write, const std::function<void()>& cleanup) {
    try {
        write(out);
    } catch (...) {
        cleanup();
        throw;
    }
    out.flush();
    if (!out) {
        const std::string why = std::strerror(errno);
        cleanup();
        fail(path, key, fmt::format("write failed: {}", why));
    }
}

// "-" or an existing character device / FIFO: no rename, the bytes go straight through.
void write_stream(const fs::path& path, const std::string& key, const std::function<void(std::ostream&)>& write) {
    if (path == "-") {
        write_checked(std::cout, path, key, write, [] {});
        return;
    }
    std::ofstream out(path, std::ios::binary | std::ios::out);
    if (!out) fail(path, key, fmt::format("cannot open for writing: {}", std::strerror(errno)));
    write_checked(out, path, key, write, [] {});
    out.close();
    if (out.fail()) fail(path, key, fmt::format("write failed when closing: {}", std::strerror(errno)));
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

void write_replacing(const fs::path& path, const std::string& key, const std::function<void(std::ostream&)>& write) {
    const fs::path dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
    remove_stale_temporaries(dir, path.filename().string());
    // Same folder (same file system) so that the rename is atomic; the pid keeps concurrent
    // writers of the same target apart.
    const fs::path tmp = dir / fmt::format(".{}.tmp.{}", path.filename().string(), static_cast<long>(getpid()));
    auto remove_tmp = [&] {
        std::error_code ec;
        fs::remove(tmp, ec); // best effort: the original error is the one to report
    };
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) fail(path, key, fmt::format("cannot create a file in '{}': {}", dir.string(), std::strerror(errno)));
        write_checked(out, path, key, write, [&] {
            out.close();
            remove_tmp();
        });
        out.close();
        if (out.fail()) {
            remove_tmp();
            fail(path, key, "write failed when closing the file");
        }
    }
    std::error_code ec;
    // The replaced file's permissions carry over (a report made group-readable stays so).
    if (const auto old = fs::status(path, ec); !ec && fs::is_regular_file(old))
        fs::permissions(tmp, old.permissions(), ec);
    fs::rename(tmp, path, ec);
    if (ec) {
        remove_tmp();
        fail(path, key, fmt::format("cannot rename the finished file into place: {}", ec.message()));
    }
}

} // namespace

std::string write_file_atomically(const fs::path& path, const std::string& key,
                                  const std::function<void(std::ostream&)>& write) {
    if (path.empty()) fail(path, key, "empty file name");
    if (path == "-") {
        write_stream(path, key, write);
        return {};
    }
    std::string note;
    fs::path target = path;
    std::error_code ec;
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
    case fs::file_type::regular: break;
    case fs::file_type::character:
    case fs::file_type::fifo: write_stream(target, key, write); return note;
    case fs::file_type::directory: fail(path, key, "is a folder, not a file name");
    case fs::file_type::block: fail(path, key, "is a block device; refusing to write a report over it");
    case fs::file_type::socket: fail(path, key, "is a socket; refusing to write a report over it");
    default:
        fail(path, key, ec ? fmt::format("cannot be examined: {}", ec.message())
                           : std::string("is not a regular file, a device or a FIFO"));
    }
    if (!target.has_filename()) fail(path, key, "is a folder, not a file name");
    write_replacing(target, key, write);
    return note;
}

} // namespace trainsim::sim
