// Helpers shared by the filter implementations (jinja_filters.cpp,
// jinja_sequence_filters.cpp). Internal to the template implementation.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "template/jinja_value.h"
#include "util/result.h"

namespace strata::jinja {

class Renderer;

namespace filter_support {

using Args = std::vector<std::optional<Value>>;

Result<std::string> str_of(const Value& v);
Result<int64_t> int_arg(const std::optional<Value>& v, std::string_view what, int64_t dflt);
bool bool_arg(const std::optional<Value>& v, bool dflt);
Result<std::string> str_arg(const std::optional<Value>& v, std::string dflt);
// Looks up "a.b.0" on an item, each part as obj[part] (numbers index sequences).
Result<Value> attribute_path(Renderer& r, const Value& item, const Value& attribute);
// Sort keys ignore case unless asked not to (jinja2's ignore_case postprocessing).
Value fold_case(const Value& v, bool case_sensitive);
Result<Value> key_of(Renderer& r, const Value& item, const std::optional<Value>& attribute,
                     bool case_sensitive);
// Stable sort order of precomputed keys; comparison errors (mixed types) are reported.
Result<std::vector<size_t>> sorted_order(Renderer& r, const std::vector<Value>& keys, bool reverse);

// Sequence filters (jinja_sequence_filters.cpp).
Result<Value> f_batch(Renderer& r, Value& v, CallArgs& a);
Result<Value> f_dictsort(Renderer& r, Value& v, CallArgs& a);
Result<Value> f_first(Renderer& r, Value& v, CallArgs& a);
Result<Value> f_last(Renderer& r, Value& v, CallArgs& a);
Result<Value> f_items(Renderer& r, Value& v, CallArgs& a);
Result<Value> f_join(Renderer& r, Value& v, CallArgs& a);
Result<Value> f_list(Renderer& r, Value& v, CallArgs& a);
Result<Value> f_map(Renderer& r, Value& v, CallArgs& a);
Result<Value> f_max(Renderer& r, Value& v, CallArgs& a);
Result<Value> f_min(Renderer& r, Value& v, CallArgs& a);
Result<Value> f_reverse(Renderer& r, Value& v, CallArgs& a);
Result<Value> f_select(Renderer& r, Value& v, CallArgs& a);
Result<Value> f_reject(Renderer& r, Value& v, CallArgs& a);
Result<Value> f_selectattr(Renderer& r, Value& v, CallArgs& a);
Result<Value> f_rejectattr(Renderer& r, Value& v, CallArgs& a);
Result<Value> f_sort(Renderer& r, Value& v, CallArgs& a);
Result<Value> f_sum(Renderer& r, Value& v, CallArgs& a);
Result<Value> f_unique(Renderer& r, Value& v, CallArgs& a);

}  // namespace filter_support
}  // namespace strata::jinja
