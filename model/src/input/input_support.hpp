// Private helpers of the one strict loader (loader.cpp, key_bindings.cpp, profile_reader.cpp, profile_writer.cpp, hf_config.cpp): locations,
// diagnostics, typo suggestions and typed readers of YAML scalars. Every reader reports what is
// wrong as a Diagnostic and returns nothing; none throws for bad input, so callers collect every
// problem of a file before throwing.
#pragma once

#include "trainsim/model/core/errors.hpp"
#include "trainsim/model/core/file_io.hpp"
#include "trainsim/model/core/scenario.hpp"
#include "trainsim/model/core/units.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <climits>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace trainsim::model::detail {

using Diags = std::vector<Diagnostic>;

// A place in an input file: 1-based line and column (0 = unknown) and the key path there.
struct Site {
    std::string file;
    int line = 0;
    int col = 0;
    std::string key;
};

inline void report(Diags& out, const Site& at, std::string message) {
    out.push_back(Diagnostic{at.file, at.line, at.col, at.key, std::move(message)});
}

// yaml-cpp marks are 0-based; a null mark (nodes built in memory) becomes "unknown" (0).
inline Site site_at(const std::string& file, const YAML::Mark& mark, std::string key) {
    if (mark.is_null() || mark.line < 0) return Site{file, 0, 0, std::move(key)};
    return Site{file, mark.line + 1, mark.column + 1, std::move(key)};
}

inline std::string join_key(const std::string& prefix, std::string_view name) {
    return prefix.empty() ? std::string(name) : fmt::format("{}.{}", prefix, name);
}

inline std::string join_list(const std::vector<std::string>& items) {
    std::string out;
    for (const auto& s : items) {
        if (!out.empty()) out += ", ";
        out += s;
    }
    return out;
}

// What a node is, for messages ("expected an integer, got a map").
inline std::string describe(const YAML::Node& node) {
    switch (node.Type()) {
    case YAML::NodeType::Null: return "nothing";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a map";
    case YAML::NodeType::Scalar: return fmt::format("'{}'", node.Scalar());
    case YAML::NodeType::Undefined: break;
    }
    return "nothing";
}

// Levenshtein distance, case-insensitive.
inline std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        cur[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                              std::tolower(static_cast<unsigned char>(b[j - 1]));
            cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (same ? 0U : 1U)});
        }
        std::swap(prev, cur);
    }
    return prev[b.size()];
}

// The candidate closest to `word` if it is close enough to be a typo (at most a third of the
// word's letters changed, at least one allowed), else "". Ties go to the first candidate.
inline std::string closest(std::string_view word, const std::vector<std::string>& candidates) {
    const std::size_t limit = std::max<std::size_t>(1, word.size() / 3);
    std::string best;
    std::size_t best_d = limit + 1;
    for (const auto& c : candidates) {
        const std::size_t d = edit_distance(word, c);
        if (d < best_d && d < std::max(word.size(), c.size())) {
            best = c;
            best_d = d;
        }
    }
    return best;
}

// " (did you mean 'x'?)" or "".
inline std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
    const std::string c = closest(word, candidates);
    return c.empty() ? std::string() : fmt::format(" (did you mean '{}'?)", c);
}

// One `key: value` of a YAML map with where each part was written.
struct Field {
    std::string name;
    YAML::Node value;
    Site key_site;    // where the key was written; key = full path
    Site value_site;  // where the value was written (the key's place when the value is empty)
};

// The entries of a map node, in file order. Non-scalar keys and repeated keys are reported and
// left out. Precondition: map.IsMap().
inline std::vector<Field> fields_of(const YAML::Node& map, const std::string& file, const std::string& prefix,
                                    Diags& out) {
    std::vector<Field> fields;
    for (auto it = map.begin(); it != map.end(); ++it) {
        const YAML::Node k = it->first;  // a copy: `it->` yields a temporary proxy
        if (!k.IsScalar()) {
            report(out, site_at(file, k.Mark(), prefix), "keys must be plain names, got " + describe(k));
            continue;
        }
        Field f;
        f.name = k.Scalar();
        f.value = it->second;
        f.key_site = site_at(file, k.Mark(), join_key(prefix, f.name));
        f.value_site = f.value.IsNull() ? f.key_site : site_at(file, f.value.Mark(), f.key_site.key);
        if (f.value_site.line == 0) f.value_site = f.key_site;
        auto dup = std::find_if(fields.begin(), fields.end(), [&](const Field& g) { return g.name == f.name; });
        if (dup != fields.end()) {
            report(out, f.key_site,
                   fmt::format("key '{}' is written twice (first at line {})", f.name, dup->key_site.line));
            continue;
        }
        fields.push_back(std::move(f));
    }
    return fields;
}

