// Money as the capacity is billed (docs/model.md "Billing"): a run pays for whole billing units,
// not for the hours it used. The rules, for a run of wall-clock time W on N GPUs in M machines:
//
//   gpu_hour / machine_hour, on demand or spot:  billed time = ceil(W / increment) x increment
//       (increment: second, minute or hour, pricing.increment), units = billed hours x N (GPU-hours)
//       or x M (machine-hours);
//   machine_month, on demand:                    billed time = ceil(W / 730 h) months, units = months x M;
//   a commitment (monthly / quarterly / annual): a term of 1 / 3 / 12 months of 730 h, paid in full
//       for every term begun: billed time = ceil(W / term) x term, on any basis, at the list rate
//       less the commitment's discount.
//
//   cost            = units x rate x (1 - discount)              as charged
//   cost_prorated   = W / billed time x cost                     the hours used at the same rate
//   unused_fraction = (billed time - W) / billed time            the part of the bill not used
//
// A month is 730 h (8760 h / 12), as cloud providers' monthly prices assume (AWS, GCP and Azure
// quote 730 hours per month).
#pragma once

#include "trainsim/model/core/scenario.hpp"

#include <string>
#include <vector>

namespace trainsim::sim {

inline constexpr double kHoursPerMonth = 730.0;

struct Bill {
    model::Commitment commitment = model::Commitment::on_demand; // how the capacity is paid for
    double cost = 0;                                             // as charged
    double cost_prorated = 0;       // the hours used at the same rate (the old pro-rated figure)
    double billed_units = 0;        // in the unit of the rate (`unit`)
    std::string unit;               // "GPU-hour", "machine-hour" or "machine-month"
    double billed_hours = 0;        // wall-clock hours paid for
    double used_hours = 0;          // wall-clock hours used
    double unused_fraction = 0;     // (billed - used) / billed; 0 for a run of no time
    double rate_after_discount = 0; // per unit
};

// The bill of a run of `wall_hours` on `nodes` machines of `gpus_per_node` GPUs paid as `how`.
// Preconditions: the price `how` needs is present (pricing.rate; pricing.spot.rate for spot),
// wall_hours >= 0, nodes >= 1, gpus_per_node >= 1.
[[nodiscard]] Bill bill(const model::Pricing& pricing, model::Commitment how, double wall_hours, int nodes,
                        int gpus_per_node);

// The ways of paying a pricing section offers: on demand and each commitment when it has a rate,
// spot when it has a spot rate.
[[nodiscard]] std::vector<model::Commitment> billing_options(const model::Pricing& pricing);

// Whether a plan's pricing gives a price for the way it pays (pricing.commitment).
[[nodiscard]] bool has_price(const model::Pricing& pricing);

} // namespace trainsim::sim
