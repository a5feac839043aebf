#include "trainsim/sim/run/billing.hpp"

#include <cmath>
#include <stdexcept>

namespace trainsim::sim {

namespace {

// Seconds in one billing increment of an hourly basis.
double increment_s(model::BillingIncrement inc) {
    switch (inc) {
        case model::BillingIncrement::second:
            return 1.0;
        case model::BillingIncrement::minute:
            return 60.0;
        case model::BillingIncrement::hour:
            return 3600.0;
    }
    throw std::logic_error("increment_s: unknown increment");
}

// Months in a commitment's term (0: not a term).
int term_months(model::Commitment c) {
    switch (c) {
        case model::Commitment::monthly:
            return 1;
        case model::Commitment::quarterly:
            return 3;
        case model::Commitment::annual:
            return 12;
        case model::Commitment::on_demand:
        case model::Commitment::spot:
            return 0;
    }
    throw std::logic_error("term_months: unknown commitment");
}

// Whole units of `unit_hours` that cover `hours`. The quotient is shaved by a relative 1e-12
// first, so that a run of exactly k units (up to rounding in its own arithmetic) pays k, not k + 1.
double whole_units(double hours, double unit_hours) {
    if (!(hours > 0)) return 0;
    return std::ceil(hours / unit_hours * (1.0 - 1e-12));
}

} // namespace

bool has_price(const model::Pricing& pricing) {
    return pricing.commitment == model::Commitment::spot ? pricing.spot.rate.has_value() : pricing.rate.has_value();
}

std::vector<model::Commitment> billing_options(const model::Pricing& pricing) {
    std::vector<model::Commitment> out;
    if (pricing.rate)
        for (auto c : {model::Commitment::on_demand, model::Commitment::monthly, model::Commitment::quarterly,
                       model::Commitment::annual})
            out.push_back(c);
    // Spot capacity is billed by the hour (the loader refuses a spot rate on a monthly basis).
    if (pricing.spot.rate && pricing.basis != model::PriceBasis::machine_month) out.push_back(model::Commitment::spot);
    return out;
}

Bill bill(const model::Pricing& pricing, model::Commitment how, double wall_hours, int nodes, int gpus_per_node) {
    const bool spot = how == model::Commitment::spot;
    const std::optional<double>& list = spot ? pricing.spot.rate : pricing.rate;
    if (!list) throw std::logic_error("bill: no price for this way of paying");
    Bill b;
    b.commitment = how;
    b.used_hours = std::max(0.0, wall_hours);
    const int months = term_months(how);
    if (months > 0) {
        b.billed_hours = whole_units(b.used_hours, months * kHoursPerMonth) * months * kHoursPerMonth;
    } else if (pricing.basis == model::PriceBasis::machine_month) {
        b.billed_hours = whole_units(b.used_hours, kHoursPerMonth) * kHoursPerMonth;
    } else {
        const double inc_h = increment_s(pricing.increment) / 3600.0;
        b.billed_hours = whole_units(b.used_hours, inc_h) * inc_h;
    }
    const double gpus = static_cast<double>(nodes) * gpus_per_node;
    switch (pricing.basis) {
        case model::PriceBasis::gpu_hour:
            b.unit = "GPU-hour";
            b.billed_units = b.billed_hours * gpus;
            break;
        case model::PriceBasis::machine_hour:
            b.unit = "machine-hour";
            b.billed_units = b.billed_hours * nodes;
            break;
        case model::PriceBasis::machine_month:
            b.unit = "machine-month";
            b.billed_units = b.billed_hours / kHoursPerMonth * nodes;
            break;
    }
    double discount = 0;
    if (!spot)
        if (auto it = pricing.discounts.find(how); it != pricing.discounts.end()) discount = it->second;
    b.rate_after_discount = *list * (1.0 - discount);
    b.cost = b.billed_units * b.rate_after_discount;
    b.cost_prorated = b.billed_hours > 0 ? b.cost * b.used_hours / b.billed_hours : 0.0;
    b.unused_fraction = b.billed_hours > 0 ? (b.billed_hours - b.used_hours) / b.billed_hours : 0.0;
    return b;
}

} // namespace trainsim::sim