// Where text is not valid UTF-8: the offset of the first byte that does not decode, that byte,
// and the text as JSON with U+FFFD in its place (text_checks.cpp). Every text of an input must
// be UTF-8: the JSON, trace and HTML outputs carry names, titles and currencies as they are.
struct Utf8Problem {
    std::size_t offset = 0;
    unsigned byte = 0;
    std::string readable;
};
std::optional<Utf8Problem> utf8_problem(std::string_view text);

// The message for text that is not UTF-8, or "" when it is.
inline std::string utf8_message(std::string_view text) {
    const auto p = utf8_problem(text);
    if (!p) return {};
    return fmt::format("is not valid UTF-8 text: byte 0x{:02X} at offset {} of {} does not decode; save the file "
                       "as UTF-8",
                       p->byte, p->offset, p->readable);
}

// --- typed readers: each returns nullopt after reporting at `at` ---

// A non-empty scalar (any spelling), as written.
inline std::optional<std::string> read_scalar(const YAML::Node& node, const Site& at, std::string_view what,
                                              Diags& out) {
    if (node.IsNull()) {
        report(out, at, fmt::format("has no value; expected {}", what));
        return std::nullopt;
    }
    if (!node.IsScalar()) {
        report(out, at, fmt::format("expected {}, got {}", what, describe(node)));
        return std::nullopt;
    }
    if (auto bad = utf8_message(node.Scalar()); !bad.empty()) {
        report(out, at, std::move(bad));
        return std::nullopt;
    }
    return node.Scalar();
}

inline std::optional<std::string> read_string(const YAML::Node& node, const Site& at, Diags& out) {
    auto s = read_scalar(node, at, "a string", out);
    if (s && s->empty()) {
        report(out, at, "must not be empty");
        return std::nullopt;
    }
    return s;
}

// The whole of `text` as a number of type T, or why not.
template <class T> struct Parsed {
    T value{};
    std::errc error{};  // invalid_argument: not (wholly) a number; result_out_of_range: too large
};
template <class T> Parsed<T> parse_whole(std::string_view text) {
    Parsed<T> p;
    const char* last = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), last, p.value);
    p.error = ec != std::errc() ? ec : (ptr != last ? std::errc::invalid_argument : std::errc());
    return p;
}

// A decimal integer in [min, INT_MAX].
inline std::optional<int> read_int(const YAML::Node& node, const Site& at, int min, Diags& out) {
    auto s = read_scalar(node, at, "an integer", out);
    if (!s) return std::nullopt;
    const auto [v, error] = parse_whole<long long>(*s);
    if (error == std::errc::result_out_of_range || (error == std::errc() && v > INT_MAX)) {
        report(out, at, fmt::format("integer '{}' is too large", *s));
        return std::nullopt;
    }
    if (error != std::errc()) {
        report(out, at, fmt::format("expected an integer, got '{}'", *s));
        return std::nullopt;
    }
    if (v < min) {
        report(out, at, fmt::format("must be at least {}, got {}", min, v));
        return std::nullopt;
    }
    return static_cast<int>(v);
}

inline std::optional<bool> read_bool(const YAML::Node& node, const Site& at, Diags& out) {
    auto s = read_scalar(node, at, "true or false", out);
    if (!s) return std::nullopt;
    bool v = false;
    if (!YAML::convert<bool>::decode(node, v)) {
        report(out, at, fmt::format("expected true or false, got '{}'", *s));
        return std::nullopt;
    }
    return v;
}

