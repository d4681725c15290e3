// util/counter_fields.h: the field list check catches a field left out or listed twice, and the
// arithmetic touches every listed field.
#include <gtest/gtest.h>

#include <cstdint>
#include <tuple>

#include "util/counter_fields.h"

namespace strata {
namespace {

struct Counts {
    uint64_t a = 0, b = 0;
    double c = 0;
    static constexpr auto fields() { return std::tuple{&Counts::a, &Counts::b, &Counts::c}; }
};

struct LeavesOneOut {
    uint64_t a = 0, b = 0;
    static constexpr auto fields() { return std::tuple{&LeavesOneOut::a}; }
};

struct ListsOneTwice {
    uint64_t a = 0, b = 0;
    static constexpr auto fields() { return std::tuple{&ListsOneTwice::a, &ListsOneTwice::a}; }
};

static_assert(lists_every_field<Counts>());
static_assert(!lists_every_field<LeavesOneOut>());
static_assert(!lists_every_field<ListsOneTwice>());

TEST(CounterFields, AddAndSubtractEveryField) {
    Counts x{1, 2, 0.5};
    const Counts y{10, 20, 2.0};
    add_fields(x, y);
    EXPECT_EQ(x.a, 11u);
    EXPECT_EQ(x.b, 22u);
    EXPECT_EQ(x.c, 2.5);
    const Counts d = subtract_fields(x, y);
    EXPECT_EQ(d.a, 1u);
    EXPECT_EQ(d.b, 2u);
    EXPECT_EQ(d.c, 0.5);
}

}  // namespace
}  // namespace strata
