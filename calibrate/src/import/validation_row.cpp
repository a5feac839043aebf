// `import run`'s output: one row of the published-measurements CSV (../shared/validation/
// README.md), appended whole. The row is read back by model::load_validation_csv, the one reader of
// the schema (tests/test_calibrate_run_import.cpp checks the round trip).
#include "trainsim/calibrate/core/calibrate_error.hpp"
#include "trainsim/calibrate/import/run_import.hpp"

#include "import_text.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <system_error>

namespace trainsim::calibrate {

namespace fs = std::filesystem;
using namespace detail;
using nlohmann::json;

const std::vector<std::string>& validation_columns() {
    static const std::vector<std::string> kColumns{"id",         "source_group", "source",       "model",
                                                   "layers",     "hidden",       "heads",        "kv_heads",
                                                   "ffn",        "ffn_type",     "vocab",        "seq_len",
                                                   "gpu",        "num_gpus",     "tp",           "pp",
                                                   "vp",         "cp",           "dp",           "sequence_parallel",
                                                   "sharding",   "micro_batch",  "global_batch", "recompute",
                                                   "precision",  "framework",    "kind",         "tokens_per_s_per_gpu",
                                                   "derivation", "notes"};
    return kColumns;
}

ValidationRowCells validation_row(const model::Plan& plan, const RunLog& log, const RunMeasurement& m,
                                  const std::string& id) {
    const auto& a = plan.model;
    const auto& p = plan.parallel;
    ValidationRowCells row;
    row["id"] = id;
    row["source_group"] = "own_run";
    row["source"] = fmt::format("own run: {} ({}), plan '{}'", base_name(log.file), to_string(log.format), plan.name);
    row["model"] = a.name.empty() ? plan.name : a.name;
    row["layers"] = std::to_string(a.layers);
    row["hidden"] = std::to_string(a.hidden);
    row["heads"] = std::to_string(a.heads);
    row["kv_heads"] = std::to_string(a.kv_heads);
    row["ffn"] = std::to_string(a.ffn);
    row["ffn_type"] = model::to_string(a.ffn_type);
    row["vocab"] = std::to_string(a.vocab);
    row["seq_len"] = std::to_string(plan.training.seq_len);
    // The profile id (a scenario may name its profile by path; the schema names a shipped profile).
    row["gpu"] = plan.hardware.id.empty() ? plan.cluster.gpu : plan.hardware.id;
    row["num_gpus"] = std::to_string(plan.num_gpus());
    row["tp"] = std::to_string(p.tp);
    row["pp"] = std::to_string(p.pp);
    row["vp"] = std::to_string(p.vp);
    row["cp"] = std::to_string(p.cp);
    row["dp"] = std::to_string(p.dp);
    row["sequence_parallel"] = p.sequence_parallel ? "true" : "false";
    row["sharding"] = model::to_string(p.sharding);
    row["micro_batch"] = std::to_string(plan.training.micro_batch);
    row["global_batch"] = std::to_string(plan.training.global_batch);
    row["recompute"] = model::to_string(p.recompute);
    row["precision"] = model::to_string(plan.precision);
    // The plan's framework, which fills the properties the schema has no column for; an empty one
    // is the Megatron-Core defaults (scenario.hpp Parallel::framework).
    row["framework"] = p.framework.empty() ? "megatron-core" : p.framework;
    row["kind"] = "step";
    row["tokens_per_s_per_gpu"] = fmt::format("{:.2f}", m.tokens_per_s_per_gpu);
    row["derivation"] = m.derivation;
    row["notes"] = m.notes;
    return row;
}

namespace {

// RFC 4180: a cell with a comma, a quote or a line break is quoted, its quotes doubled.
std::string csv_cell(const std::string& s) {
    if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
    std::string out = "\"";
    for (char c : s) {
        if (c == '"') out += '"';
        out += c;
    }
    return out + '"';
}

std::string header_line() {
    std::string s;
    for (const auto& c : validation_columns()) s += (s.empty() ? "" : ",") + c;
    return s;
}

// The first cell of every record of an RFC 4180 text (quoted cells may span lines), with the
// record's first line; the header is record 1.
std::vector<std::pair<std::string, int>> first_cells(const std::string& text) {
    std::vector<std::pair<std::string, int>> out;
    std::string cell;
    bool quoted = false, first = true;
    int line = 1, record_line = 1;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (quoted) {
            if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
                if (first) cell += '"';
                ++i;
            } else if (c == '"') {
                quoted = false;
            } else {
                if (c == '\n') ++line;
                if (first) cell += c;
            }
        } else if (c == '"') {
            quoted = true;
        } else if (c == ',') {
            first = false;
        } else if (c == '\n') {
            out.emplace_back(std::string(trim(cell)), record_line);
            cell.clear();
            first = true;
            record_line = ++line;
        } else if (first && c != '\r') {
            cell += c;
        }
    }
    return out;
}

