#include "trainsim/model/input/validation_set.hpp"

#include "trainsim/model/accounting/layout.hpp"
#include "trainsim/model/core/errors.hpp"
#include "trainsim/model/input/loader.hpp"

#include "input_support.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <tuple>
#include <sstream>
#include <string_view>
#include <utility>

namespace trainsim::model {

namespace {

// Leading and trailing blanks of a cell are not data.
std::string trimmed(const std::string& s) {
    const auto first = s.find_first_not_of(" \t");
    if (first == std::string::npos) return {};
    return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

// RFC 4180 record reader: fields separated by commas, optionally quoted with "" escapes; a quoted
// field may span lines. Returns false at end of input.
bool read_record(std::istream& in, std::vector<std::string>& fields, int& line) {
    fields.clear();
    std::string cur;
    bool quoted = false, any = false;
    char c = 0;
    while (in.get(c)) {
        any = true;
        if (quoted) {
            if (c == '"') {
                if (in.peek() == '"') {
                    cur.push_back('"');
                    in.get();
                } else {
                    quoted = false;
                }
            } else {
                if (c == '\n') ++line;
                cur.push_back(c);
            }
        } else if (c == '"') {
            quoted = true;
        } else if (c == ',') {
            fields.push_back(std::move(cur));
            cur.clear();
        } else if (c == '\n') {
            ++line;
            break;
        } else if (c != '\r') {
            cur.push_back(c);
        }
    }
    if (!any) return false;
    fields.push_back(std::move(cur));
    for (auto& f : fields) f = trimmed(f);
    return true;
}

const std::vector<std::string> kRequired{"id", "source_group", "source", "model", "layers", "hidden", "heads",
                                         "kv_heads", "ffn", "ffn_type", "vocab", "seq_len", "gpu", "num_gpus", "tp",
                                         "pp", "vp", "cp", "dp", "sequence_parallel", "sharding", "micro_batch",
                                         "global_batch", "recompute", "precision", "framework", "kind",
                                         "tokens_per_s_per_gpu"};
// Columns the schema has that a row may leave out (../shared/validation/README.md: how the value
// was obtained, caveats): text the simulation does not read.
// `method` is trainsim's own addition, which the schema does not have: pretrain (blank), full,
// lora or qlora (LoRA at its defaults: rank 8 on every linear layer, qlora over NF4), so that
// fine-tuning runs can be checked in the same file (docs/trust.md).
const std::vector<std::string> kOptional{"derivation", "notes", "method"};

// A cell that is not one of its column's words but a word with a remark in parentheses ("none
// (DDP, FSDP=0)" in a Megatron-Bridge table, "zero1 (ds_config stage 1)"): a description the
// source wrote, read as blank (the framework's default, said in the row's choices). A bare word
// that is none of the column's ("zero4") is a mistake and stops the file at its cell.
bool is_description(const std::string& cell) { return cell.find('(') != std::string::npos; }

// A cell naming one of `table`'s values, case-blind, '-' and '_' alike ("FP8", "dist-opt").
template <class T>
std::optional<T> enum_value(const std::string& s, std::initializer_list<std::pair<const char*, T>> table) {
    const std::string key = canonical_name(s);
    for (const auto& [name, v] : table)
        if (key == canonical_name(name)) return v;
    return std::nullopt;
}

// The scenario key an integer column fills: its value gets that key's checks (check_key_value:
// the physical range), so that a row cannot ask for what a scenario may not (a 1e8-layer model).
std::optional<std::string> key_of_column(std::string_view column) {
    static const std::map<std::string_view, std::string> kKeyOf{
        {"layers", "model.layers"},         {"hidden", "model.hidden"},     {"heads", "model.heads"},
        {"kv_heads", "model.kv_heads"},     {"ffn", "model.ffn"},           {"vocab", "model.vocab"},
        {"seq_len", "training.seq_len"},    {"global_batch", "training.global_batch"},
        {"micro_batch", "training.micro_batch"}, {"num_gpus", "parallel.dp"}, {"tp", "parallel.tp"},
        {"pp", "parallel.pp"},              {"vp", "parallel.vp"},          {"cp", "parallel.cp"},
        {"dp", "parallel.dp"}};
    const auto key = kKeyOf.find(column);
    if (key == kKeyOf.end()) return std::nullopt;
    return key->second;
}

// The CSV column a scenario key stands for ("parallel.tp" -> "tp"), where the file has one; empty
// where the key is no column's (cluster.nics_per_node).
std::string column_of_key(const std::string& key, const std::map<std::string, std::size_t>& columns) {
    const auto leaf = key.substr(key.rfind('.') + 1);
    return columns.contains(leaf) ? leaf : std::string();
}

} // namespace

int ValidationRow::column_number(const std::string& name) const {
    if (columns == nullptr || name.empty()) return 0;
    const auto it = columns->find(name);
    return it == columns->end() ? 0 : it->second;
}

std::filesystem::path source_clusters_file(const std::filesystem::path& data_dir) {
    return data_dir / "validation" / "clusters.yaml";
}

std::vector<SourceCluster> load_source_clusters(const std::filesystem::path& file) {
    std::error_code ec;
    if (!std::filesystem::exists(file, ec)) return {};
    const std::string fname = file.string();
    detail::Diags diags;
    const auto text = detail::read_text(file, detail::Site{fname, 0, 0, ""}, diags);
    if (!text) throw ScenarioError(std::move(diags));
    const auto root = detail::parse_yaml(*text, fname, diags);
    if (!root) throw ScenarioError(std::move(diags));
    std::vector<SourceCluster> out;
    if (!root->IsMap()) {
        detail::report(diags, detail::site_at(fname, root->Mark(), ""),
                       "expected a map with the key 'clusters', got " + detail::describe(*root));
        throw ScenarioError(std::move(diags));
    }
    const YAML::Node* list = nullptr;
    detail::Site list_site{fname, 1, 1, "clusters"};
    const auto top = detail::fields_of(*root, fname, "", diags);
    for (const auto& f : top) {
        if (f.name == "clusters") {
            list = &f.value;
            list_site = f.value_site;
        } else {
            detail::report(diags, f.key_site, fmt::format("unknown key '{}'{}", f.name,
                                                          detail::did_you_mean(f.name, {"clusters"})));
        }
    }
    if (list == nullptr) detail::report(diags, list_site, "missing: the list of sources and their clusters");
    else if (!list->IsSequence())
        detail::report(diags, list_site, "expected a list of entries, got " + detail::describe(*list));
    else {
        static const std::vector<std::string> kKeys{"source",   "gpus_per_node", "nics_per_node",
                                                    "nic_rate", "stated",        "assumed"};
        std::map<std::string, std::pair<std::size_t, int>> first_of;  // each source prefix: its entry's index, line
        for (std::size_t i = 0; i < list->size(); ++i) {
            const YAML::Node entry = (*list)[i];
            const std::string prefix = fmt::format("clusters[{}]", i);
            auto at = detail::site_at(fname, entry.Mark(), prefix);
            if (at.line == 0) at = list_site;
            if (!entry.IsMap()) {
                detail::report(diags, at, "expected a map (source, stated and the cluster's keys), got " +
                                              detail::describe(entry));
                continue;
            }
            SourceCluster c;
            c.file = fname;
            c.line = at.line;
            // Whether each key was written at all (a wrong value is reported once, as wrong, not
            // also as missing).
            bool wrote_source = false, wrote_stated = false, wrote_node = false, source_ok = false;
            for (const auto& f : detail::fields_of(entry, fname, prefix, diags)) {
                // Each value is checked as the scenario key it stands for (same ranges, same words).
                auto as_key = [&](const std::string& key) {
                    const auto problems = check_key_value(key, f.value.Scalar());
                    for (const auto& m : problems) detail::report(diags, f.value_site, m);
                    return problems.empty();
                };
                if (f.name == "source") {
                    // One prefix, or a list of them (one source's tables at several commits).
                    wrote_source = true;
                    if (f.value.IsSequence()) {
                        source_ok = f.value.size() > 0;
                        if (!source_ok) detail::report(diags, f.value_site, "an empty list: give at least one prefix");
                        for (std::size_t k = 0; k < f.value.size(); ++k) {
                            auto item_at =
                                detail::site_at(fname, f.value[k].Mark(), fmt::format("{}[{}]", f.key_site.key, k));
                            if (item_at.line == 0) item_at = f.value_site;
                            if (auto v = detail::read_string(f.value[k], item_at, diags)) c.sources.push_back(*v);
                            else source_ok = false;
                        }
                    } else if (auto v = detail::read_string(f.value, f.value_site, diags)) {
                        c.sources.push_back(*v);
                        source_ok = true;
                    }
                } else if (f.name == "stated") {
                    wrote_stated = true;
                    if (auto v = detail::read_string(f.value, f.value_site, diags)) c.stated = *v;
                } else if (f.name == "assumed") {
                    if (auto v = detail::read_string(f.value, f.value_site, diags)) c.assumed = *v;
                } else if (f.name == "gpus_per_node") {
                    wrote_node = true;
                    const auto v = detail::read_int(f.value, f.value_site, 1, diags);
                    if (v && as_key("cluster.gpus_per_node")) c.cluster.gpus_per_node = *v;
                } else if (f.name == "nics_per_node") {
                    wrote_node = true;
                    const auto v = detail::read_int(f.value, f.value_site, 0, diags);
                    if (v && as_key("cluster.nics_per_node")) c.cluster.nics_per_node = *v;
                } else if (f.name == "nic_rate") {
                    wrote_node = true;
                    if (auto v = detail::read_with_unit(f.value, f.value_site, "a bandwidth such as 200Gbit/s",
                                                        parse_bandwidth, diags);
                        v && as_key("cluster.nic_rate"))
                        c.cluster.nic_rate = *v;
                } else {
                    detail::report(diags, f.key_site, fmt::format("unknown key '{}'{} (known: {})", f.name,
                                                                  detail::did_you_mean(f.name, kKeys),
                                                                  detail::join_list(kKeys)));
                }
            }
            if (!wrote_source) detail::report(diags, at, "missing 'source': the prefix of the rows' source cell");
            if (!wrote_stated)
                detail::report(diags, at, "missing 'stated': where the source states its cluster (a fact without its "
                                          "source is not taken)");
            if (!wrote_node) detail::report(diags, at, "states nothing: give gpus_per_node, nics_per_node or nic_rate");
            if (source_ok) {
                for (const auto& mine : c.sources) {
                    const auto [first, fresh] = first_of.emplace(mine, std::pair{i, c.line});
                    if (fresh) continue;
                    detail::report(diags, at,
                                   first->second.first == i
                                       ? fmt::format("source '{}' is listed twice", mine)
                                       : fmt::format("source '{}' is already given at line {}", mine,
                                                     first->second.second));
                }
            }
            out.push_back(std::move(c));
        }
    }
    if (!diags.empty()) throw ScenarioError(std::move(diags));
    return out;
}

std::vector<ValidationRow> load_validation_csv(const std::filesystem::path& file, const std::filesystem::path& data_dir,
                                               const ValidationCluster& stated, std::vector<Diagnostic>* warnings) {
    std::vector<Diagnostic> ignored;
    if (warnings == nullptr) warnings = &ignored;
    // What the sources state about their clusters; the command line's statement wins over it.
    const auto source_clusters = load_source_clusters(source_clusters_file(data_dir));
    const std::string fname = file.string();
    std::istringstream in;
    {
        detail::Diags read_problems;
        // Validation files are larger than scenarios (a 100k-row file is ~30 MiB) but bounded too.
        auto text = detail::read_text(file, detail::Site{fname, 0, 0, ""}, read_problems, kMaxDataFileBytes);
        if (!text) throw ScenarioError(std::move(read_problems));
        in.str(std::move(*text));
    }
    std::vector<std::string> header;
    int line = 1;
    if (!read_record(in, header, line)) throw ScenarioError({Diagnostic{fname, 1, 1, "", "the file is empty"}});
    // A UTF-8 byte-order mark (spreadsheet exports) is not part of the first column's name.
    if (constexpr std::string_view bom = "\xEF\xBB\xBF"; header.front().starts_with(bom))
        header.front() = trimmed(header.front().substr(bom.size()));
    std::map<std::string, std::size_t> col;
    std::vector<Diagnostic> diags;
    std::vector<std::string> known = kRequired;
    known.insert(known.end(), kOptional.begin(), kOptional.end());
    for (std::size_t i = 0; i < header.size(); ++i) {
        const int at = static_cast<int>(i) + 1;
        const auto [first, fresh] = col.emplace(header[i], i);
        if (!fresh)
            diags.push_back({fname, 1, at, header[i],
                             fmt::format("column '{}' is given twice (first as column {}): which one holds the "
                                         "data is unclear",
                                         header[i], first->second + 1)});
        else if (header[i].empty())
            warnings->push_back({fname, 1, at, "", "a column without a name (a trailing comma in the header?): ignored"});
        else if (std::find(known.begin(), known.end(), header[i]) == known.end())
            // Read but not used: said, not refused, so that a published file with a column of its
            // own (a date, a link) is still read.
            warnings->push_back({fname, 1, at, header[i],
                                 fmt::format("column '{}' is not in the schema{}: ignored (the schema's columns: {})",
                                             header[i], detail::did_you_mean(header[i], known), fmt::join(known, ", "))});
    }
    for (const auto& k : kRequired)
        if (!col.contains(k)) diags.push_back({fname, 1, 1, k, "missing column"});
    if (!diags.empty()) throw ScenarioError(std::move(diags));
    // Every row's skipped reason names its column by number too (validate_rows blames tp / pp).
    auto columns = std::make_shared<std::map<std::string, int>>();
    for (const auto& [name, i] : col) (*columns)[name] = static_cast<int>(i) + 1;
    // Each id's row: ids name rows (validate --row, --fit-on's in-fit rows), so one id is one row.
    std::map<std::string, int> line_of_id;

    std::map<std::string, HardwareProfile> profiles;
    std::vector<ValidationRow> rows;
    std::vector<std::string> f;
    for (int start = line; read_record(in, f, line); start = line) {
        if (f.size() == 1 && f[0].empty()) continue;  // blank line
        if (f.size() != header.size()) {
            diags.push_back({fname, start, 1, "", fmt::format("{} fields, the header has {}", f.size(), header.size())});
            continue;
        }
        // Every cell is text the JSON output may carry (ids, sources, notes): UTF-8 only.
        bool bad_text = false;
        for (std::size_t i = 0; i < f.size(); ++i)
            if (auto bad = detail::utf8_message(f[i]); !bad.empty()) {
                diags.push_back({fname, start, static_cast<int>(i) + 1, header[i], std::move(bad)});
                bad_text = true;
            }
        if (bad_text) continue;
        auto cell = [&](const std::string& k) -> const std::string& { return f[col.at(k)]; };
        auto column_of = [&](const std::string& k) { return static_cast<int>(col.at(k)) + 1; };
        // A blank cell is data ("the source does not say"), not a malformed file: a blank the
        // simulation cannot do without makes this row a skipped one, with the columns named.
        std::vector<std::string> blank_required;
        auto num = [&](const std::string& k, bool required) -> std::optional<double> {
            const auto& s = cell(k);
            if (s.empty()) {
                if (required) blank_required.push_back(k);
                return std::nullopt;
            }
            double v = 0;
            auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
            // Every number of the schema is a count or a rate: zero is as wrong as negative (a
            // zero GPU count or measured rate has no step time to compare).
            if (ec != std::errc() || p != s.data() + s.size() || !(v > 0) || !std::isfinite(v)) {
                diags.push_back({fname, start, column_of(k), k, fmt::format("'{}' is not a positive number", s)});
                return std::nullopt;
            }
            return v;
        };
        auto integer = [&](const std::string& k, bool required, int fallback) {
            auto v = num(k, required);
            if (!v) return fallback;
            if (*v != std::floor(*v) || *v > 1e9) {
                diags.push_back({fname, start, column_of(k), k, fmt::format("'{}' is not a whole number", cell(k))});
                return fallback;
            }
            if (const auto key = key_of_column(k)) {
                const auto problems = check_key_value(*key, fmt::format("{:.0f}", *v));
                for (const auto& m : problems) diags.push_back({fname, start, column_of(k), k, m});
                if (!problems.empty()) return fallback;
            }
            return static_cast<int>(*v);
        };

        ValidationRow r;
        r.line = start;
        r.columns = columns;
        // Every cell the row's plan follows from (all but the id, the measurement and the text
        // about it): rows with the same key simulate the same plan.
        for (std::size_t i = 0; i < f.size(); ++i)
            if (header[i] != "id" && header[i] != "tokens_per_s_per_gpu" && header[i] != "source_group" &&
                header[i] != "derivation" && header[i] != "notes")
                r.plan_key += f[i] + '\x1f';
        r.id = cell("id");
        if (const auto [first, fresh] = line_of_id.emplace(r.id, start); !fresh)
            warnings->push_back({fname, start, column_of("id"), "id",
                                 fmt::format("id '{}' is also the id of the row at line {}: both are read, but "
                                             "validate --row and --fit-on's in-fit rows name rows by id",
                                             r.id, first->second)});
        r.source_group = cell("source_group");
        r.source = cell("source");
        r.gpu = cell("gpu");
        // A profile id (not a path) is matched as a canonical name: "H100-SXM", "h100_sxm".
        if (r.gpu.find('/') == std::string::npos && !r.gpu.ends_with(".yaml")) {
            const std::string written = r.gpu;
            r.gpu = canonical_name(written);
            if (r.gpu != written) r.choices.push_back(fmt::format("gpu={} (written '{}')", r.gpu, written));
        }
        r.framework = cell("framework");
        r.kind = canonical_name(cell("kind"));
        std::replace(r.kind.begin(), r.kind.end(), '-', '_'); // "End-to-end" -> end_to_end
        if (r.kind.empty()) {
            r.kind = "step";
            r.choices.push_back("kind=step (blank: a steady-state throughput)");
        }
        r.measured_tokens_per_s_per_gpu = num("tokens_per_s_per_gpu", true).value_or(0);
        const auto fw = framework_profile(r.framework);
        r.choices.push_back("framework: " + fw.why);
        // A misspelt family ("megatorn-lm") is worth a word: it is modelled as a generic stack.
        if (!known_framework(r.framework))
            if (auto hint = detail::did_you_mean(canonical_name(r.framework), framework_families()); !hint.empty())
                r.choices.push_back(fmt::format("framework '{}' is not a known family{}", r.framework, hint));

        Plan& p = r.plan;
        p.name = "row " + r.id;
        const std::size_t diags_before_model = diags.size();
        ModelArch& m = p.model;
        m.name = cell("model");
        m.source = r.source;
        m.layers = integer("layers", true, 1);
        m.hidden = integer("hidden", true, 1);
        // Blank heads: 128-wide heads, the head size of GPT-3's 6.7B and larger, Megatron's GPT
        // recipes and the Llama family.
        constexpr int kDefaultHeadDim = 128;
        m.heads = integer("heads", false, std::max(1, m.hidden / kDefaultHeadDim));
        if (cell("heads").empty())
            r.choices.push_back(fmt::format("heads={} (blank: {}-wide heads)", m.heads, kDefaultHeadDim));
        m.kv_heads = integer("kv_heads", false, m.heads);
        if (cell("kv_heads").empty()) r.choices.push_back("kv_heads = heads (blank: multi-head attention)");
        m.head_dim = m.heads > 0 ? m.hidden / m.heads : 1;
        // The shape rules a scenario's model obeys (the loader's own check), once hidden, heads and
        // kv_heads were read without a problem.
        // A row the shape rules refuse is skipped with why (below), not simulated into a NaN.
        std::optional<std::tuple<std::string, std::string, std::string>> bad_cell;
        if (diags.size() == diags_before_model && !cell("hidden").empty())
            for (const auto& prob : detail::check_model_shape(m, /*head_dim_written=*/false)) {
                const std::string column = prob.key == "kv_heads" ? "kv_heads" : "heads";
                bad_cell.emplace("model shape a scenario refuses", column,
                                 cell(column).empty() ? fmt::format("{} ({} is blank: {})", prob.message, column,
                                                                    column == "heads" ? "128-wide heads"
                                                                                      : "kv_heads = heads")
                                                      : prob.message);
                break;
            }
        m.vocab = integer("vocab", true, 1);
        if (auto t = enum_value<FfnType>(cell("ffn_type"),
                                         {{"swiglu", FfnType::swiglu}, {"gelu", FfnType::gelu}, {"relu2", FfnType::relu2}}))
            m.ffn_type = *t;
        else if (cell("ffn_type").empty())
            blank_required.push_back("ffn_type");
        else
            diags.push_back({fname, start, column_of("ffn_type"), "ffn_type",
                             fmt::format("'{}' is not one of swiglu, gelu, relu2", cell("ffn_type"))});
        // Blank ffn: Megatron-LM's default width (arguments.py): 4 x hidden; with SwiGLU two
        // thirds of it, rounded down to a multiple of 64, so the gated MLP keeps the parameters
        // of the 4h one.
        const int default_ffn = m.ffn_type == FfnType::swiglu ? (4 * m.hidden * 2 / 3) / 64 * 64 : 4 * m.hidden;
        m.ffn = integer("ffn", false, std::max(1, default_ffn));
        if (cell("ffn").empty() && !cell("ffn_type").empty())
            r.choices.push_back(
                fmt::format("ffn={} (blank: Megatron-LM's default width for {})", m.ffn, cell("ffn_type")));

        p.training.seq_len = integer("seq_len", true, 1);
        p.training.global_batch = integer("global_batch", true, 1);
        p.training.tokens = 1e12;  // throughput does not depend on it
        const int gpus = integer("num_gpus", true, 1);
        auto& par = p.parallel;
        par.tp = integer("tp", false, 1);
        par.pp = integer("pp", false, 1);
        par.cp = integer("cp", false, 1);
        par.dp = integer("dp", false, 0);
        // A blank degree: dp follows from the GPU count; so does tp, pp or cp when it is the only
        // blank one and dp is given (the GPUs the others leave); otherwise a blank degree is the
        // frameworks' default, 1. Context parallelism is newer than most sources: a blank cp only
        // competes for the GPUs when tp and pp are both given.
        const bool dp_given = par.dp != 0;
        const bool tp_pp_given = !cell("tp").empty() && !cell("pp").empty();
        const int blanks = static_cast<int>(cell("tp").empty()) + static_cast<int>(cell("pp").empty()) +
                           static_cast<int>(tp_pp_given && cell("cp").empty());
        for (auto [name, deg] : {std::pair<const char*, int*>{"tp", &par.tp}, {"pp", &par.pp}, {"cp", &par.cp}}) {
            if (!cell(name).empty()) continue;
            const bool is_cp = std::string_view(name) == "cp";
            const int others = par.tp * par.pp * par.cp * par.dp; // the blank degree is still 1
            if (dp_given && blanks == 1 && (!is_cp || tp_pp_given) && gpus % others == 0 && gpus / others > 1) {
                *deg = gpus / others;
                r.choices.push_back(fmt::format("{}={} (blank: the GPUs the other degrees leave)", name, *deg));
            } else if (!is_cp) {
                r.choices.push_back(fmt::format("{}=1 (blank)", name));
                r.defaulted_degrees.push_back(name);
            }
        }
        par.vp = integer("vp", false, 1);
        r.vp_cell_blank = cell("vp").empty();
        r.vp_blank = r.vp_cell_blank && par.pp > 1;
        r.dp_blank = !dp_given;
        if (!dp_given) {
            par.dp = derive_dp(gpus, par.tp, par.pp, par.cp);
            r.choices.push_back(fmt::format("dp={} (blank: from the GPU count)", par.dp));
        }
        if (!cell("micro_batch").empty()) {
            p.training.micro_batch = integer("micro_batch", false, 1);
            // A global batch that is not a whole number of micro-batches on every data-parallel
            // rank (Composer splits 48 into 11, 11, 11, 11, 4): simulated at the nearest whole
            // number, at least one micro-batch per rank, since tokens/s/GPU hardly depends on the
            // count. Megatron and NeMo refuse such a batch; a source that reports one ran it.
            const long per_step = static_cast<long>(p.training.micro_batch) * par.dp;
            const int written = p.training.global_batch;
            if (per_step > 0 && written > 0 && written % per_step != 0 && r.defaulted_degrees.empty()) {
                const long steps =
                    std::max(1L, std::lround(static_cast<double>(written) / static_cast<double>(per_step)));
                p.training.global_batch = static_cast<int>(steps * per_step);
                r.choices.push_back(fmt::format(
                    "global_batch={} (written {}: not a whole number of micro-batches of {} on {} data-parallel ranks; "
                    "the nearest that is)",
                    p.training.global_batch, written, p.training.micro_batch, par.dp));
            }
        } else {
            p.training.micro_batch = 1;
            r.micro_batch_blank = true;
        }
        if (cell("sequence_parallel").empty()) {
            r.sequence_parallel_blank = true;
            par.sequence_parallel = par.tp > 1 && fw.parallel.sequence_parallel;
            r.choices.push_back(fmt::format("sequence_parallel={} (blank: {})", par.sequence_parallel, fw.name));
        } else {
            const auto sp = enum_value<bool>(
                cell("sequence_parallel"),
                {{"true", true}, {"false", false}, {"yes", true}, {"no", false}, {"1", true}, {"0", false}});
            if (!sp)
                diags.push_back({fname, start, column_of("sequence_parallel"), "sequence_parallel",
                                 fmt::format("'{}' is not true or false", cell("sequence_parallel"))});
            par.sequence_parallel = sp.value_or(false);
        }
        if (auto s = enum_value<Sharding>(cell("sharding"), {{"none", Sharding::none}, {"dist_opt", Sharding::dist_opt},
                                                              {"zero1", Sharding::zero1}, {"zero2", Sharding::zero2},
                                                              {"zero3", Sharding::zero3}, {"fsdp", Sharding::fsdp},
                                                              {"hsdp", Sharding::hsdp}})) {
            par.sharding = *s;
        } else if (!cell("sharding").empty() && !is_description(cell("sharding"))) {
            if (!bad_cell)
                bad_cell.emplace("cell not one of its column's words", "sharding",
                                 fmt::format("'{}' is not one of none, dist_opt, zero1, zero2, zero3, fsdp, hsdp{}",
                                             cell("sharding"),
                                             detail::did_you_mean(cell("sharding"), {"none", "dist_opt", "zero1", "zero2",
                                                                                     "zero3", "fsdp", "hsdp"})));
        } else {
            // Blank, or a description rather than a word: the framework's default, said. A
            // published file is still read when a cell holds a description ("none (DDP, FSDP=0)"
            // in a Megatron-Bridge table, where FSDP=0 does not rule out the distributed optimizer
            // its recipes set).
            par.sharding = fw.parallel.sharding;
            r.sharding_blank = true;
            r.choices.push_back(cell("sharding").empty()
                                    ? fmt::format("sharding={} (blank: {})", to_string(par.sharding), fw.name)
                                    : fmt::format("sharding={} ('{}' is none of none, dist_opt, zero1, zero2, zero3, "
                                                  "fsdp, hsdp: taken as blank, {})",
                                                  to_string(par.sharding), cell("sharding"), fw.name));
        }
        if (auto rc = enum_value<Recompute>(cell("recompute"), {{"none", Recompute::none},
                                                                  {"selective", Recompute::selective},
                                                                  {"full", Recompute::full}})) {
            par.recompute = *rc;
        } else if (!cell("recompute").empty() && !is_description(cell("recompute"))) {
            if (!bad_cell)
                bad_cell.emplace("cell not one of its column's words", "recompute",
                                 fmt::format("'{}' is not one of none, selective, full{}", cell("recompute"),
                                             detail::did_you_mean(cell("recompute"), {"none", "selective", "full"})));
        } else {
            // Blank, or a description (see sharding): tuned as the benchmark was.
            par.recompute = default_recompute(fw, p.model);
            r.recompute_blank = true;
            if (!cell("recompute").empty())
                r.choices.push_back(fmt::format("recompute: '{}' is none of none, selective, full: taken as blank",
                                                cell("recompute")));
        }
        if (auto pr = enum_value<Precision>(
                cell("precision"), {{"bf16", Precision::bf16}, {"fp16", Precision::fp16}, {"fp8", Precision::fp8}})) {
            p.precision = *pr;
        } else if (cell("precision").empty()) {
            p.precision = fw.precision;
            r.choices.push_back(fmt::format("precision={} (blank: {})", to_string(p.precision), fw.name));
        } else
            diags.push_back({fname, start, column_of("precision"), "precision",
                             fmt::format("'{}' is not one of bf16, fp16, fp8", cell("precision"))});
        if (col.contains("method") && !cell("method").empty()) {
            if (auto me = enum_value<Method>(cell("method"), {{"pretrain", Method::pretrain},
                                                              {"full", Method::full},
                                                              {"lora", Method::lora},
                                                              {"qlora", Method::qlora}})) {
                p.training.method = *me;
                if (*me == Method::qlora) p.training.base_format = BaseFormat::nf4;
            } else {
                diags.push_back({fname, start, column_of("method"), "method",
                                 fmt::format("'{}' is not one of pretrain, full, lora, qlora", cell("method"))});
            }
        }
        // The framework's behaviours; the layout columns were read above (blank ones as it would).
        p.parallel.framework = r.framework;
        apply_framework_profile(fw, p, [](std::string_view key) {
            return key == "parallel.sharding" || key == "parallel.recompute" || key == "parallel.sequence_parallel";
        });

        // A row that cannot be simulated: why, of what kind, and the column it is about.
        auto skip = [&r](std::string kind, std::string column, std::string reason) {
            r.skip_kind = std::move(kind);
            r.skip_column = std::move(column);
            r.skip_reason = std::move(reason);
        };
        if (bad_cell) {
            skip(std::get<0>(*bad_cell), std::get<1>(*bad_cell), std::get<2>(*bad_cell));
            rows.push_back(std::move(r));
            continue;
        }
        if (r.kind != "step" && r.kind != "end_to_end" && blank_required.empty()) {
            skip("kind not in the schema", "kind", fmt::format("kind '{}' is not one of step, end_to_end", r.kind));
            rows.push_back(std::move(r));
            continue;
        }
        if (!blank_required.empty()) {
            skip("blank cell the simulation needs", blank_required.front(),
                 fmt::format("blank {}: the simulation needs {} (the source does not say)",
                             fmt::join(blank_required, ", "), blank_required.size() == 1 ? "it" : "them"));
            rows.push_back(std::move(r));
            continue;
        }
        // Hardware and cluster: the node the caller states for the file, else the profile's typical
        // node (GPUs and NICs per node).
        try {
            auto it = profiles.find(r.gpu);
            if (it == profiles.end()) it = profiles.emplace(r.gpu, resolve_profile(r.gpu, file.parent_path(), data_dir)).first;
            p.hardware = it->second;
        } catch (const InputError& e) {
            // The profile's own problem, with its file, line and key (a broken profile is not an
            // unknown one).
            skip("GPU profile cannot be used", "gpu",
                 fmt::format("GPU profile '{}' cannot be used: {}", r.gpu,
                             e.diagnostics().empty() ? std::string(e.what()) : e.diagnostics().front().format()));
            rows.push_back(std::move(r));
            continue;
        }
        p.cluster.gpu = r.gpu;
        // The node: what the command line states for the file, else what the row's source states
        // (the longest matching prefix), else the profile's typical node; field by field.
        const SourceCluster* from_source = nullptr;
        std::size_t matched = 0;
        for (const auto& c : source_clusters)
            for (const auto& prefix : c.sources)
                if (r.source.starts_with(prefix) && (from_source == nullptr || prefix.size() > matched)) {
                    from_source = &c;
                    matched = prefix.size();
                }
        const std::string source_at =
            from_source != nullptr ? fmt::format("{}:{}", from_source->file, from_source->line) : std::string();
        // Where one field comes from: "command line", the source's entry (file:line) or "profile".
        auto origin = [&](bool on_command_line, bool in_entry) {
            return on_command_line ? std::string(kFromCommandLine) : in_entry ? source_at : std::string(kFromProfile);
        };
        const ValidationCluster entry = from_source != nullptr ? from_source->cluster : ValidationCluster{};
        r.cluster_origin.gpus_per_node = origin(stated.gpus_per_node > 0, entry.gpus_per_node > 0);
        r.cluster_origin.nics_per_node = origin(stated.nics_per_node >= 0, entry.nics_per_node >= 0);
        r.cluster_origin.nic_rate = origin(stated.nic_rate.has_value(), entry.nic_rate.has_value());
        const int node_gpus = stated.gpus_per_node > 0  ? stated.gpus_per_node
                              : entry.gpus_per_node > 0 ? entry.gpus_per_node
                                                        : p.hardware.default_gpus_per_node;
        p.cluster.gpus_per_node = std::min(gpus, node_gpus);
        p.cluster.nodes = (gpus + p.cluster.gpus_per_node - 1) / p.cluster.gpus_per_node;
        p.cluster.nics_per_node = stated.nics_per_node >= 0  ? stated.nics_per_node
                                  : entry.nics_per_node >= 0 ? entry.nics_per_node
                                                             : p.hardware.default_nics_per_node;
        p.cluster.nic_rate = stated.nic_rate ? *stated.nic_rate
                             : entry.nic_rate ? *entry.nic_rate
                                              : p.hardware.default_nic_rate;
        // The node fabric of the GPU's typical node (NVLink bridge pairs for bridged PCIe cards).
        if (p.hardware.nvlink_bridge_pairs) p.cluster.intra = IntraFabric::nvlink_bridge;
        // Said per origin, in the order command line, source, profile.
        std::vector<std::string> said;
        for (const auto& from : {std::string(kFromCommandLine), source_at, std::string(kFromProfile)}) {
            std::vector<std::string> fields;
            if (r.cluster_origin.gpus_per_node == from) fields.emplace_back("GPUs per node");
            if (r.cluster_origin.nics_per_node == from) fields.emplace_back("NICs");
            if (r.cluster_origin.nic_rate == from) fields.emplace_back("NIC rate");
            if (fields.empty() || from.empty()) continue;
            const auto what = fmt::format("{}", fmt::join(fields, ", "));
            if (from == kFromCommandLine) said.push_back(what + " as stated for the file on the command line");
            else if (from == kFromProfile) said.push_back(what + " from the profile's typical node");
            else
                said.push_back(fmt::format("{} as its source states it ({}{})", what, from,
                                           from_source->assumed.empty() ? "" : "; assumed: " + from_source->assumed));
        }
        r.choices.push_back(fmt::format("cluster: {} nodes x {} GPUs, {} NICs x {} per node ({})", p.cluster.nodes,
                                        p.cluster.gpus_per_node, p.cluster.nics_per_node,
                                        format_bandwidth(p.cluster.nic_rate), fmt::join(said, "; ")));
        if (p.cluster.nodes * p.cluster.gpus_per_node != gpus) {
            skip("GPUs do not fill whole nodes", "num_gpus",
                 fmt::format("{} GPUs do not fill whole nodes of {}", gpus, p.cluster.gpus_per_node));
        }
        // With blank degrees left at the default 1, validate chooses them (and checks the layout).
        if (r.skip_reason.empty() && r.defaulted_degrees.empty()) {
            const auto problems = check_layout(p);
            std::string reason;
            for (const auto& prob : problems) reason += (reason.empty() ? "" : "; ") + prob.key + ": " + prob.message;
            if (!problems.empty()) skip("layout breaks a rule", column_of_key(problems.front().key, col), reason);
        }
        rows.push_back(std::move(r));
    }
    if (!diags.empty()) throw ScenarioError(std::move(diags));
    return rows;
}

} // namespace trainsim::model
