// Arithmetic over a plain struct of counters (statistics summed over layers or repetitions, or
// subtracted to get what happened between two snapshots), written once over the struct's list of
// its fields, so that no operation can leave a field out:
//
//   struct CacheStats {
//       uint64_t hits = 0, misses = 0;
//       double seconds = 0;
//       static constexpr auto fields() {
//           return std::tuple{&CacheStats::hits, &CacheStats::misses, &CacheStats::seconds};
//       }
//   };
//   static_assert(lists_every_field<CacheStats>());
//   CacheStats& operator+=(const CacheStats& o) { return add_fields(*this, o); }
//
// lists_every_field holds when the listed fields are distinct and their sizes add up to the
// struct's, i.e. a field added to the struct but not to fields() stops the build. (It asks the
// struct to have no padding, which a struct of 8-byte counters never has.)
#pragma once

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

namespace strata {

namespace counter_fields_detail {

template <class A, class B>
constexpr bool same_field(A a, B b) {
    if constexpr (std::is_same_v<A, B>) {
        return a == b;
    } else {
        return false;
    }
}

// How many fields of the list `fields` are `f`.
template <class F, class Fields>
constexpr size_t count_of(F f, const Fields& fields) {
    return std::apply([f](auto... g) { return (size_t{0} + ... + size_t{same_field(f, g)}); },
                      fields);
}

}  // namespace counter_fields_detail

template <class T>
constexpr bool lists_every_field() {
    constexpr auto fields = T::fields();
    return std::apply(
        [&](auto... field) {
            const size_t bytes = (size_t{0} + ... + sizeof(std::declval<T&>().*field));
            // Each listed field equals itself and no other.
            const size_t equal_pairs =
                (size_t{0} + ... + counter_fields_detail::count_of(field, fields));
            return bytes == sizeof(T) && equal_pairs == sizeof...(field);
        },
        fields);
}

template <class T>
T& add_fields(T& a, const T& b) {
    std::apply([&](auto... field) { ((a.*field += b.*field), ...); }, T::fields());
    return a;
}

template <class T>
T subtract_fields(T a, const T& b) {
    std::apply([&](auto... field) { ((a.*field -= b.*field), ...); }, T::fields());
    return a;
}

}  // namespace strata
