// po_to_cpp: turns a gettext .po catalog into a sorted C++ table (build step, sim/CMakeLists.txt).
// Usage: po_to_cpp IN.po OUT.inc NAME
//
// Why a table compiled into the binary rather than a .mo read at run time (Boost.Locale's
// gettext backend): the catalog is then found wherever trainsim runs (build tree, an installed
// binary, the Python module) with no search path to get wrong, and trainsim gains no run-time
// library (Boost.Locale brings ICU). The .po stays the standard format translators' tools edit;
// `msgfmt --check` validates it where gettext is installed (a ctest, tests/CMakeLists.txt).
//
// Accepted: comments (#...), msgid / msgstr with continuation lines, the header entry (empty
// msgid, skipped). Refused with FILE:LINE: msgctxt and plurals (not used), an empty or missing
// msgstr, a duplicate msgid, a translation whose {fmt} placeholders differ from its msgid's (it
// would throw at run time), a string that is not closed.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Entry {
    std::string id, str;
    int line = 0;
};

[[noreturn]] void fail(const std::string& file, int line, const std::string& what) {
    std::cerr << file << ":" << line << ": error: " << what << "\n";
    std::exit(1);
}

// The body of a "..." token, unescaped (the C escapes a .po uses).
std::string unquote(const std::string& s, const std::string& file, int line) {
    const auto a = s.find('"');
    const auto b = s.rfind('"');
    if (a == std::string::npos || b == a) fail(file, line, "expected a quoted string");
    if (s.find_first_not_of(" \t\r", b + 1) != std::string::npos) fail(file, line, "text after the closing quote");
    std::string out;
    for (std::size_t i = a + 1; i < b; ++i) {
        char c = s[i];
        if (c == '"') fail(file, line, "unescaped quote inside a string");
        if (c != '\\') {
            out += c;
            continue;
        }
        if (++i >= b) fail(file, line, "a backslash ends the string");
        switch (s[i]) {
            case 'n': out += '\n'; break;
            case 't': out += '\t'; break;
            case '"': out += '"'; break;
            case '\\': out += '\\'; break;
            default: fail(file, line, std::string("unsupported escape \\") + s[i]);
        }
    }
    return out;
}

// The {fmt} replacement fields of a format string, in order ("{{" and "}}" are literal braces).
std::vector<std::string> placeholders(const std::string& s) {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '{') {
            if (i + 1 < s.size() && s[i + 1] == '{') {
                ++i;
                continue;
            }
            const auto end = s.find('}', i);
            out.push_back(s.substr(i, end == std::string::npos ? std::string::npos : end - i + 1));
            if (end == std::string::npos) break;
            i = end;
        } else if (s[i] == '}' && i + 1 < s.size() && s[i + 1] == '}') {
            ++i;
        }
    }
    return out;
}

// A C++ string literal holding exactly `s` (UTF-8 bytes kept as they are).
std::string literal(const std::string& s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c == '\n') {
            out += "\\n";
        } else if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\%03o", c);
            out += buf;
        } else {
            out += static_cast<char>(c);
        }
    }
    return out + "\"";
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 4) {
        std::cerr << "usage: po_to_cpp IN.po OUT.inc NAME\n";
        return 2;
    }
    const std::string file = argv[1];
    std::ifstream in(file);
    if (!in) fail(file, 0, "cannot open");
    std::vector<Entry> entries;
    Entry cur;
    enum { none, id, str } state = none;
    std::string line;
    int n = 0;
    auto flush = [&]() {
        if (state == none) return;
        if (state == id) fail(file, cur.line, "msgid without msgstr");
        if (!cur.id.empty()) { // the header entry has an empty msgid
            if (cur.str.empty()) fail(file, cur.line, "empty msgstr (untranslated): translate it or remove the entry");
            if (placeholders(cur.id) != placeholders(cur.str))
                fail(file, cur.line, "the translation's {} placeholders differ from the msgid's");
            entries.push_back(cur);
        }
        cur = Entry{};
        state = none;
    };
    while (std::getline(in, line)) {
        ++n;
        const auto first = line.find_first_not_of(" \t\r");
        if (first == std::string::npos || line[first] == '#') {
            if (first == std::string::npos) flush();
            continue;
        }
        const std::string t = line.substr(first);
        if (t.rfind("msgid_plural", 0) == 0 || t.rfind("msgctxt", 0) == 0 || t.rfind("msgstr[", 0) == 0)
            fail(file, n, "plurals and contexts are not supported by trainsim's catalog");
        if (t.rfind("msgid ", 0) == 0) {
            flush();
            cur.line = n;
            cur.id = unquote(t.substr(6), file, n);
            state = id;
        } else if (t.rfind("msgstr ", 0) == 0) {
            if (state != id) fail(file, n, "msgstr without msgid");
            cur.str = unquote(t.substr(7), file, n);
            state = str;
        } else if (t[0] == '"') {
            if (state == none) fail(file, n, "a string outside an entry");
            (state == id ? cur.id : cur.str) += unquote(t, file, n);
        } else {
            fail(file, n, "unexpected line");
        }
    }
    flush();
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.id < b.id; });
    for (std::size_t i = 1; i < entries.size(); ++i)
        if (entries[i].id == entries[i - 1].id)
            fail(file, entries[i].line, "duplicate msgid (first at line " + std::to_string(entries[i - 1].line) + ")");
    std::ostringstream os;
    os << "// Generated from " << file << " by po_to_cpp (sim/i18n/po_to_cpp.cpp): do not edit.\n";
    os << "// Sorted by msgid (bytes), for binary search.\n";
    os << "constexpr CatalogEntry " << argv[3] << "[] = {\n";
    for (const auto& e : entries) os << "    {" << literal(e.id) << ",\n     " << literal(e.str) << "},\n";
    os << "};\n";
    // Written whole, only when changed (no needless rebuilds).
    const std::string text = os.str();
    {
        std::ifstream old(argv[2]);
        std::stringstream buf;
        buf << old.rdbuf();
        if (old && buf.str() == text) return 0;
    }
    const std::string tmp = std::string(argv[2]) + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary);
        out << text;
        if (!out) fail(argv[2], 0, "cannot write");
    }
    if (std::rename(tmp.c_str(), argv[2]) != 0) fail(argv[2], 0, "cannot rename into place");
    return 0;
}
