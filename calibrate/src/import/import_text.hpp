// Text helpers the importers share (internal to calibrate/src/import/): tokens with their columns,
// numbers read whole, print rounding, UTF-8 repair, launcher prefixes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace trainsim::calibrate::detail {


struct Token {
    std::string_view text;
    int col = 0;  // 1-based column in the line as read
};

std::string_view trim(std::string_view s);
// Whitespace-separated tokens of s, whose first character is at column col0.
std::vector<Token> tokenize(std::string_view s, int col0);
bool parse_int(std::string_view t, std::int64_t& v);
// A finite number, the whole token ("35.20", "63896", "1.0e+07"); not "N/A", "inf", "nan".
bool parse_real(std::string_view t, double& v);
// Half a unit in the last printed digit of a number as printed: "35.20" -> 0.005, "63896" -> 0.5,
// "1.0e+07" -> 5e5.
double half_ulp(std::string_view t);
bool is_alpha_token(std::string_view t);
std::string lower(std::string_view s);
inline bool contains(std::string_view s, std::string_view what) { return s.find(what) != std::string_view::npos; }
// Text from a log (host and GPU names, versions, file names) as valid UTF-8, each byte that is not
// part of a well-formed sequence replaced by '?': JSON (samples, run.json) holds only UTF-8.
std::string utf8(std::string_view s);
// Length of the launcher prefixes at the start of a line: mpirun --tag-output "[1,0]<stdout>:",
// srun --label " 0: " / "12: " (both may be there, outermost first).
std::size_t prefix_length(std::string_view line);
// The file name of a path, as UTF-8.
std::string base_name(const std::string& file);
// "2 NCCL log lines, 1 other text" (or "none"), for the summaries.
std::string skipped_text(const std::map<std::string, int>& skipped);

} // namespace trainsim::calibrate::detail
