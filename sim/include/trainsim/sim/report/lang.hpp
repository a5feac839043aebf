// The language of trainsim's human-readable output (--lang): text tables and the HTML report.
// JSON and CSV are never translated; numbers, units, ids and JSON field names stay as they are.
// The catalog is sim/i18n/zh_CN.po, compiled into the binary at build time (docs/report.md
// "Languages"); English strings are the keys, as in gettext.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace trainsim::sim {

enum class Lang { en, zh_cn };

// --lang with a value trainsim has no catalog for: the message lists the ones it has.
class LangError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// "en" (default), "zh-CN" (also zh_CN, zh-cn). Anything else throws LangError.
[[nodiscard]] Lang parse_lang(std::string_view tag);
// The tags parse_lang accepts, canonical spelling: {"en", "zh-CN"}.
[[nodiscard]] std::vector<std::string> available_langs();
// The BCP 47 tag an HTML page declares: "en", "zh-CN".
[[nodiscard]] std::string_view lang_tag(Lang lang);

// One lookup for every translated string: English text in, the language's text out. English is
// the identity; a string the catalog lacks comes back in English and is recorded in `missing`
// (when given), so a test can prove a language's output uses no untranslated key.
class Translator {
public:
    explicit Translator(Lang lang = Lang::en, std::vector<std::string>* missing = nullptr)
        : lang_(lang), missing_(missing) {}
    [[nodiscard]] std::string_view operator()(std::string_view english) const;
    [[nodiscard]] Lang lang() const { return lang_; }
    [[nodiscard]] bool english() const { return lang_ == Lang::en; }

private:
    Lang lang_;
    std::vector<std::string>* missing_;
};

// The catalog's English keys for a language (empty for English), for tests.
[[nodiscard]] std::vector<std::string_view> catalog_keys(Lang lang);

// Terminal columns a UTF-8 string takes: 2 for East Asian wide characters (CJK ideographs, CJK
// punctuation, full-width forms; Unicode UAX #11 "W" and "F"), 1 otherwise; as fmt pads.
[[nodiscard]] std::size_t display_width(std::string_view utf8);

} // namespace trainsim::sim
