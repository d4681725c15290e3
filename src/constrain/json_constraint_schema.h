// The compiled form of a JSON Schema that JsonConstraint matches against: a flat table of nodes
// that refer to each other by index, so recursive $refs are cycles in the table rather than an
// infinite expansion. Internal to json_constraint*.cpp.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/result.h"

namespace strata {

inline constexpr uint32_t kNoNode = std::numeric_limits<uint32_t>::max();
inline constexpr uint32_t kUnbounded = std::numeric_limits<uint32_t>::max();

// Bits of JsonNode::types. kNumber always comes with kInteger (an integer is a number).
enum JsonTypeBit : uint8_t {
    kTypeNull = 1,
    kTypeBoolean = 2,
    kTypeInteger = 4,
    kTypeNumber = 8,
    kTypeString = 16,
    kTypeArray = 32,
    kTypeObject = 64,
    kTypeAny = 127,
};

struct JsonProperty {
    std::string key;  // JSON-encoded, quotes included: "\"name\""
    uint32_t node = kNoNode;
    bool required = false;
};

struct JsonNode {
    enum class Kind : uint8_t {
        Typed,     // one or more JSON types, each with the constraints below
        Literals,  // one of a fixed set of compact JSON texts (enum, const, true/false, null)
        Union,     // any of `alternatives` (anyOf/oneOf); none at all = nothing matches
        Alias,     // the same as `target` ($ref)
    };
    Kind kind = Kind::Typed;
    uint8_t types = 0;

    // string: length in code points
    uint32_t min_length = 0;
    uint32_t max_length = kUnbounded;

    // array: item k is prefix_items[k], then `items` (kNoNode: no further items)
    std::vector<uint32_t> prefix_items;
    uint32_t items = kNoNode;
    uint32_t min_items = 0;
    uint32_t max_items = kUnbounded;

    // object: either the listed properties in schema order (has_properties), or any keys with
    // values of `additional` (kNoNode: only {}).
    bool has_properties = false;
    std::vector<JsonProperty> properties;
    std::vector<uint32_t> next_required;  // [i] = first required index >= i, or properties.size()
    uint32_t additional = kNoNode;

    std::vector<std::string> literals;   // Literals: sorted, unique
    std::vector<uint32_t> alternatives;  // Union
    uint32_t target = kNoNode;           // Alias

    // Length of the shortest value this node accepts (kUnbounded: none), filled by the compiler.
    uint32_t min_size = kUnbounded;

    uint32_t item_node(uint32_t index) const {
        if (index >= max_items) return kNoNode;
        return index < prefix_items.size() ? prefix_items[index] : items;
    }
};

struct JsonGrammar {
    std::vector<JsonNode> nodes;
    uint32_t root = kNoNode;
    std::string prefix, suffix;  // literal bytes around the value (JsonConstraint::wrapped)
    // Shared helper nodes the matcher starts when a typed value begins with t/f, n, or a key.
    uint32_t bool_literals = kNoNode;
    uint32_t null_literal = kNoNode;
    uint32_t key_string = kNoNode;

    // The node behind any chain of aliases (the compiler rejects alias cycles).
    uint32_t resolve(uint32_t id) const {
        while (nodes[id].kind == JsonNode::Kind::Alias) id = nodes[id].target;
        return id;
    }
    // The shortest text the node accepts; the node must have a finite min_size.
    std::string min_text(uint32_t id) const;
    // Appends min_text(id) to out.
    void append_min_text(uint32_t id, std::string& out) const;
};

// Compiles the supported JSON Schema subset (see json_constraint.h); the error names the keyword
// that cannot be honoured.
Result<std::shared_ptr<JsonGrammar>> compile_json_schema(const nlohmann::ordered_json& schema);

}  // namespace strata