// A plain finite number (no unit) in [min, max].
inline std::optional<double> read_number(const YAML::Node& node, const Site& at, double min, double max,
                                         Diags& out) {
    auto s = read_scalar(node, at, "a plain number", out);
    if (!s) return std::nullopt;
    const auto [v, error] = parse_whole<double>(*s);
    if (error != std::errc() || !std::isfinite(v)) {
        report(out, at, fmt::format("expected a plain number, got '{}'", *s));
        return std::nullopt;
    }
    if (v < min || v > max) {
        report(out, at,
               std::isinf(max) ? fmt::format("must be at least {}, got {}", min, v)
                               : fmt::format("must lie in [{}, {}], got {}", min, max, v));
        return std::nullopt;
    }
    return v;
}

// A value parsed by one of the units.hpp parsers (parse_bytes, parse_bandwidth, ...); their
// UnitError message becomes the diagnostic.
template <class Parse>
auto read_with_unit(const YAML::Node& node, const Site& at, std::string_view what, Parse parse, Diags& out)
    -> std::optional<decltype(parse(std::string_view()))> {
    auto s = read_scalar(node, at, what, out);
    if (!s) return std::nullopt;
    try {
        return parse(std::string_view(*s));
    } catch (const UnitError& e) {
        report(out, at, e.what());
        return std::nullopt;
    }
}

// One of the allowed spellings.
inline std::optional<std::string> read_enum(const YAML::Node& node, const Site& at,
                                            const std::vector<std::string>& allowed, Diags& out) {
    auto s = read_scalar(node, at, fmt::format("one of: {}", join_list(allowed)), out);
    if (!s) return std::nullopt;
    if (std::find(allowed.begin(), allowed.end(), *s) == allowed.end()) {
        report(out, at, fmt::format("unknown value '{}'{} (one of: {})", *s, did_you_mean(*s, allowed),
                                    join_list(allowed)));
        return std::nullopt;
    }
    return s;
}

// The whole text of a file, or a diagnostic at `at` (whose file is the path) saying why not: no
// such file, not readable, not a regular file (a folder, a FIFO, a device such as /dev/zero:
// refused before it is opened, so nothing blocks or reads without end), or larger than
// `max_bytes` (a scenario, profile or config of many MiB is a wrong file).
inline std::optional<std::string> read_text(const std::filesystem::path& file, const Site& at, Diags& out,
                                            std::size_t max_bytes = kMaxInputBytes) {
    try {
        return read_regular_file(file, max_bytes);
    } catch (const FileReadError& e) {
        report(out, at, e.what());
        return std::nullopt;
    }
}

// Where a quoted value opens that is not closed on its own line (1-based line and column), if
// any. YAML lets a quoted scalar run on over lines, so a forgotten closing quote swallows the keys
// that follow and the parser blames the end of the file or a missing key instead; scenario values
// are one-liners, so this place is the likely mistake. A quote counts only where a value starts
// (after "key: ", "- ", "[", "{" or ","), so apostrophes inside plain text do not; block scalars
// ("key: >" or "|") are skipped.
inline std::optional<std::pair<int, int>> unclosed_quote(const std::string& text) {
    std::istringstream in(text);
    std::string line;
    int number = 0;
    std::optional<std::size_t> block_indent; // inside a block scalar whose key is indented this much
    while (std::getline(in, line)) {
        ++number;
        const std::size_t indent = line.find_first_not_of(' ');
        if (indent == std::string::npos) continue;
        if (block_indent) {
            if (indent > *block_indent) continue;
            block_indent.reset();
        }
        bool value_start = true;
        for (std::size_t i = indent; i < line.size(); ++i) {
            const char c = line[i];
            if (c == '#' && (i == 0 || line[i - 1] == ' ')) break;  // a comment
            if (value_start && (c == '"' || c == '\'')) {
                std::size_t j = i + 1;
                bool closed = false;
                for (; j < line.size(); ++j) {
                    if (c == '"' && line[j] == '\\') {
                        ++j;
                    } else if (line[j] == c) {
                        if (c == '\'' && j + 1 < line.size() && line[j + 1] == '\'') ++j;  // '' escapes '
                        else {
                            closed = true;
                            break;
                        }
                    }
                }
                if (!closed) return std::pair{number, static_cast<int>(i) + 1};
                i = j;
                value_start = false;
                continue;
            }
            if (c == ' ') continue;
            value_start = c == '[' || c == '{' || c == ',' || (c == '-' && i + 1 < line.size() && line[i + 1] == ' ') ||
                          (c == ':' && (i + 1 == line.size() || line[i + 1] == ' '));
            if (c == ':' && value_start) {
                const std::size_t v = line.find_first_not_of(' ', i + 1);
                if (v != std::string::npos && (line[v] == '|' || line[v] == '>')) {
                    block_indent = indent;
                    break;
                }
            }
        }
    }
    return std::nullopt;
}

