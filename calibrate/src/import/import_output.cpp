// What the importers write: files read for the parsers, samples of several files merged, and
// DIR/samples.jsonl replaced whole under the run directory's lock.
#include "trainsim/calibrate/import/import.hpp"

#include "trainsim/calibrate/core/calibrate_error.hpp"
#include "trainsim/calibrate/measure/measure.hpp"
#include "trainsim/calibrate/measure/rendezvous.hpp"
#include "trainsim/model/core/file_io.hpp"

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
    try {
        return model::read_regular_file(file, model::kMaxDataFileBytes);
    } catch (const model::FileReadError& e) {
        throw CalibrationInputError(file.string(), e.reason());
    }
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

// text -> file through the shared checked writer: a temporary beside it, flushed to disk, then
// renamed over it; a device or FIFO named samples.jsonl is written through, never replaced.
void replace_file(const fs::path& file, const std::string& text) {
    (void)model::write_file_atomically(file, "--out", [&](std::ostream& os) { os << text; },
                                       model::OutputOptions{.replace = true, .durable = true});
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
        text = read_import_file(w.samples);
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
