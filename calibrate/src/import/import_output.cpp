// What the importers write: files read for the parsers, samples of several files merged, and
// DIR/samples.jsonl replaced whole under the run directory's lock.
#include "trainsim/calibrate/import/import.hpp"

#include "trainsim/calibrate/core/calibrate_error.hpp"
#include "trainsim/calibrate/measure/measure.hpp"
#include "trainsim/calibrate/measure/rendezvous.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <system_error>

namespace trainsim::calibrate {

namespace fs = std::filesystem;
using nlohmann::json;

std::string read_import_file(const fs::path& file) {
    std::error_code ec;
    if (fs::is_directory(file, ec)) throw CalibrationInputError(file.string(), "is a directory, not a log file");
    std::ifstream in(file, std::ios::binary);
    if (!in) throw CalibrationInputError(file.string(), fmt::format("cannot open: {}", std::strerror(errno)));
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::vector<Sample> merge_imported(const std::vector<std::vector<Sample>>& per_file,
                                   std::vector<std::size_t>* replaced) {
    std::vector<Sample> out;
    std::map<std::string, std::size_t> at;
    if (replaced) replaced->assign(per_file.size(), 0);
    for (std::size_t f = 0; f < per_file.size(); ++f)
        for (const Sample& s : per_file[f]) {
            if (auto it = at.find(s.desc.key); it != at.end()) {
                out[it->second] = s;
                if (replaced) ++(*replaced)[f];
            } else {
                at.emplace(s.desc.key, out.size());
                out.push_back(s);
            }
        }
    return out;
}

namespace {

[[noreturn]] void io_failure(const fs::path& file, const char* what) {
    throw std::system_error(errno, std::generic_category(), fmt::format("{} '{}'", what, file.string()));
}

// text -> file through a temporary file in the same directory, flushed, then renamed over it.
void replace_file(const fs::path& file, const std::string& text) {
    const fs::path tmp = file.parent_path() / fmt::format(".{}.import-{}.tmp", file.filename().string(), ::getpid());
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) io_failure(tmp, "cannot create");
    std::size_t off = 0;
    while (off < text.size()) {
        const ssize_t n = ::write(fd, text.data() + off, text.size() - off);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            const int err = errno;
            ::close(fd);
            ::unlink(tmp.c_str());
            errno = err;
            io_failure(tmp, "cannot write");
        }
        off += static_cast<std::size_t>(n);
    }
    if (::fsync(fd) != 0 && errno != EINVAL) {
        const int err = errno;
        ::close(fd);
        ::unlink(tmp.c_str());
        errno = err;
        io_failure(tmp, "cannot flush");
    }
    ::close(fd);
    if (::rename(tmp.c_str(), file.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        errno = err;
        io_failure(file, "cannot rename the new samples over");
    }
    // The rename on disk too (a crash right after keeps the new file).
    if (const int dfd = ::open(file.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
        (void)::fsync(dfd);
        ::close(dfd);
    }
}

} // namespace

ImportWrite write_imported_samples(const fs::path& dir, const std::vector<Sample>& samples, ImportMode mode,
                                   json run_info) {
    ImportWrite w;
    w.samples = dir / kSamplesFile;
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw CalibrationInputError(dir.string(), "cannot create the output directory: " + ec.message());
    const auto lock = lock_run_dir(dir, "import");  // held until return: before reading what is there

    std::string text;
    const bool has_samples = fs::exists(w.samples, ec) && fs::file_size(w.samples, ec) > 0;
    if (has_samples && mode == ImportMode::create)
        throw CalibrationInputError(w.samples.string(),
                                    "already holds samples; pass --append to add to them or --force to replace them");
    if (has_samples && mode == ImportMode::append) {
        const SampleFile old = read_samples(w.samples);  // strict: the file must be whole to be extended
        std::map<std::string, int> old_line;
        for (std::size_t i = 0; i < old.samples.size(); ++i) old_line.emplace(old.samples[i].desc.key, old.lines[i]);
        std::vector<model::Diagnostic> clash;
        for (const Sample& s : samples)
            if (auto it = old_line.find(s.desc.key); it != old_line.end())
                clash.push_back(model::Diagnostic{w.samples.string(), it->second, 1, s.desc.key,
                                                  "already in this file: an import never replaces a sample (use "
                                                  "--force to replace the whole file, or another --out)"});
        if (!clash.empty()) throw CalibrationInputError(std::move(clash));
        std::ifstream in(w.samples, std::ios::binary);
        std::ostringstream ss;
        ss << in.rdbuf();
        text = ss.str();
        w.kept = old.samples.size();
    }
    for (const Sample& s : samples) text += to_json_line(s) + "\n";
    w.written = samples.size();
    replace_file(w.samples, text);

    run_info["samples_file"] = kSamplesFile;
    run_info["samples_written"] = w.written;
    run_info["samples_kept"] = w.kept;
    run_info["mode"] = mode == ImportMode::create ? "create" : mode == ImportMode::append ? "append" : "force";
    if (!run_info.contains("started_at")) run_info["started_at"] = utc_now();
    if (!run_info.contains("host")) run_info["host"] = host_name();
    // Command lines and file names are bytes, JSON is UTF-8: what is not is written as U+FFFD.
    run_info = json::parse(run_info.dump(-1, ' ', false, json::error_handler_t::replace));
    w.run_info = write_run_info(dir, run_info);
    return w;
}

} // namespace trainsim::calibrate
