// trainsim sweep GRID.yaml: a plan search per cell of a grid of models, GPUs, counts, precisions,
// tokens, frameworks, stacks and prices, one row per cell and GPU count (docs/plan-search.md
// "Sweeps"). Rows are appended cell by cell to OUT.partial, renamed to OUT when the grid is done;
// --resume continues a killed sweep from its partial file.
#include "commands.hpp"

#include "trainsim/model/core/text_format.hpp"
#include "trainsim/model/input/sweep_grid.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <set>
#include <sstream>

namespace trainsim::sim::cli {

namespace {

// The columns of a row: the cell, then the best plan of its GPU count as plan_json names its fields.
const std::vector<std::string>& columns() {
    static const std::vector<std::string> c{
        "grid", "cell", "model", "gpu", "precision", "tokens_axis", "framework_axis", "stack_axis", "price",
        "num_gpus", "status", "excluded_by", "pareto", "name", "tp", "pp", "vp", "cp", "dp", "micro_batch",
        "sharding", "recompute", "offload", "step_time_s", "tokens_per_s_per_gpu", "mfu", "memory_per_gpu_gib",
        "tokens", "days_to_train", "days_to_train_p10", "days_to_train_p90", "expected_days", "expected_days_p10",
        "expected_days_p90", "gpu_hours", "currency", "cost", "expected_cost", "expected_cost_p10",
        "expected_cost_p90", "unused_fraction", "energy_kwh", "band.basis"};
    return c;
}

// FNV-1a 64 of the grid's text: rows written for another grid are not resumed.
std::string fingerprint(const std::string& text) {
    std::uint64_t h = 1469598103934665603ULL;
    for (unsigned char ch : text) {
        h ^= ch;
        h *= 1099511628211ULL;
    }
    return fmt::format("{:016x}", h);
}

[[noreturn]] void sweep_error(const std::string& file, const std::string& key, const std::string& msg) {
    throw model::SweepGridError({model::Diagnostic{file, 0, 0, key, msg}});
}

// The first two fields of a CSV line (RFC 4180 quoting, as csv_line writes it).
std::vector<std::string> csv_fields(const std::string& line, std::size_t n) {
    std::vector<std::string> out;
    std::string cur;
    bool quoted = false;
    for (std::size_t i = 0; i < line.size() && out.size() < n; ++i) {
        const char ch = line[i];
        if (quoted) {
            if (ch == '"' && i + 1 < line.size() && line[i + 1] == '"') {
                cur += '"';
                ++i;
            } else if (ch == '"') {
                quoted = false;
            } else {
                cur += ch;
            }
        } else if (ch == '"') {
            quoted = true;
        } else if (ch == ',') {
            out.push_back(std::move(cur));
            cur.clear();
        } else {
            cur += ch;
        }
    }
    if (out.size() < n) out.push_back(std::move(cur));
    return out;
}

struct Output {
    fs::path final_path, partial;
    bool csv = true;
};

// What a partial file already holds: the cells done (a prefix of the grid's order), and the byte
// length of its complete cells (a cell cut by a kill, or a last line without its newline, is cut
// off before the sweep goes on).
struct Resumed {
    std::size_t cells_done = 0;
    std::size_t keep_bytes = 0;
    bool has_header = false;
};

Resumed read_partial(const Output& o, const std::vector<std::string>& keys, std::size_t per_cell,
                     const std::string& grid_fp) {
    Resumed r;
    std::ifstream in(o.partial, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::size_t pos = 0, line_no = 0;
    std::string current;
    std::size_t rows_in_current = 0, cell_start = 0;
    const std::string header = csv_line(columns(), nullptr);
    while (pos < text.size()) {
        const auto nl = text.find('\n', pos);
        if (nl == std::string::npos) break; // a last line cut by a kill: dropped
        const std::string line = text.substr(pos, nl - pos);
        ++line_no;
        const std::size_t next = nl + 1;
        if (o.csv && line_no == 1) {
            if (line + "\n" != header)
                sweep_error(o.partial.string(), "--resume",
                            "its header is not this trainsim's sweep header: not a partial sweep of this version");
            r.has_header = true;
            r.keep_bytes = next;
            pos = next;
            continue;
        }
        std::string fp, cell;
        if (o.csv) {
            const auto f = csv_fields(line, 2);
            if (f.size() == 2) fp = f[0], cell = f[1];
        } else {
            try {
                const auto j = nlohmann::json::parse(line);
                fp = j.at("grid").get<std::string>();
                cell = j.at("cell").get<std::string>();
            } catch (const nlohmann::json::exception&) {
                sweep_error(o.partial.string(), fmt::format("line {}", line_no), "is not a sweep row (JSON)");
            }
        }
        if (fp != grid_fp)
            sweep_error(o.partial.string(), fmt::format("line {}", line_no),
                        "was written for another grid (the grid file changed since): --force starts over");
        if (cell != current) {
            if (!current.empty()) {
                if (rows_in_current != per_cell) break;
                ++r.cells_done;
                r.keep_bytes = pos;
            }
            if (r.cells_done >= keys.size() || keys[r.cells_done] != cell)
                sweep_error(o.partial.string(), fmt::format("line {}", line_no),
                            fmt::format("cell '{}' is not the grid's next cell ('{}'): --force starts over", cell,
                                        r.cells_done < keys.size() ? keys[r.cells_done] : "none"));
            current = cell;
            rows_in_current = 0;
            cell_start = pos;
        }
        ++rows_in_current;
        pos = next;
    }
    if (!current.empty() && rows_in_current == per_cell && pos == text.size()) {
        ++r.cells_done;
        r.keep_bytes = pos;
    } else if (!current.empty() && rows_in_current == per_cell && text.find('\n', pos) == std::string::npos &&
               cell_start < pos) {
        ++r.cells_done; // complete rows, then a cut line of the next cell
        r.keep_bytes = pos;
    }
    return r;
}

// Appends `text` to fd in one write (a kill leaves at most that cell cut), then syncs it.
void append(int fd, const std::string& text, const fs::path& path) {
    std::size_t done = 0;
    while (done < text.size()) {
        const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0)
            throw OutputError({model::Diagnostic{path.string(), 0, 0, "--out",
                                                 fmt::format("cannot write: {}", std::strerror(errno))}});
        done += static_cast<std::size_t>(n);
    }
    if (::fsync(fd) != 0)
        throw OutputError(
            {model::Diagnostic{path.string(), 0, 0, "--out", fmt::format("cannot sync: {}", std::strerror(errno))}});
}

// One cell's search: the best plan of each GPU count (absent: none qualifies), whether it is on
// the cell's days-vs-cost front, and why a count has no plan.
struct CellSearch {
    std::map<int, std::optional<RankedPlan>> best;
    std::map<int, bool> pareto;
    std::map<int, std::vector<std::string>> why;
};

double days_on(const RunEstimate& e, const SearchOptions& o) {
    return o.basis == DaysBasis::expected ? e.expected_days : e.days_to_train;
}
double cost_on(const RunEstimate& e, const SearchOptions& o) {
    return o.basis == DaysBasis::expected ? e.expected_cost : e.cost;
}

// The front as search_plans marks it: no other count both faster and cheaper (not worse in both).
void mark_pareto(CellSearch& s, const SearchOptions& o) {
    for (auto& entry : s.best) {
        const int n = entry.first; // not a structured binding: lambdas capture it (clang 14 refuses those)
        const auto& b = entry.second;
        s.pareto[n] = false;
        if (!b) continue;
        const double d = days_on(b->estimate, o), c = cost_on(b->estimate, o);
        s.pareto[n] = std::none_of(s.best.begin(), s.best.end(), [&](const auto& other) {
            if (other.first == n || !other.second) return false;
            const double d2 = days_on(other.second->estimate, o), c2 = cost_on(other.second->estimate, o);
            return d2 <= d && c2 <= c && (d2 < d || c2 < c);
        });
    }
}

CellSearch search_cell(const std::vector<int>& counts, const model::Plan& base, const SearchOptions& tmpl,
                       const std::optional<ErrorModel>& em) {
    SearchOptions o = tmpl;
    o.space.gpu_counts = counts;
    o.top = 1;
    o.rank = o.deadline_days && !o.budget && has_price(base.pricing) ? RankBy::cost : RankBy::days;
    CellSearch s;
    for (int n : counts) s.best[n] = std::nullopt;
    std::optional<SearchResult> res;
    try {
        res = search_plans(base, o);
    } catch (const SearchError&) {
        for (int n : counts) s.why[n] = {"no layout"};
        mark_pareto(s, o);
        return s;
    }
    if (res->frontier.empty()) {
        if (!res->plans.empty()) s.best[counts.front()] = res->plans.front();
    } else {
        for (auto& f : res->frontier) s.best[f.gpus] = f.best;
    }
    const bool constrained = o.deadline_days || o.budget;
    std::optional<ConstraintMiss> miss;
    if (constrained && std::any_of(s.best.begin(), s.best.end(), [](const auto& b) { return !b.second; }))
        miss = explain_constraint_miss(base, o);
    for (auto& [n, b] : s.best) {
        if (b) {
            attach_band(b->estimate, b->plan, em);
            continue;
        }
        if (miss)
            for (const auto& cm : miss->counts)
                if (cm.gpus == n) s.why[n] = cm.excluded_by;
        if (s.why[n].empty()) s.why[n] = {"memory"};
    }
    mark_pareto(s, o);
    return s;
}

// The same search for another price: without constraints nothing in a search depends on the price
// (the ranking is by days, and a count's cheapest plan is its fastest), so only the bills change.
CellSearch repriced(CellSearch s, const model::Pricing& pricing, const SearchOptions& o) {
    for (auto& [n, b] : s.best)
        if (b) {
            b->plan.pricing = pricing;
            reprice(b->estimate, b->plan);
        }
    mark_pareto(s, o);
    return s;
}

std::vector<nlohmann::json> cell_rows(const model::SweepGrid& g, const model::SweepCell& c, const CellSearch& s,
                                      const std::string& fp) {
    auto label = [](const std::vector<model::SweepValue>& v, std::size_t i) {
        return v.empty() ? nlohmann::json(nullptr) : nlohmann::json(v[i].label);
    };
    std::vector<nlohmann::json> rows;
    for (int n : g.counts) {
        const auto& b = s.best.at(n);
        nlohmann::json row = b ? plan_json(b->plan, b->estimate) : nlohmann::json::object();
        row["grid"] = fp;
        row["cell"] = model::sweep_cell_key(g, c);
        row["model"] = g.models[c.model].label;
        row["gpu"] = g.gpus[c.gpu].label;
        row["precision"] = g.precisions[c.precision].label;
        row["tokens_axis"] = g.tokens.empty() ? nlohmann::json("20/param") : nlohmann::json(g.tokens[c.tokens].label);
        row["framework_axis"] = label(g.frameworks, c.framework);
        row["stack_axis"] = label(g.stacks, c.stack);
        row["price"] = c.price < g.prices.size() ? nlohmann::json(g.prices[c.price].name) : nlohmann::json(nullptr);
        row["num_gpus"] = n;
        row["pareto"] = s.pareto.at(n);
        row["status"] = b ? "ok" : "no_plan";
        const auto it = s.why.find(n);
        row["excluded_by"] = b || it == s.why.end() ? std::string() : fmt::format("{}", fmt::join(it->second, "+"));
        rows.push_back(std::move(row));
    }
    return rows;
}

} // namespace

int run_sweep(const SweepArgs& a) {
    const auto grid = a.grid_text ? model::load_sweep_grid_text(*a.grid_text, a.grid, fs::current_path())
                                  : model::load_sweep_grid(a.grid);
    Output o;
    if (!a.out.empty()) {
        o.final_path = a.out;
        const auto ext = o.final_path.extension().string();
        if (ext == ".jsonl" || ext == ".json") o.csv = false;
        else if (ext != ".csv")
            sweep_error(a.out, "--out", "names its format by its ending: .csv or .jsonl");
        o.partial = fs::path(a.out + ".partial");
        std::error_code ec;
        for (const auto& p : {o.final_path, o.partial}) {
            const auto st = fs::symlink_status(p, ec);
            if (!ec && fs::exists(st) && !fs::is_regular_file(st))
                sweep_error(p.string(), "--out", "exists and is not a regular file (a folder, a link, a FIFO or a device)");
        }
        if (a.force) {
            fs::remove(o.partial, ec);
        } else {
            if (fs::exists(o.final_path, ec) && !a.resume)
                sweep_error(a.out, "--out", "already exists: --force replaces it (once the new sweep is complete)");
            if (fs::exists(o.partial, ec) && !a.resume)
                sweep_error(o.partial.string(), "--out",
                            "holds a sweep that did not finish: --resume continues it, --force starts over");
        }
    } else if (a.resume) {
        sweep_error(a.grid, "--resume", "continues the partial file of an --out: give --out");
    }

    model::LoadOptions lo;
    lo.data_dir = data_dir(a.data_dir);
    const auto cells = model::sweep_cells(grid);
    // Every cell's plan first: a problem in any cell is found before hours of searching.
    std::vector<model::Plan> bases;
    std::vector<model::Diagnostic> problems;
    for (const auto& c : cells) {
        try {
            bases.push_back(model::sweep_cell_plan(grid, c, lo));
        } catch (const model::InputError& e) {
            problems.insert(problems.end(), e.diagnostics().begin(), e.diagnostics().end());
        }
        if (!problems.empty() && problems.size() >= 20) break;
    }
    if (!problems.empty()) throw model::SweepGridError(problems);
    if (grid.budget)
        for (std::size_t i = 0; i < cells.size(); ++i)
            if (!has_price(bases[i].pricing))
                sweep_error(grid.file, "constraints.budget",
                            fmt::format("cell {} has no price: a budget needs prices (the grid's prices)",
                                        model::sweep_cell_key(grid, cells[i])));

    SearchOptions tmpl;
    tmpl.basis = grid.days == "steady" ? DaysBasis::steady : DaysBasis::expected;
    tmpl.deadline_days = grid.deadline_days;
    tmpl.budget = grid.budget;
    if (!grid.memory_headroom.empty()) tmpl.memory_headroom = model::parse_fraction(grid.memory_headroom);
    tmpl.threads = a.threads;
    const auto em = load_error_model(lo.data_dir);
    const std::string fp = fingerprint(grid.text);
    std::vector<std::string> keys;
    for (const auto& c : cells) keys.push_back(model::sweep_cell_key(grid, c));

    std::size_t start = 0;
    int fd = -1;
    if (!o.final_path.empty()) {
        std::error_code ec;
        Resumed r;
        if (a.resume && fs::exists(o.partial, ec)) {
            r = read_partial(o, keys, grid.counts.size(), fp);
            fs::resize_file(o.partial, r.keep_bytes, ec);
            if (ec) sweep_error(o.partial.string(), "--resume", "cannot cut its unfinished cell: " + ec.message());
            std::cerr << fmt::format("trainsim: sweep: resuming {}: {} of {} cells done\n", o.partial.string(),
                                     r.cells_done, cells.size());
        }
        start = r.cells_done;
        fd = ::open(o.partial.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
            throw OutputError({model::Diagnostic{o.partial.string(), 0, 0, "--out",
                                                 fmt::format("cannot open: {}", std::strerror(errno))}});
        if (o.csv && !r.has_header) append(fd, csv_line(columns(), nullptr), o.partial);
    }
    struct FdGuard {
        int fd;
        ~FdGuard() {
            if (fd >= 0) ::close(fd);
        }
    } guard{fd};

    const bool bar = !a.quiet && isatty(STDERR_FILENO) != 0;
    auto progress = bar ? progress_bar("cells") : std::function<void(std::size_t, std::size_t)>();
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<nlohmann::json> all; // without --out: printed at the end
    // Cells that differ only in their price share one search when nothing in it depends on the price.
    const bool share = !grid.deadline_days && !grid.budget;
    auto without_price = [&](const model::SweepCell& c) {
        auto k = c;
        k.price = static_cast<std::size_t>(-1);
        return model::sweep_cell_key(grid, k);
    };
    std::optional<std::pair<std::string, CellSearch>> shared;
    std::size_t searches = 0;
    for (std::size_t i = start; i < cells.size(); ++i) {
        if (progress) progress(i, cells.size());
        const std::string k = without_price(cells[i]);
        CellSearch s;
        if (share && shared && shared->first == k) {
            s = repriced(shared->second, bases[i].pricing, tmpl);
        } else {
            s = search_cell(grid.counts, bases[i], tmpl, em);
            ++searches;
            if (share) shared.emplace(k, s);
        }
        auto rows = cell_rows(grid, cells[i], s, fp);
        if (fd >= 0) {
            std::string text;
            for (const auto& r : rows) text += o.csv ? csv_line(columns(), r) : r.dump() + "\n";
            append(fd, text, o.partial);
        } else {
            for (auto& r : rows) all.push_back(std::move(r));
        }
    }
    if (progress) progress(cells.size(), cells.size());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (fd >= 0) {
        std::error_code ec;
        fs::rename(o.partial, o.final_path, ec);
        if (ec)
            throw OutputError({model::Diagnostic{o.final_path.string(), 0, 0, "--out",
                                                 fmt::format("cannot rename {} over it: {}", o.partial.string(),
                                                             ec.message())}});
        std::cerr << fmt::format("trainsim: sweep: {} cells x {} GPU counts = {} rows in {}, {} searches, {:.1f} s\n",
                                 cells.size(), grid.counts.size(), cells.size() * grid.counts.size(),
                                 o.final_path.string(), searches, seconds);
        return kExitOk;
    }
    if (a.json && a.json_out) {
        *a.json_out = nlohmann::json(std::move(all));
    } else if (a.json) {
        for (const auto& r : all) std::cout << r.dump() << "\n";
    } else if (a.csv) {
        std::cout << csv_line(columns(), nullptr);
        for (const auto& r : all) std::cout << csv_line(columns(), r);
    } else {
        if (!grid.title.empty()) std::cout << grid.title << "\n";
        std::cout << fmt::format("{} cells x {} GPU counts in {:.1f} s ('*': on the cell's days-vs-cost front)\n\n",
                                 cells.size(), grid.counts.size(), seconds);
        std::cout << fmt::format("{:<16} {:<16} {:<5} {:<10} {:>6}  {:<38} {:>8} {:>9} {:>14}\n", "model", "gpu", "prec",
                                 "price", "GPUs", "best layout", "days", "exp.days", "bill");
        for (const auto& r : all) {
            auto str = [&](const char* k) { return r.contains(k) && r[k].is_string() ? r[k].get<std::string>() : "-"; };
            auto num = [&](const char* k, const char* f) {
                return r.contains(k) && r[k].is_number() ? fmt::format(fmt::runtime(f), r[k].get<double>())
                                                         : std::string("-");
            };
            const bool ok = r["status"] == "ok";
            std::cout << fmt::format(
                "{:<16} {:<16} {:<5} {:<10} {:>5}{}  {:<38} {:>8} {:>9} {:>14}\n", str("model"), str("gpu"),
                str("precision"), str("price"), r["num_gpus"].get<int>(), r["pareto"].get<bool>() ? "*" : " ",
                ok ? layout_words(r) : fmt::format("no plan ({})", r["excluded_by"].get<std::string>()),
                num("days_to_train", "{:.1f}"), num("expected_days", "{:.1f}"),
                r.contains("expected_cost") && r["expected_cost"].is_number()
                    ? model::format_money(r["expected_cost"].get<double>(), str("currency"))
                    : std::string("-"));
        }
    }
    return kExitOk;
}

// "tp8 pp2 dp4 mbs1 dist_opt rc:none" from a row (plan_json's layout fields).
std::string layout_words(const nlohmann::json& r) {
    auto i = [&](const char* k) { return r.contains(k) && r[k].is_number() ? r[k].get<int>() : 0; };
    auto s = [&](const char* k) { return r.contains(k) && r[k].is_string() ? r[k].get<std::string>() : std::string(); };
    std::string out = fmt::format("tp{} pp{}", i("tp"), i("pp"));
    if (i("vp") > 1) out += fmt::format(" vp{}", i("vp"));
    if (i("cp") > 1) out += fmt::format(" cp{}", i("cp"));
    out += fmt::format(" dp{} mbs{} {} rc:{}", i("dp"), i("micro_batch"), s("sharding"), s("recompute"));
    return out;
}

} // namespace trainsim::sim::cli
