// The run's electricity (sim/run/energy.hpp, docs/model.md "Energy"): the closed form on a step
// whose breakdown is written down here, the shares read from a simulated step, and the unknowns
// (no power section, no price, no grid intensity) null in JSON, never 0.
#include "fixtures.hpp"
#include "trainsim/sim/report/report.hpp"
#include "trainsim/sim/run/energy.hpp"
#include "trainsim/sim/run/estimate.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace trainsim;
using model::Power;
using model::Time;

namespace {

// H100 SXM-like power: 700 W under GEMMs, 350 W with only collectives, 90 W idle, 2.8 kW per node
// beside the GPUs (the shipped h100-sxm profile's figures).
model::HardwareProfile powered() {
    auto hw = test::test_profile();
    hw.power_compute_busy = Power(700);
    hw.power_comm_busy = Power(350);
    hw.power_idle = Power(90);
    hw.power_node_overhead = Power(2800);
    return hw;
}

} // namespace

TEST_CASE("energy of a step with a known breakdown, by hand", "[energy]") {
    // 6 s of tensor-core work, 3 s of collectives alone, 1 s idle, on 16 GPUs in 2 nodes, for 10
    // expected days, PUE 1.4, 0.7 per kWh, 500 g CO2 per kWh, 1e9 tokens:
    //   P_gpu      = (6 x 700 + 3 x 350 + 1 x 90) / 10       = 534 W
    //   IT power   = 16 x 534 + 2 x 2800                     = 14,144 W
    //   facility   = 14.144 kW x 1.4                         = 19.8016 kW
    //   energy     = 19.8016 kW x 240 h                      = 4,752.384 kWh
    //   cost       = 4,752.384 x 0.7                         = 3,326.6688
    //   CO2        = 4,752.384 x 500 / 1000                  = 2,376.192 kg
    //   per M tok  = 4,752.384 / 1000                        = 4.752384 kWh
    const sim::GpuTimeShares t{6, 3, 1};
    model::EnergySettings s;
    s.pue = 1.4;
    s.price_per_kwh = 0.7;
    s.grid_g_co2_per_kwh = 500;
    const auto e = sim::energy_of(powered(), t, s, "CNY", 16, 2, 10, 1e9);
    CHECK(e.gpu_power_w == Approx(534).epsilon(1e-12));
    CHECK(e.it_power_kw == Approx(14.144).epsilon(1e-12));
    CHECK(e.facility_power_kw == Approx(19.8016).epsilon(1e-12));
    CHECK(e.hours == 240);
    CHECK(e.kwh == Approx(4752.384).epsilon(1e-12));
    REQUIRE(e.cost);
    CHECK(*e.cost == Approx(3326.6688).epsilon(1e-12));
    CHECK(e.currency == "CNY");
    REQUIRE(e.co2_kg);
    CHECK(*e.co2_kg == Approx(2376.192).epsilon(1e-12));
    CHECK(e.kwh_per_million_tokens == Approx(4.752384).epsilon(1e-12));

    // Without a price or a grid intensity those two are unknown, not 0; the currency defaults to
    // the one given (pricing.currency) unless energy.currency says otherwise.
    const auto bare = sim::energy_of(powered(), t, model::EnergySettings{}, "USD", 16, 2, 10, 1e9);
    CHECK_FALSE(bare.cost);
    CHECK_FALSE(bare.co2_kg);
    CHECK(bare.currency == "USD");
    CHECK(bare.pue == 1.0);
    CHECK(bare.kwh == Approx(14.144 * 240).epsilon(1e-12));
}