// The 1-based line where a second YAML document starts: a "---" after the first document's
// content (or its own "---"), or 0 when none is found.
inline int second_document_line(const std::string& text) {
    std::istringstream in(text);
    std::string line;
    int number = 0;
    bool content = false, opened = false;
    while (std::getline(in, line)) {
        ++number;
        const bool marker = line.starts_with("---") && (line.size() == 3 || line[3] == ' ' || line[3] == '\t' ||
                                                        line[3] == '\r');
        if (marker) {
            if (content || opened) return number;
            opened = true;
            continue;
        }
        const std::size_t first = line.find_first_not_of(" \t\r");
        if (first != std::string::npos && line[first] != '#' && line[first] != '%') content = true;
    }
    return 0;
}

// The root node of YAML text, or a diagnostic at the syntax error. An input file is one
// document: a second one after "---" would be silently dropped by a one-document load, so it is
// refused where it starts.
inline std::optional<YAML::Node> parse_yaml(const std::string& text, const std::string& file, Diags& out) {
    try {
        // One document is loaded; a second one is found in the text, not with YAML::LoadAll, which
        // loops forever on some malformed input in yaml-cpp 0.7 (HandleNextDocument; found by
        // fuzz_sweep_grid, tests/fuzz/corpus/sweep_grid/loadall-hang.yaml).
        YAML::Node root = YAML::Load(text);
        if (const int line = second_document_line(text); line > 0) {
            report(out, Site{file, line, 1, ""},
                   "a second YAML document starts here ('---'): an input file is one document, and what follows "
                   "would be ignored; remove the '---' or split the file");
            return std::nullopt;
        }
        return root;
    } catch (const YAML::Exception& e) {
        report(out, site_at(file, e.mark, ""), "YAML syntax error: " + e.msg);
        if (const auto q = unclosed_quote(text))
            report(out, Site{file, q->first, q->second, ""},
                   "this quote is not closed on its line: the value runs on to a later quote (the likely cause)");
        return std::nullopt;
    }
}

// Identical diagnostics (the same default-section mistake seen by every plan) reported once, in
// first-seen order.
inline Diags deduplicate(const Diags& in) {
    Diags out;
    std::set<std::string> seen;
    for (const auto& d : in)
        if (seen.insert(d.format()).second) out.push_back(d);
    return out;
}

// A shape rule a model breaks; key is the model key to blame (heads, kv_heads, ...).
struct ShapeProblem {
    std::string key;
    std::string message;
};

// Rules every model obeys, however it was written (preset, inline, HF config, a row of a
// validation CSV). Precondition: layers, hidden, heads, ffn, vocab >= 1 (checked when read).
// `head_dim_written`: false where head_dim is not given but follows from hidden / heads (the
// caller has set it so), which heads must then divide (blamed on heads; the caller may add how to
// give head_dim where its format can).
inline std::vector<ShapeProblem> check_model_shape(const ModelArch& m, bool head_dim_written) {
    std::vector<ShapeProblem> out;
    const bool head_dim_whole = head_dim_written || m.hidden % m.heads == 0;
    if (!head_dim_whole)
        out.push_back({"heads", fmt::format("hidden {} is not a multiple of heads {} (head_dim = hidden / heads "
                                            "would not be whole)",
                                            m.hidden, m.heads)});
    if (m.kv_heads < 1 || m.kv_heads > m.heads)
        out.push_back({"kv_heads", fmt::format("kv_heads {} must lie in [1, heads = {}]", m.kv_heads, m.heads)});
    else if (m.heads % m.kv_heads != 0)
        out.push_back({"kv_heads", fmt::format("kv_heads {} does not divide heads {} (each KV head serves a "
                                               "whole group of query heads)",
                                               m.kv_heads, m.heads)});
    if (head_dim_whole && m.head_dim < 1)
        out.push_back({"head_dim", fmt::format("must be at least 1, got {}", m.head_dim)});
    return out;
}

} // namespace trainsim::model::detail
