#include "trainsim/model/core/units.hpp"
#include "trainsim/model/core/text_format.hpp"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <utility>

namespace trainsim::model {
namespace {

struct Unit {
    std::string_view name;
    double factor;
};

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

// Splits "12.5 GB/s" into (12.5, "GB/s"). Throws when no number leads.
std::pair<double, std::string_view> split_number(std::string_view text, std::string_view what) {
    const std::string_view s = trim(text);
    double v = 0;
    const auto* first = s.data();
    const auto* last = s.data() + s.size();
    auto [ptr, ec] = std::from_chars(first, last, v);
    if (ec != std::errc() || ptr == first) {
        throw UnitError(fmt::format("expected {} as '<number> <unit>', got '{}'", what, text));
    }
    // from_chars reads "nan" and "inf"; neither is a quantity.
    if (!std::isfinite(v)) throw UnitError(fmt::format("{} must be a finite number, got '{}'", what, text));
    return {v, trim(std::string_view(ptr, static_cast<std::size_t>(last - ptr)))};
}

// v * factor, refused when it overflows ("1e308 TB").
double finite_product(double v, double factor, std::string_view what, std::string_view text) {
    const double x = v * factor;
    if (!std::isfinite(x)) throw UnitError(fmt::format("{} '{}' is too large to represent", what, text));
    return x;
}

template <std::size_t N>
double with_unit(std::string_view text, std::string_view what, const std::array<Unit, N>& units) {
    auto [v, unit] = split_number(text, what);
    std::string accepted;
    for (const auto& u : units) {
        if (u.name == unit) {
            if (v < 0) throw UnitError(fmt::format("{} must not be negative, got '{}'", what, text));
            return finite_product(v, u.factor, what, text);
        }
        accepted += accepted.empty() ? "" : ", ";
        accepted += u.name;
    }
    if (unit.empty()) {
        throw UnitError(fmt::format("{} '{}' has no unit (one of: {})", what, text, accepted));
    }
    throw UnitError(fmt::format("unknown unit '{}' for {} in '{}' (one of: {})", unit, what, text, accepted));
}

constexpr std::array<Unit, 10> kByteUnits{{{"B", 1},
                                           {"kB", kKilo},
                                           {"MB", kMega},
                                           {"GB", kGiga},
                                           {"TB", kTera},
                                           {"KiB", kKiB},
                                           {"MiB", kMiB},
                                           {"GiB", kGiB},
                                           {"TiB", kTiB},
                                           {"PB", kPeta}}};
constexpr std::array<Unit, 10> kBandwidthUnits{{{"B/s", 1},
                                                {"kB/s", kKilo},
                                                {"MB/s", kMega},
                                                {"GB/s", kGiga},
                                                {"TB/s", kTera},
                                                {"bit/s", 1.0 / 8},
                                                {"kbit/s", kKilo / 8},
                                                {"Mbit/s", kMega / 8},
                                                {"Gbit/s", kGiga / 8},
                                                {"Tbit/s", kTera / 8}}};
constexpr std::array<Unit, 5> kFlopRateUnits{{{"FLOP/s", 1},
                                              {"MFLOP/s", kMega},
                                              {"GFLOP/s", kGiga},
                                              {"TFLOP/s", kTera},
                                              {"PFLOP/s", kPeta}}};
constexpr std::array<Unit, 7> kDurationUnits{{{"ps", 1e-12},
                                              {"ns", 1e-9},
                                              {"us", 1e-6},
                                              {"ms", 1e-3},
                                              {"s", 1},
                                              {"min", 60},
                                              {"h", 3600}}};

} // namespace

Bytes parse_bytes(std::string_view text) { return Bytes(with_unit(text, "a size", kByteUnits)); }
Bandwidth parse_bandwidth(std::string_view text) {
    return Bandwidth(with_unit(text, "a bandwidth", kBandwidthUnits));
}
FlopRate parse_flop_rate(std::string_view text) {
    return FlopRate(with_unit(text, "a FLOP rate", kFlopRateUnits));
}
Power parse_power(std::string_view text) {
    static constexpr std::array<Unit, 3> kPowerUnits{{{"W", 1}, {"kW", 1e3}, {"MW", 1e6}}};
    return Power(with_unit(text, "a power", kPowerUnits));
}
Time parse_duration(std::string_view text) {
    const double s = with_unit(text, "a duration", kDurationUnits);
    if (s > 9e6) throw UnitError(fmt::format("duration '{}' is too long to simulate", text));
    return Time::from_seconds(s);
}

double parse_wall_seconds(std::string_view text) {
    static constexpr std::array<Unit, 4> kWallUnits{{{"s", 1}, {"min", 60}, {"h", 3600}, {"d", 86400}}};
    return with_unit(text, "a duration", kWallUnits);
}

double parse_rate_per_second(std::string_view text) {
    static constexpr std::array<Unit, 4> kPerUnits{
        {{"/s", 1}, {"/min", 1.0 / 60}, {"/h", 1.0 / 3600}, {"/d", 1.0 / 86400}}};
    // "0.002 / h" reads as "0.002 /h".
    std::string compact(text);
    if (const auto slash = compact.find('/'); slash != std::string::npos)
        while (slash + 1 < compact.size() && compact[slash + 1] == ' ') compact.erase(slash + 1, 1);
    return with_unit(compact, "a rate", kPerUnits);
}

double parse_count(std::string_view text) {
    auto [v, suffix] = split_number(text, "a count");
    static constexpr std::array<Unit, 6> kSuffixes{
        {{"", 1}, {"k", kKilo}, {"K", kKilo}, {"M", kMega}, {"B", kGiga}, {"T", kTera}}};
    for (const auto& u : kSuffixes) {
        if (u.name == suffix) {
            if (v < 0) throw UnitError(fmt::format("a count must not be negative, got '{}'", text));
            return finite_product(v, u.factor, "a count", text);
        }
    }
    throw UnitError(fmt::format("unknown suffix '{}' in count '{}' (use k, M, B or T)", suffix, text));
}

double parse_fraction(std::string_view text) {
    auto [v, unit] = split_number(text, "a fraction");
    if (unit == "%") v /= 100.0;
    else if (!unit.empty()) throw UnitError(fmt::format("expected a fraction like '15%' or 0.15, got '{}'", text));
    if (v < 0 || v > 1) throw UnitError(fmt::format("a fraction must lie in [0, 1] (0%..100%), got '{}'", text));
    return v;
}

std::string Time::out_of_range_message(double s) {
    return fmt::format("simulated time of {} s is outside what a step can take (|t| < {} s): an input "
                       "rate or size is out of its physical range",
                       s, kMaxSeconds);
}

std::string format_bytes(Bytes b) {
    const double v = b.value();
    if (v >= kGiB) return fmt::format("{:.2f} GiB", v / kGiB);
    if (v >= kMiB) return fmt::format("{:.2f} MiB", v / kMiB);
    if (v >= kKiB) return fmt::format("{:.2f} KiB", v / kKiB);
    return fmt::format("{:.0f} B", v);
}

std::string format_bandwidth(Bandwidth bw) {
    const double v = bw.value();
    if (v >= kTera) return fmt::format("{:.2f} TB/s", v / kTera);
    if (v >= kGiga) return fmt::format("{:.1f} GB/s", v / kGiga);
    return fmt::format("{:.1f} MB/s", v / kMega);
}

std::string format_grouped(double v, int decimals) {
    // Digits grouped by hand, not through a std::locale: the output must not depend on the locales
    // a machine has installed (a missing "en_US.UTF-8" throws).
    const std::string s = fmt::format("{:.{}f}", v, decimals);
    const std::size_t begin = (!s.empty() && s[0] == '-') ? 1 : 0;
    const std::size_t dot = s.find('.');
    const std::size_t end = dot == std::string::npos ? s.size() : dot;
    if (end > begin && !std::isdigit(static_cast<unsigned char>(s[begin]))) return s; // inf, nan
    std::string out = s.substr(0, begin);
    for (std::size_t i = begin; i < end; ++i) {
        out += s[i];
        const std::size_t left = end - i - 1;
        if (left > 0 && left % 3 == 0) out += ',';
    }
    out += s.substr(end);
    return out;
}

std::string format_money(double amount, std::string_view currency) {
    return currency.empty() ? format_grouped(amount, 0) : fmt::format("{} {}", format_grouped(amount, 0), currency);
}

std::string format_count(double n) {
    // The suffixes parse_count reads, largest first; three significant digits ("1T", "300B",
    // "6.74B", "1.5T"); a mantissa that would round to 1000 or more is printed whole ("1000T").
    static constexpr std::array<std::pair<double, const char*>, 4> kSuffixes{
        {{kTera, "T"}, {kGiga, "B"}, {kMega, "M"}, {kKilo, "k"}}};
    if (!std::isfinite(n)) return fmt::format("{}", n);
    for (const auto& [factor, suffix] : kSuffixes) {
        if (std::fabs(n) < factor) continue;
        const double m = n / factor;
        const std::string digits = fmt::format("{:.3g}", m);
        return (digits.find('e') == std::string::npos ? digits : fmt::format("{:.0f}", m)) + suffix;
    }
    const std::string digits = fmt::format("{:.3g}", n);
    return digits.find('e') == std::string::npos ? digits : fmt::format("{:.0f}", n);
}

std::string format_time(Time t) {
    const double s = t.seconds();
    if (s >= 1.0) return fmt::format("{:.3f} s", s);
    if (s >= 1e-3) return fmt::format("{:.2f} ms", s * 1e3);
    return fmt::format("{:.1f} us", s * 1e6);
}

} // namespace trainsim::model
