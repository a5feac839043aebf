// Max-min fair bandwidth sharing (sim/flow_model.hpp) against closed-form answers.
#include "trainsim/sim/network/flow_model.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <span>
#include <vector>

using trainsim::sim::FlowModel;
using trainsim::sim::LinkUse;

TEST_CASE("n flows on one link share it equally", "[network][flow]") {
    // Closed form: capacity / n.
    FlowModel fm({12.0});
    for (int i = 0; i < 4; ++i) fm.add_flow({{0, 1.0}});
    const auto r = fm.solve();
    REQUIRE(r.size() == 4);
    for (const double x : r) CHECK(x == Approx(3.0));
}

TEST_CASE("parking lot: the long flow is held by the tighter link, the short ones take the rest", "[network][flow]") {
    // Bertsekas & Gallager, Data Networks, sec. 6.5.2: link A (capacity 1) carries flows 0 and 1,
    // link B (capacity 2) carries flows 0 and 2. A is the bottleneck of flows 0 and 1 (1/2 each);
    // flow 2 gets what B has left: 2 - 1/2 = 3/2.
    FlowModel fm({1.0, 2.0});
    fm.add_flow({{0, 1.0}, {1, 1.0}});
    fm.add_flow({{0, 1.0}});
    fm.add_flow({{1, 1.0}});
    const auto r = fm.solve();
    CHECK(r[0] == Approx(0.5));
    CHECK(r[1] == Approx(0.5));
    CHECK(r[2] == Approx(1.5));
}

TEST_CASE("a flow crossing a link twice counts twice against it", "[network][flow]") {
    // A ring hop routed twice over one link (weight 2) next to a plain flow: 2r + r = 3 -> r = 1.
    FlowModel fm({3.0});
    fm.add_flow({{0, 1.0}, {0, 1.0}});  // merged into weight 2
    fm.add_flow({{0, 1.0}});
    const auto r = fm.solve();
    CHECK(r[0] == Approx(1.0));
    CHECK(r[1] == Approx(1.0));
}

TEST_CASE("a capped flow leaves its share to the others", "[network][flow]") {
    // Capacity 1, one flow capped at 0.2: the other gets 0.8.
    FlowModel fm({1.0});
    fm.add_flow({{0, 1.0}}, 0.2);
    fm.add_flow({{0, 1.0}});
    const auto r = fm.solve();
    CHECK(r[0] == Approx(0.2));
    CHECK(r[1] == Approx(0.8));
}

TEST_CASE("a flow on no link with no cap is unbounded", "[network][flow]") {
    FlowModel fm({1.0});
    fm.add_flow({});
    CHECK(std::isinf(fm.solve()[0]));
}

TEST_CASE("finish times re-share the link when a transfer completes", "[network][flow]") {
    // Capacity 1 B/s, transfers of 1 and 3 bytes starting together: both at 1/2 until the small
    // one is done at t = 2 s; the large one has 2 bytes left at 1 B/s and ends at t = 4 s.
    FlowModel fm({1.0});
    fm.add_flow({{0, 1.0}});
    fm.add_flow({{0, 1.0}});
    const auto t = fm.finish_times({1.0, 3.0});
    CHECK(t[0] == Approx(2.0));
    CHECK(t[1] == Approx(4.0));
}

TEST_CASE("flows over unknown links or with bad weights are rejected", "[network][flow]") {
    FlowModel fm({1.0});
    CHECK_THROWS_AS(fm.add_flow({{3, 1.0}}), std::out_of_range);
    CHECK_THROWS_AS(fm.add_flow({{0, 0.0}}), std::invalid_argument);
}

TEST_CASE("a refused flow leaves the model as it was, and links shared by flows merge per flow only", "[network][flow]") {
    // Links 0 (capacity 4) and 1 (capacity 1); a link over the topology's range is refused after a
    // good use in the same flow: nothing of it may remain.
    FlowModel fm({4.0, 1.0});
    CHECK_THROWS_AS(fm.add_flow({{1, 1.0}, {7, 1.0}}), std::out_of_range);
    CHECK(fm.num_flows() == 0);
    // Flow A names link 0 twice apart (weight 1 + 1 = 2 on it) and link 1 once; flow B uses link 0
    // once. Link 1 holds A at 1 B/s; link 0 then carries 2 x 1 from A, leaving 2 for B.
    fm.add_flow({{0, 1.0}, {1, 1.0}, {0, 1.0}});
    fm.add_flow({{0, 1.0}});
    const auto r = fm.solve();
    CHECK(r[0] == Approx(1.0));
    CHECK(r[1] == Approx(2.0));
}

TEST_CASE("a flow model over a borrowed capacity table solves as one that owns it", "[network][flow]") {
    const std::vector<double> capacity{2.0, 6.0};
    FlowModel owned(capacity);
    FlowModel borrowed{std::span<const double>(capacity)};
    for (auto* fm : {&owned, &borrowed}) {
        fm->add_flow({{0, 1.0}, {1, 1.0}});
        fm->add_flow({{1, 1.0}});
    }
    // Link 0 caps the first flow at 2; link 1 leaves 6 - 2 = 4 to the second.
    CHECK(owned.solve() == borrowed.solve());
    CHECK(borrowed.solve()[1] == Approx(4.0));
}
