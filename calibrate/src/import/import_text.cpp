#include "import_text.hpp"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>

namespace trainsim::calibrate::detail {

std::string_view trim(std::string_view s) {
    const auto b = s.find_first_not_of(" \t\r");
    if (b == std::string_view::npos) return {};
    const auto e = s.find_last_not_of(" \t\r");
    return s.substr(b, e - b + 1);
}

// Whitespace-separated tokens of s, whose first character is at column col0.
std::vector<Token> tokenize(std::string_view s, int col0) {
    std::vector<Token> out;
    std::size_t i = 0;
    while (i < s.size()) {
        while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r')) ++i;
        const std::size_t b = i;
        while (i < s.size() && s[i] != ' ' && s[i] != '\t' && s[i] != '\r') ++i;
        if (i > b) out.push_back(Token{s.substr(b, i - b), col0 + static_cast<int>(b)});
    }
    return out;
}

bool parse_int(std::string_view t, std::int64_t& v) {
    if (t.empty()) return false;
    const auto r = std::from_chars(t.data(), t.data() + t.size(), v);
    return r.ec == std::errc() && r.ptr == t.data() + t.size();
}

// A finite number, the whole token ("35.20", "63896", "1.0e+07"); not "N/A", "inf", "nan".
bool parse_real(std::string_view t, double& v) {
    if (t.empty() || !(std::isdigit(static_cast<unsigned char>(t[0])) || t[0] == '-' || t[0] == '.')) return false;
    const auto r = std::from_chars(t.data(), t.data() + t.size(), v);
    return r.ec == std::errc() && r.ptr == t.data() + t.size() && std::isfinite(v);
}

// Half a unit in the last printed digit of a number as printed: "35.20" -> 0.005, "63896" -> 0.5,
// "1.0e+07" -> 5e5. nccl-tests prints times in 7 and bandwidths in 6 characters (getFloatStr in
// src/util.cu), so the digits after the point change with the magnitude.
double half_ulp(std::string_view t) {
    const auto e = t.find_first_of("eE");
    const std::string_view mant = t.substr(0, e);
    const auto dot = mant.find('.');
    const int decimals = dot == std::string_view::npos ? 0 : static_cast<int>(mant.size() - dot - 1);
    std::int64_t exp10 = 0;
    if (e != std::string_view::npos) {
        std::string_view x = t.substr(e + 1);
        if (!x.empty() && x[0] == '+') x.remove_prefix(1);
        if (!parse_int(x, exp10) || exp10 < -300 || exp10 > 300) exp10 = 0;
    }
    return 0.5 * std::pow(10.0, static_cast<double>(exp10) - decimals);
}

bool is_alpha_token(std::string_view t) {
    return !t.empty() && std::isalpha(static_cast<unsigned char>(t[0])) != 0;
}

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}


// Text from a log (host and GPU names, versions, file names) as valid UTF-8, each byte that is not
// part of a well-formed sequence replaced by '?': JSON (samples, run.json) holds only UTF-8.
std::string utf8(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    std::size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        std::size_t len = c < 0x80                 ? 1
                          : c >= 0xC2 && c <= 0xDF ? 2
                          : c >= 0xE0 && c <= 0xEF ? 3
                          : c >= 0xF0 && c <= 0xF4 ? 4
                                                   : 0;
        bool ok = len > 0 && i + len <= s.size();
        for (std::size_t k = 1; ok && k < len; ++k) {
            const auto x = static_cast<unsigned char>(s[i + k]);
            unsigned char lo = 0x80, hi = 0xBF;
            if (k == 1 && c == 0xE0) lo = 0xA0;  // overlong
            if (k == 1 && c == 0xED) hi = 0x9F;  // surrogates
            if (k == 1 && c == 0xF0) lo = 0x90;  // overlong
            if (k == 1 && c == 0xF4) hi = 0x8F;  // beyond U+10FFFF
            ok = x >= lo && x <= hi;
        }
        if (ok) out.append(s.substr(i, len));
        else out += '?';
        i += ok ? len : 1;
    }
    return out;
}

// Length of the launcher prefixes at the start of a line: mpirun --tag-output "[1,0]<stdout>:",
// srun --label " 0: " / "12: " (both may be there, outermost first).
std::size_t prefix_length(std::string_view line) {
    std::size_t total = 0;
    for (int pass = 0; pass < 2; ++pass) {
        const std::string_view s = line.substr(total);
        if (!s.empty() && s[0] == '[') {
            const auto close = s.find("]<");
            const auto end = close == std::string_view::npos ? close : s.find(">:", close);
            if (end != std::string_view::npos) {
                const std::string_view ids = s.substr(1, close - 1);
                const std::string_view stream = s.substr(close + 2, end - close - 2);
                const bool ids_ok = !ids.empty() && ids.find_first_not_of("0123456789,") == std::string_view::npos;
                if (ids_ok && (stream == "stdout" || stream == "stderr" || stream == "stddiag")) {
                    total += end + 2;
                    continue;
                }
            }
        }
        std::size_t i = 0;
        while (i < s.size() && s[i] == ' ') ++i;
        std::size_t d = i;
        while (d < s.size() && std::isdigit(static_cast<unsigned char>(s[d])) != 0) ++d;
        if (d > i && d < s.size() && s[d] == ':' && (d + 1 == s.size() || s[d + 1] == ' ' || s[d + 1] == '\t')) {
            total += d + 1;
            continue;
        }
        break;
    }
    return total;
}

std::string base_name(const std::string& file) { return utf8(std::filesystem::path(file).filename().string()); }

std::string skipped_text(const std::map<std::string, int>& skipped) {
    if (skipped.empty()) return "none";
    std::string s;
    for (const auto& [why, count] : skipped) s += fmt::format("{}{} {}", s.empty() ? "" : ", ", count, why);
    return s;
}

} // namespace trainsim::calibrate::detail
