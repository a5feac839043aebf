#include "trainsim/sim/output_file.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
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

} // namespace

void write_file_atomically(const fs::path& path, const std::string& key,
                           const std::function<void(std::ostream&)>& write) {
    if (path.empty()) fail(path, key, "empty file name");
    if (!path.has_filename() || fs::is_directory(path)) fail(path, key, "is a folder, not a file name");
    const fs::path dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
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
        try {
            write(out);
        } catch (...) {
            out.close();
            remove_tmp();
            throw;
        }
        out.flush();
        if (!out) {
            const std::string why = std::strerror(errno);
            out.close();
            remove_tmp();
            fail(path, key, fmt::format("write failed: {}", why));
        }
        out.close();
        if (out.fail()) {
            remove_tmp();
            fail(path, key, "write failed when closing the file");
        }
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) {
        remove_tmp();
        fail(path, key, fmt::format("cannot rename the finished file into place: {}", ec.message()));
    }
}

} // namespace trainsim::sim
