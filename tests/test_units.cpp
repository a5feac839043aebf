// The unit parsers of units.hpp: every prefix, bits vs bytes, and the errors a user sees.
// Expected values come from the definitions in docs/formats.md: kB/MB/GB/TB = 10^3/6/9/12,
// KiB/MiB/GiB/TiB = 2^10/20/30/40, GB/s = 1e9 B/s, Gbit/s = 1e9/8 B/s.
#include "trainsim/model/core/units.hpp"

#include <catch2/catch.hpp>

using namespace trainsim::model;
using Catch::Matchers::Contains;

TEST_CASE("parse_bytes: decimal and binary prefixes", "[units]") {
    CHECK(parse_bytes("1 B").value() == 1.0);
    CHECK(parse_bytes("1 kB").value() == 1e3);
    CHECK(parse_bytes("1 MB").value() == 1e6);
    CHECK(parse_bytes("1 GB").value() == 1e9);
    CHECK(parse_bytes("1 TB").value() == 1e12);
    CHECK(parse_bytes("1 PB").value() == 1e15);
    CHECK(parse_bytes("1 KiB").value() == 1024.0);
    CHECK(parse_bytes("1 MiB").value() == 1048576.0);
    CHECK(parse_bytes("1 GiB").value() == 1073741824.0);
    CHECK(parse_bytes("1 TiB").value() == 1099511627776.0);
    CHECK(parse_bytes("80 GiB").value() == 80.0 * 1073741824.0);
    CHECK(parse_bytes("1.5 GB").value() == 1.5e9);
    CHECK(parse_bytes("  80GiB ").value() == 80.0 * 1073741824.0);  // space optional, trimmed
}

TEST_CASE("parse_bandwidth: bytes per second and bits per second", "[units]") {
    CHECK(parse_bandwidth("1 B/s").value() == 1.0);
    CHECK(parse_bandwidth("1 kB/s").value() == 1e3);
    CHECK(parse_bandwidth("1 MB/s").value() == 1e6);
    CHECK(parse_bandwidth("450 GB/s").value() == 450e9);
    CHECK(parse_bandwidth("3.35 TB/s").value() == Approx(3.35e12));
    // Bits divide by 8: a 400 Gbit/s NIC moves 50 GB/s.
    CHECK(parse_bandwidth("400 Gbit/s").value() == 50e9);
    CHECK(parse_bandwidth("8 bit/s").value() == 1.0);
    CHECK(parse_bandwidth("8 kbit/s").value() == 1e3);
    CHECK(parse_bandwidth("8 Mbit/s").value() == 1e6);
    CHECK(parse_bandwidth("1.6 Tbit/s").value() == Approx(200e9));
}