TEST_CASE("power-state shares of a step: busy, communicating alone, idle", "[energy]") {
    sim::StepBreakdown b;
    b.forward = Time::from_seconds(2);
    b.backward = Time::from_seconds(3);
    b.recompute = Time::from_seconds(1);
    b.optimizer = Time::from_seconds(0.5);
    b.tp_exposed = Time::from_seconds(0.2);
    b.cp_exposed = Time::from_seconds(0.1);
    b.dp_exposed = Time::from_seconds(0.3);
    b.pp_exposed = Time::from_seconds(0.4);
    b.bubble = Time::from_seconds(1.5);
    b.host_bound = Time::from_seconds(0.5);
    // compute = 2 + 3 + 1; comm = optimizer 0.5 + exposed 1.0; idle = bubble 1.5 + host 0.5.
    const auto t = sim::time_shares(b, b.total().seconds());
    CHECK(t.compute_s == Approx(6));
    CHECK(t.comm_s == Approx(1.5));
    CHECK(t.idle_s == Approx(2));
    CHECK(t.total() == Approx(9.5));
    // CPU offload: the GPU optimizer (0.5 s) is gone and the step is 1 s longer than the GPU's
    // simulated one; the GPU waits for the host through the added time: idle.
    const auto o = sim::time_shares(b, 10.5, 0.5);
    CHECK(o.compute_s == Approx(6));
    CHECK(o.comm_s == Approx(1.0));
    CHECK(o.idle_s == Approx(3.5));
}

TEST_CASE("a simulated plan's energy follows its own step breakdown and expected days", "[energy]") {
    auto plan = test::small_plan(2, 2, 2);
    plan.hardware = powered();
    plan.energy.pue = 1.2;
    plan.energy.price_per_kwh = 0.1;
    plan.pricing.currency = "EUR";
    const auto e = sim::estimate_plan(plan);
    REQUIRE(e.step);
    REQUIRE(e.energy);
    const auto& b = e.step->breakdown;
    const double step = e.step_time_s;
    const double compute = b.compute().seconds();
    const double comm = (b.optimizer + b.tp_exposed + b.cp_exposed + b.dp_exposed + b.pp_exposed).seconds();
    const double gpu_w = (compute * 700 + comm * 350 + (step - compute - comm) * 90) / step;
    const double kw = (plan.num_gpus() * gpu_w + plan.cluster.nodes * 2800) * 1.2 / 1e3;
    CHECK(e.energy->gpu_power_w == Approx(gpu_w).epsilon(1e-9));
    CHECK(e.energy->facility_power_kw == Approx(kw).epsilon(1e-9));
    CHECK(e.energy->kwh == Approx(kw * e.expected_days * 24).epsilon(1e-9));
    CHECK(e.energy->gpu_power_w > 90);
    CHECK(e.energy->gpu_power_w < 700);

    const auto j = sim::plan_json(plan, e);
    CHECK(j["energy_kwh"].get<double>() == Approx(kw * e.expected_days * 24).epsilon(1e-9));
    CHECK(j["energy_cost"].get<double>() == Approx(0.1 * kw * e.expected_days * 24).epsilon(1e-9));
    CHECK(j["energy_currency"] == "EUR");
    CHECK(j["pue"].get<double>() == 1.2);
    CHECK(j["avg_power_w_per_gpu"].get<double>() == Approx(gpu_w).epsilon(1e-9));
    CHECK(j["facility_power_kw"].get<double>() == Approx(kw).epsilon(1e-9));
    CHECK(j["co2_kg"].is_null()); // no grid intensity
    CHECK(j["energy_kwh_per_million_tokens"].get<double>() ==
          Approx(kw * e.expected_days * 24 / (plan.training.tokens / 1e6)).epsilon(1e-9));
    CHECK_FALSE(j.contains("energy_note"));
    // CSV carries the columns.
    const std::string csv = sim::plans_csv(nlohmann::json::array({j}));
    CHECK(csv.find("energy_kwh") != std::string::npos);
    CHECK(csv.find("facility_power_kw") != std::string::npos);
}

TEST_CASE("without a power section every energy figure is null with a note, never 0", "[energy]") {
    auto plan = test::small_plan(2, 1, 4);
    plan.energy.price_per_kwh = 0.7;
    plan.energy.grid_g_co2_per_kwh = 500;
    const auto e = sim::estimate_plan(plan);
    REQUIRE(e.step);
    CHECK_FALSE(e.energy);
    const auto j = sim::plan_json(plan, e);
    for (const char* k : {"energy_kwh", "energy_cost", "avg_power_w_per_gpu", "facility_power_kw", "co2_kg",
                          "energy_kwh_per_million_tokens"}) {
        CAPTURE(k);
        REQUIRE(j.contains(k));
        CHECK(j[k].is_null());
    }
    CHECK(j["energy_note"].get<std::string>().find("no power section") != std::string::npos);
}
