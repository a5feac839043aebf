// Physical quantities as strong types. The only bridges between them are named
// functions (transfer_time, compute_time). Prefixes are defined once here:
// kB/MB/GB/TB = 10^3/6/9/12, KiB/MiB/GiB/TiB = 2^10/20/30/40, rates are decimal
// (GB/s = 1e9 B/s) and Gbit/s divides by 8.
#pragma once

#include <cmath>
#include <compare>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace trainsim::model {

// A value that could not be parsed as the quantity asked for.
class UnitError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

namespace detail {
// Common arithmetic for a double-valued quantity tagged by Tag.
template <class Tag> class Quantity {
public:
    constexpr Quantity() = default;
    constexpr explicit Quantity(double v) : v_(v) {}
    [[nodiscard]] constexpr double value() const { return v_; }
    constexpr Quantity& operator+=(Quantity o) { v_ += o.v_; return *this; }
    constexpr Quantity& operator-=(Quantity o) { v_ -= o.v_; return *this; }
    friend constexpr Quantity operator+(Quantity a, Quantity b) { return Quantity(a.v_ + b.v_); }
    friend constexpr Quantity operator-(Quantity a, Quantity b) { return Quantity(a.v_ - b.v_); }
    friend constexpr Quantity operator*(Quantity a, double k) { return Quantity(a.v_ * k); }
    friend constexpr Quantity operator*(double k, Quantity a) { return Quantity(a.v_ * k); }
    friend constexpr Quantity operator/(Quantity a, double k) { return Quantity(a.v_ / k); }
    friend constexpr double operator/(Quantity a, Quantity b) { return a.v_ / b.v_; }
    friend constexpr auto operator<=>(Quantity, Quantity) = default;

private:
    double v_ = 0.0;
};
struct BytesTag {};
struct BandwidthTag {};
struct FlopsTag {};
struct FlopRateTag {};
struct PowerTag {};
} // namespace detail

// A number of bytes (double: shards and averages are fractional).
using Bytes = detail::Quantity<detail::BytesTag>;
// Bytes per second.
using Bandwidth = detail::Quantity<detail::BandwidthTag>;
// Floating-point operations.
using Flops = detail::Quantity<detail::FlopsTag>;
// Floating-point operations per second.
using FlopRate = detail::Quantity<detail::FlopRateTag>;
// Electrical power in watts (a GPU's board power, a node's host side).
using Power = detail::Quantity<detail::PowerTag>;

inline constexpr double kKilo = 1e3, kMega = 1e6, kGiga = 1e9, kTera = 1e12, kPeta = 1e15;
inline constexpr double kKiB = 1024.0, kMiB = kKiB * 1024.0, kGiB = kMiB * 1024.0, kTiB = kGiB * 1024.0;

[[nodiscard]] constexpr Bytes gib(double n) { return Bytes(n * kGiB); }
[[nodiscard]] constexpr Bytes mib(double n) { return Bytes(n * kMiB); }
[[nodiscard]] constexpr Bandwidth gb_per_s(double n) { return Bandwidth(n * kGiga); }
[[nodiscard]] constexpr FlopRate tflop_per_s(double n) { return FlopRate(n * kTera); }
[[nodiscard]] constexpr double to_gib(Bytes b) { return b.value() / kGiB; }