TEST_CASE("parse_flop_rate and parse_duration: every prefix", "[units]") {
    CHECK(parse_flop_rate("1 FLOP/s").value() == 1.0);
    CHECK(parse_flop_rate("1 MFLOP/s").value() == 1e6);
    CHECK(parse_flop_rate("1 GFLOP/s").value() == 1e9);
    CHECK(parse_flop_rate("989 TFLOP/s").value() == 989e12);
    CHECK(parse_flop_rate("2 PFLOP/s").value() == 2e15);

    CHECK(parse_duration("7 ps").count_ps() == 7);
    CHECK(parse_duration("3 ns").count_ps() == 3'000);
    CHECK(parse_duration("5 us").count_ps() == 5'000'000);
    CHECK(parse_duration("2 ms").count_ps() == 2'000'000'000);
    CHECK(parse_duration("1.5 s").count_ps() == 1'500'000'000'000);
    CHECK(parse_duration("2 min").count_ps() == 120'000'000'000'000);
    CHECK(parse_duration("1 h").count_ps() == 3'600'000'000'000'000);
}

TEST_CASE("parse_power: W, kW, MW, and a bare number or another unit refused", "[units][energy]") {
    CHECK(parse_power("700 W").value() == 700.0);
    CHECK(parse_power("2.8 kW").value() == 2800.0);
    CHECK(parse_power("1.5 MW").value() == 1.5e6);
    CHECK_THROWS_AS(parse_power("700"), UnitError);
    CHECK_THROWS_AS(parse_power("700 kWh"), UnitError);
    CHECK_THROWS_AS(parse_power("-5 W"), UnitError);
}

TEST_CASE("parse_count: SI suffixes and plain numbers", "[units]") {
    CHECK(parse_count("4096") == 4096.0);
    CHECK(parse_count("8k") == 8e3);
    CHECK(parse_count("8K") == 8e3);
    CHECK(parse_count("40M") == 40e6);
    CHECK(parse_count("500B") == 500e9);
    CHECK(parse_count("1T") == 1e12);
    CHECK(parse_count("1.5T") == 1.5e12);
    CHECK_THROWS_WITH(parse_count("5X"), Contains("unknown suffix 'X'"));
    CHECK_THROWS_WITH(parse_count("-5B"), Contains("must not be negative"));
}

TEST_CASE("parse_fraction: percent or plain number in [0, 1]", "[units]") {
    CHECK(parse_fraction("15%") == Approx(0.15));
    CHECK(parse_fraction("0.15") == Approx(0.15));
    CHECK(parse_fraction("100%") == 1.0);
    CHECK(parse_fraction("0") == 0.0);
    CHECK_THROWS_WITH(parse_fraction("150%"), Contains("must lie in [0, 1]"));
    CHECK_THROWS_WITH(parse_fraction("1.5"), Contains("must lie in [0, 1]"));
    CHECK_THROWS_WITH(parse_fraction("-0.1"), Contains("must lie in [0, 1]"));
    CHECK_THROWS_WITH(parse_fraction("15 percent"), Contains("expected a fraction"));
}

TEST_CASE("unit parsers reject bare numbers, negatives and unknown units", "[units]") {
    SECTION("a bare number has no unit") {
        CHECK_THROWS_AS(parse_bytes("80"), UnitError);
        CHECK_THROWS_WITH(parse_bytes("80"), Contains("'80' has no unit") && Contains("GiB"));
        CHECK_THROWS_WITH(parse_bandwidth("400"), Contains("has no unit") && Contains("Gbit/s"));
        CHECK_THROWS_WITH(parse_flop_rate("989"), Contains("has no unit"));
        CHECK_THROWS_WITH(parse_duration("5"), Contains("has no unit"));
    }
    SECTION("negative values") {
        CHECK_THROWS_WITH(parse_bytes("-1 GiB"), Contains("must not be negative"));
        CHECK_THROWS_WITH(parse_bandwidth("-400 Gbit/s"), Contains("must not be negative"));
        CHECK_THROWS_WITH(parse_duration("-5 us"), Contains("must not be negative"));
    }
    SECTION("unknown unit: the message names it and lists the accepted ones") {
        // A size where a bandwidth is expected (wrong unit kind).
        CHECK_THROWS_WITH(parse_bandwidth("400 GB"),
                          Contains("unknown unit 'GB' for a bandwidth") && Contains("GB/s") && Contains("Gbit/s"));
        CHECK_THROWS_WITH(parse_bytes("80 GiB/s"), Contains("unknown unit 'GiB/s' for a size"));
        CHECK_THROWS_WITH(parse_flop_rate("989 TFLOPS"), Contains("unknown unit 'TFLOPS'") && Contains("TFLOP/s"));
        CHECK_THROWS_WITH(parse_duration("5 sec"), Contains("unknown unit 'sec'") && Contains("us"));
    }
    SECTION("no number at all") {
        CHECK_THROWS_WITH(parse_bytes("GiB"), Contains("expected a size as '<number> <unit>'"));
        CHECK_THROWS_WITH(parse_bandwidth(""), Contains("expected a bandwidth"));
    }
}

TEST_CASE("transfer_time bridges bytes and bandwidth", "[units]") {
    // 1 GB over 50 GB/s (a 400 Gbit/s NIC) takes 20 ms.
    CHECK(transfer_time(Bytes(1e9), parse_bandwidth("400 Gbit/s")).count_ps() == 20'000'000'000);
    // 989 TFLOP at 989 TFLOP/s takes one second.
    CHECK(compute_time(Flops(989e12), parse_flop_rate("989 TFLOP/s")).count_ps() == 1'000'000'000'000);
}
