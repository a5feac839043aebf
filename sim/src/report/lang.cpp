#include "trainsim/sim/report/lang.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace trainsim::sim {

namespace {

struct CatalogEntry {
    std::string_view id, str;
};

#include "zh_CN_catalog.inc" // constexpr CatalogEntry kZhCN[] (generated from sim/i18n/zh_CN.po)

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::replace(out.begin(), out.end(), '_', '-');
    return out;
}

} // namespace

Lang parse_lang(std::string_view tag) {
    const std::string t = lower(tag);
    if (t == "en") return Lang::en;
    if (t == "zh-cn") return Lang::zh_cn;
    throw LangError(fmt::format("unknown language '{}' (available: {})", tag,
                                fmt::join(available_langs(), ", ")));
}

std::vector<std::string> available_langs() { return {"en", "zh-CN"}; }

std::string_view lang_tag(Lang lang) { return lang == Lang::zh_cn ? "zh-CN" : "en"; }

std::string_view Translator::operator()(std::string_view english) const {
    if (lang_ == Lang::en) return english;
    const auto* end = std::end(kZhCN);
    const auto* it = std::lower_bound(std::begin(kZhCN), end, english,
                                      [](const CatalogEntry& e, std::string_view k) { return e.id < k; });
    if (it != end && it->id == english) return it->str;
    if (missing_ != nullptr) missing_->emplace_back(english);
    return english;
}

std::vector<std::string_view> catalog_keys(Lang lang) {
    std::vector<std::string_view> keys;
    if (lang == Lang::zh_cn)
        for (const auto& e : kZhCN) keys.push_back(e.id);
    return keys;
}

std::size_t display_width(std::string_view s) {
    std::size_t w = 0;
    for (std::size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        char32_t cp = c;
        std::size_t len = 1;
        if (c >= 0xF0 && i + 3 < s.size()) {
            len = 4;
            cp = (c & 0x07u) << 18 | (static_cast<unsigned char>(s[i + 1]) & 0x3Fu) << 12 |
                 (static_cast<unsigned char>(s[i + 2]) & 0x3Fu) << 6 | (static_cast<unsigned char>(s[i + 3]) & 0x3Fu);
        } else if (c >= 0xE0 && i + 2 < s.size()) {
            len = 3;
            cp = (c & 0x0Fu) << 12 | (static_cast<unsigned char>(s[i + 1]) & 0x3Fu) << 6 |
                 (static_cast<unsigned char>(s[i + 2]) & 0x3Fu);
        } else if (c >= 0xC0 && i + 1 < s.size()) {
            len = 2;
            cp = (c & 0x1Fu) << 6 | (static_cast<unsigned char>(s[i + 1]) & 0x3Fu);
        }
        i += len;
        // The wide ranges fmt 9 uses for padding (fmt/format.h compute_width), so that a table
        // padded here lines up with one padded by fmt.
        const bool wide = (cp >= 0x1100 && cp <= 0x115f) || cp == 0x2329 || cp == 0x232a ||
                          (cp >= 0x2e80 && cp <= 0xa4cf && cp != 0x303f) || (cp >= 0xac00 && cp <= 0xd7a3) ||
                          (cp >= 0xf900 && cp <= 0xfaff) || (cp >= 0xfe10 && cp <= 0xfe19) ||
                          (cp >= 0xfe30 && cp <= 0xfe6f) || (cp >= 0xff00 && cp <= 0xff60) ||
                          (cp >= 0xffe0 && cp <= 0xffe6) || (cp >= 0x20000 && cp <= 0x2fffd) ||
                          (cp >= 0x30000 && cp <= 0x3fffd) || (cp >= 0x1f300 && cp <= 0x1f64f) ||
                          (cp >= 0x1f900 && cp <= 0x1f9ff);
        w += wide ? 2 : 1;
    }
    return w;
}

} // namespace trainsim::sim