// Simulated time: an integer number of picoseconds. No sentinels, no epsilons.
class Time {
public:
    constexpr Time() = default;
    [[nodiscard]] static constexpr Time ps(std::int64_t v) { return Time(v); }
    [[nodiscard]] static constexpr Time ns(double v) { return from_seconds(v * 1e-9); }
    [[nodiscard]] static constexpr Time us(double v) { return from_seconds(v * 1e-6); }
    // The longest span a Time holds: int64 picoseconds reach 9.22e6 s (106 days); one simulated
    // step is far shorter. Inputs are range-checked where they are read (scenario_keys.cpp,
    // profile_io.cpp), so a value outside this is a bug upstream, reported instead of the
    // undefined double -> int64 cast.
    static constexpr double kMaxSeconds = 9.2e6;
    // Rounds to the nearest picosecond. Throws std::overflow_error when |s| >= kMaxSeconds or s is NaN.
    [[nodiscard]] static constexpr Time from_seconds(double s) {
        if (!(s < kMaxSeconds && s > -kMaxSeconds)) throw std::overflow_error(out_of_range_message(s));
        return Time(static_cast<std::int64_t>(s * 1e12 + (s >= 0 ? 0.5 : -0.5)));
    }
    [[nodiscard]] constexpr std::int64_t count_ps() const { return ps_; }
    [[nodiscard]] constexpr double seconds() const { return static_cast<double>(ps_) * 1e-12; }
    constexpr Time& operator+=(Time o) { ps_ += o.ps_; return *this; }
    constexpr Time& operator-=(Time o) { ps_ -= o.ps_; return *this; }
    friend constexpr Time operator+(Time a, Time b) { return Time(a.ps_ + b.ps_); }
    friend constexpr Time operator-(Time a, Time b) { return Time(a.ps_ - b.ps_); }
    friend constexpr Time operator*(Time a, std::int64_t k) { return Time(a.ps_ * k); }
    friend constexpr auto operator<=>(Time, Time) = default;

private:
    constexpr explicit Time(std::int64_t v) : ps_(v) {}
    static std::string out_of_range_message(double s);
    std::int64_t ps_ = 0;
};

[[nodiscard]] constexpr Time max(Time a, Time b) { return a < b ? b : a; }
[[nodiscard]] constexpr Time min(Time a, Time b) { return a < b ? a : b; }

// The only bridges between quantities and time.
[[nodiscard]] inline Time transfer_time(Bytes b, Bandwidth bw) { return Time::from_seconds(b.value() / bw.value()); }
[[nodiscard]] inline Time compute_time(Flops f, FlopRate r) { return Time::from_seconds(f.value() / r.value()); }
[[nodiscard]] inline FlopRate achieved_rate(Flops f, Time t) { return FlopRate(f.value() / t.seconds()); }

// Parsers for values written with their unit, e.g. "80 GiB", "400 Gbit/s", "989 TFLOP/s", "5 us".
// A bare number, an unknown unit or a negative value throws UnitError with a message naming
// the accepted units.
[[nodiscard]] Bytes parse_bytes(std::string_view text);
[[nodiscard]] Bandwidth parse_bandwidth(std::string_view text);
[[nodiscard]] FlopRate parse_flop_rate(std::string_view text);
[[nodiscard]] Time parse_duration(std::string_view text);
// "700 W", "2.8 kW", "10.2 kW" (W, kW, MW).
[[nodiscard]] Power parse_power(std::string_view text);
// A wall-clock span of a whole run (checkpoint interval, mean time between failures), any length,
// in seconds: "30 s", "10 min", "50677 h", "2 d".
[[nodiscard]] double parse_wall_seconds(std::string_view text);
// How often something happens, per second: "0.002/h", "0.05 /d", "1/min" (events per wall-clock
// span of s, min, h or d).
[[nodiscard]] double parse_rate_per_second(std::string_view text);
// A count with an optional SI suffix: "1T" = 1e12, "500B" = 5e11, "40M", "8k", or a plain number.
[[nodiscard]] double parse_count(std::string_view text);
// A fraction written as a percentage ("15%") or a plain number in [0, 1].
[[nodiscard]] double parse_fraction(std::string_view text);

// Human-readable forms for reports ("1.50 GiB", "450 GB/s", "12.3 ms").
[[nodiscard]] std::string format_bytes(Bytes b);
[[nodiscard]] std::string format_bandwidth(Bandwidth bw);
[[nodiscard]] std::string format_time(Time t);

} // namespace trainsim::model
