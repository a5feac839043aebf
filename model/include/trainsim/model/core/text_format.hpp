// Counts and money as text output writes them (issue #45): "1T" tokens rather than "1e+12",
// "304,000 CNY" rather than "304000". JSON keeps the plain numbers. Defined in units.cpp, beside
// parse_count, which reads what format_count writes.
#pragma once

#include <string>
#include <string_view>

namespace trainsim::model {

// A count as parse_count reads it, three significant digits: 1e12 -> "1T", 3e11 -> "300B",
// 6.74e9 -> "6.74B", 512 -> "512" (token and parameter counts in text output).
[[nodiscard]] std::string format_count(double n);
// Thousands grouped with commas, whatever the locale: 304000 -> "304,000", (1234.5, 2) -> "1,234.50".
[[nodiscard]] std::string format_grouped(double v, int decimals);
// Money in whole units with its currency: (304000, "CNY") -> "304,000 CNY".
[[nodiscard]] std::string format_money(double amount, std::string_view currency);

} // namespace trainsim::model
