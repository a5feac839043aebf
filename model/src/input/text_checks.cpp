// Checks of input text that use nlohmann-json's UTF-8 decoder (input_support.hpp declares them).
#include "input_support.hpp"

#include <nlohmann/json.hpp>

namespace trainsim::model::detail {

std::optional<Utf8Problem> utf8_problem(std::string_view text) {
    // Pure ASCII (every scenario key and almost every value) is valid: no decoding needed.
    if (std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; }))
        return std::nullopt;
    // nlohmann-json's serializer decodes UTF-8 strictly (overlong forms, surrogates and code
    // points past U+10FFFF are refused) and says where: type_error 316 "invalid UTF-8 byte at
    // index N: 0xXX". Every JSON output of trainsim goes through it, so text that passes here
    // is text the outputs can write.
    try {
        (void)nlohmann::json(std::string(text)).dump();
        return std::nullopt;
    } catch (const nlohmann::json::type_error& e) {
        Utf8Problem p;
        const std::string_view what = e.what();
        if (const auto i = what.find("index "); i != std::string_view::npos) {
            std::size_t at = 0;
            const auto digits = what.substr(i + 6);
            std::from_chars(digits.data(), digits.data() + digits.size(), at);
            p.offset = std::min(at, text.empty() ? 0 : text.size() - 1);
        }
        p.byte = static_cast<unsigned char>(text[p.offset]);
        // What it reads as, with U+FFFD where a byte does not decode.
        p.readable = nlohmann::json(std::string(text)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        return p;
    }
}

} // namespace trainsim::model::detail