[[noreturn]] void io_failure(const fs::path& file, const char* what) {
    throw std::system_error(errno, std::generic_category(), fmt::format("{} '{}'", what, file.string()));
}

void write_all(int fd, const std::string& text, const fs::path& file) {
    std::size_t off = 0;
    while (off < text.size()) {
        const ssize_t n = ::write(fd, text.data() + off, text.size() - off);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) io_failure(file, "cannot write");
        off += static_cast<std::size_t>(n);
    }
}

} // namespace

std::string csv_line(const ValidationRowCells& row) {
    std::string s;
    bool first = true;
    for (const auto& c : validation_columns()) {
        const auto it = row.find(c);
        if (!first) s += ',';
        s += csv_cell(it == row.end() ? std::string() : it->second);
        first = false;
    }
    return s;
}

void append_validation_row(const fs::path& csv, const ValidationRowCells& row) {
    const std::string name = csv.string();
    const fs::path dir = csv.has_parent_path() ? csv.parent_path() : fs::path(".");
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) throw CalibrationInputError(name, "its folder does not exist");
    // An exclusive flock on the CSV's folder serialises importers appending to one file (the rename
    // below keeps readers safe; the lock keeps two writers from both starting from the old text),
    // and leaves no lock file beside the CSV.
    const int lock = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (lock < 0) io_failure(dir, "cannot open the folder");
    struct Unlock {
        int fd;
        ~Unlock() { ::close(fd); } // closing releases the flock
    } unlock{lock};
    if (::flock(lock, LOCK_EX | LOCK_NB) != 0)
        throw CalibrationInputError(name, "another import is appending to a CSV in " + dir.string() +
                                              " (its folder is locked); try again when it is done");

    std::string text;
    struct stat st {};
    if (::stat(csv.c_str(), &st) == 0) {
        if (!S_ISREG(st.st_mode)) throw CalibrationInputError(name, "is not a regular file");
        text = read_run_file(csv); // the same caps as a log: a validation CSV is kilobytes
        if (!text.empty() && text.back() != '\n')
            throw CalibrationInputError(name, "ends without an end of line (a cut last row?): fix the file first");
        const auto cells = first_cells(text);
        const std::string first_line = text.substr(0, text.find('\n'));
        if (trim(first_line) != header_line())
            throw CalibrationInputError({model::Diagnostic{
                name, 1, 1, "", "the header is not the published-measurements schema's:\n  " + header_line()}});
        const std::string& id = row.at("id");
        for (std::size_t i = 1; i < cells.size(); ++i)
            if (cells[i].first == id)
                throw CalibrationInputError({model::Diagnostic{
                    name, cells[i].second, 1, "id",
                    fmt::format("a row with id '{}' is already there: pass another --id (rows are never replaced)",
                                id)}});
    } else if (errno != ENOENT) {
        io_failure(csv, "cannot stat");
    } else {
        text = header_line() + "\n";
    }
    text += csv_line(row) + "\n";

    const fs::path tmp = dir / fmt::format(".{}.import-{}.tmp", csv.filename().string(), ::getpid());
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) io_failure(tmp, "cannot create");
    try {
        write_all(fd, text, tmp);
        if (::fsync(fd) != 0 && errno != EINVAL) io_failure(tmp, "cannot flush");
    } catch (...) {
        ::close(fd);
        ::unlink(tmp.c_str());
        throw;
    }
    ::close(fd);
    if (::rename(tmp.c_str(), csv.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        errno = err;
        io_failure(csv, "cannot rename the new file over");
    }
    if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
        (void)::fsync(dfd);
        ::close(dfd);
    }
}

json to_json(const RunLog& log, const RunMeasurement& m) {
    json j;
    j["file"] = utf8(log.file);
    j["format"] = to_string(log.format);
    j["printer"] = log.printer;
    j["rank"] = log.rank;
    j["logged"] = m.logged;
    j["dropped"] = m.dropped;
    j["steady"] = m.steady;
    j["steady_steps"] = m.steady_steps;
    j["median_step_s"] = m.median_step_s;
    j["p10_step_s"] = m.p10_step_s;
    j["p90_step_s"] = m.p90_step_s;
    j["tokens_per_s_per_gpu"] = m.tokens_per_s_per_gpu;
    j["derivation"] = m.derivation;
    j["notes"] = m.notes;
    j["skipped"] = log.skipped;
    return j;
}

} // namespace trainsim::calibrate
