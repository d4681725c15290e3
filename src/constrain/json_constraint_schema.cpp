// JSON Schema → JsonGrammar. $refs become Alias nodes compiled from a worklist, so a recursive
// schema compiles to a cyclic table instead of expanding forever. After compiling, every node
// gets the length of its shortest value (a fixpoint over the cycles); options that can never
// finish (a required property whose schema recurses without end, `false`) are pruned, so a
// matcher that follows the grammar can always complete what it started.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <map>
#include <utility>

#include "constrain/json_constraint_schema.h"

namespace strata {

namespace {

using Json = nlohmann::ordered_json;

// Deeper nesting in one schema document is more likely an attack than a real schema.
constexpr int kMaxSchemaDepth = 64;
// minLength/minItems beyond this would force megabytes of output; treat as unsatisfiable.
constexpr uint64_t kMaxMinSize = 1u << 20;
constexpr uint32_t kMaxForcedCount = 4096;

constexpr uint32_t kAnyNode = 0;
constexpr uint32_t kNeverNode = 1;

// Keywords that constrain values in ways this matcher does not enforce. Rejecting them is
// better than producing output the client's validator refuses.
constexpr const char* kUnsupportedKeywords[] = {
    "not",
    "if",
    "then",
    "else",
    "patternProperties",
    "propertyNames",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "contains",
    "minContains",
    "maxContains",
    "unevaluatedProperties",
    "unevaluatedItems",
    "multipleOf",
    "minProperties",
    "maxProperties",
    "$dynamicRef",
    "$recursiveRef",
};

uint64_t add_sizes(uint64_t a, uint64_t b) {
    return std::min<uint64_t>(a + b, kUnbounded);
}

uint8_t type_bit_of(const Json& v) {
    switch (v.type()) {
        case Json::value_t::null:
            return kTypeNull;
        case Json::value_t::boolean:
            return kTypeBoolean;
        case Json::value_t::number_integer:
        case Json::value_t::number_unsigned:
            return kTypeInteger;
        case Json::value_t::number_float:
            return kTypeNumber;
        case Json::value_t::string:
            return kTypeString;
        case Json::value_t::array:
            return kTypeArray;
        case Json::value_t::object:
            return kTypeObject;
        default:
            return 0;
    }
}

// Shortest length of a value of one type of a Typed node, given the sizes of all nodes.
uint64_t type_size(const JsonNode& n, uint8_t bit, const std::vector<JsonNode>& nodes) {
    switch (bit) {
        case kTypeNull:
        case kTypeBoolean:
            return 4;  // null, true
        case kTypeInteger:
        case kTypeNumber:
            return 1;  // 0
        case kTypeString:
            return n.min_length > n.max_length ? kUnbounded : 2 + uint64_t{n.min_length};
        case kTypeArray: {
            if (n.min_items > n.max_items) return kUnbounded;
            uint64_t size = 2 + (n.min_items > 0 ? n.min_items - 1 : 0);
            for (uint32_t k = 0; k < n.min_items; ++k) {
                const uint32_t item = n.item_node(k);
                if (item == kNoNode) return kUnbounded;
                size = add_sizes(size, nodes[item].min_size);
            }
            return size;
        }
        case kTypeObject: {
            uint64_t size = 1;  // '{', then ',' or '}' after each member
            bool any = false;
            for (const JsonProperty& p : n.properties) {
                if (!p.required) continue;
                size = add_sizes(size, p.key.size() + 2 + uint64_t{nodes[p.node].min_size});
                any = true;
            }
            return add_sizes(size, any ? 0 : 1);
        }
        default:
            return kUnbounded;
    }
}

constexpr uint8_t kTypeOrder[] = {kTypeInteger, kTypeNumber, kTypeNull,  kTypeBoolean,
                                  kTypeString,  kTypeArray,  kTypeObject};

uint64_t node_size(const JsonNode& n, const std::vector<JsonNode>& nodes) {
    uint64_t best = kUnbounded;
    switch (n.kind) {
        case JsonNode::Kind::Typed:
            for (uint8_t bit : kTypeOrder) {
                if (n.types & bit) best = std::min(best, type_size(n, bit, nodes));
            }
            break;
        case JsonNode::Kind::Literals:
            for (const std::string& s : n.literals) best = std::min<uint64_t>(best, s.size());
            break;
        case JsonNode::Kind::Union:
            for (uint32_t a : n.alternatives) best = std::min<uint64_t>(best, nodes[a].min_size);
            break;
        case JsonNode::Kind::Alias:
            best = nodes[n.target].min_size;
            break;
    }
    return best > kMaxMinSize ? kUnbounded : best;
}

class SchemaCompiler {
  public:
    explicit SchemaCompiler(const Json& root) : root_(root) {}

    Result<std::shared_ptr<JsonGrammar>> run() {
        JsonNode any;
        any.types = kTypeAny;
        any.items = kAnyNode;
        any.additional = kAnyNode;
        nodes_.push_back(std::move(any));
        JsonNode never;
        never.kind = JsonNode::Kind::Union;
        nodes_.push_back(std::move(never));

        auto g = std::make_shared<JsonGrammar>();
        g->bool_literals = add_literals({"false", "true"});
        g->null_literal = add_literals({"null"});
        JsonNode key;
        key.types = kTypeString;
        g->key_string = add(std::move(key));

        try {
            STRATA_ASSIGN(g->root, compile(root_, 0));
            // Compiling a $ref target may queue more targets.
            while (!pending_.empty()) {
                auto [alias, schema] = pending_.back();
                pending_.pop_back();
                STRATA_ASSIGN(const uint32_t target, compile(*schema, 0));
                nodes_[alias].target = target;
            }
        } catch (const nlohmann::json::exception& e) {
            return err("JSON schema: ", e.what());
        }
        STRATA_TRY(check_cycles());
        compute_sizes();
        if (nodes_[g->root].min_size == kUnbounded) {
            return err("JSON schema: no value satisfies it (or the smallest one is over 1 MB)");
        }
        prune();
        g->nodes = std::move(nodes_);
        return g;
    }

  private:
    uint32_t add(JsonNode n) {
        nodes_.push_back(std::move(n));
        return static_cast<uint32_t>(nodes_.size() - 1);
    }

    uint32_t add_literals(std::vector<std::string> texts) {
        std::sort(texts.begin(), texts.end());
        texts.erase(std::unique(texts.begin(), texts.end()), texts.end());
        JsonNode n;
        n.kind = JsonNode::Kind::Literals;
        n.literals = std::move(texts);
        return add(std::move(n));
    }

    Result<uint32_t> ref(const std::string& pointer) {
        if (auto it = refs_.find(pointer); it != refs_.end()) return it->second;
        if (pointer.empty() || pointer[0] != '#') {
            return err("JSON schema: $ref \"", pointer,
                       "\" is not supported: only local refs such as #/$defs/Name");
        }
        const Json* target = nullptr;
        try {
            const Json::json_pointer ptr(pointer.substr(1));
            if (root_.contains(ptr)) target = &root_.at(ptr);
        } catch (const nlohmann::json::exception&) {
        }
        if (target == nullptr) return err("JSON schema: $ref \"", pointer, "\" points nowhere");
        JsonNode alias;
        alias.kind = JsonNode::Kind::Alias;
        const uint32_t id = add(std::move(alias));
        refs_.emplace(pointer, id);
        pending_.emplace_back(id, target);
        return id;
    }

    Result<uint32_t> compile(const Json& s, int depth) {
        if (depth > kMaxSchemaDepth) {
            return err("JSON schema: nested deeper than ", std::to_string(kMaxSchemaDepth),
                       " levels");
        }
        if (s.is_boolean()) return s.get<bool>() ? kAnyNode : kNeverNode;
        if (!s.is_object()) return err("JSON schema: a schema must be an object, true or false");
        for (const char* kw : kUnsupportedKeywords) {
            if (s.contains(kw)) return err("JSON schema: keyword \"", kw, "\" is not supported");
        }
        if (s.contains("uniqueItems") && s["uniqueItems"] == true) {
            return err("JSON schema: keyword \"uniqueItems\" is not supported");
        }
        if (s.contains("$ref")) {
            if (!s["$ref"].is_string()) return err("JSON schema: $ref must be a string");
            return ref(s["$ref"].get<std::string>());
        }
        if (s.contains("allOf")) {
            const Json& all = s["allOf"];
            if (!all.is_array() || all.size() != 1) {
                return err("JSON schema: keyword \"allOf\" is supported with one schema only");
            }
            return compile(all[0], depth + 1);
        }
        const bool nullable = s.contains("nullable") && s["nullable"] == true;
        for (const char* kw : {"anyOf", "oneOf"}) {
            if (!s.contains(kw)) continue;
            // oneOf is treated as anyOf: alternatives are rarely overlapping in practice.
            const Json& alts = s[kw];
            if (!alts.is_array()) return err("JSON schema: \"", kw, "\" must be an array");
            JsonNode u;
            u.kind = JsonNode::Kind::Union;
            for (const Json& a : alts) {
                STRATA_ASSIGN(const uint32_t id, compile(a, depth + 1));
                u.alternatives.push_back(id);
            }
            if (nullable) u.alternatives.push_back(add_literals({"null"}));
            return add(std::move(u));
        }

        STRATA_ASSIGN(uint8_t types, parse_types(s));
        if (nullable) types |= kTypeNull;

        if (s.contains("const") || s.contains("enum")) {
            std::vector<Json> values;
            if (s.contains("const")) {
                values.push_back(s["const"]);
            } else {
                if (!s["enum"].is_array()) return err("JSON schema: \"enum\" must be an array");
                values.assign(s["enum"].begin(), s["enum"].end());
            }
            std::vector<std::string> texts;
            for (const Json& v : values) {
                // A value of another type than "type" allows can never be produced.
                const uint8_t bit = type_bit_of(v);
                const bool whole =
                    bit == kTypeNumber && std::trunc(v.get<double>()) == v.get<double>();
                if ((types & bit) || (whole && (types & kTypeInteger))) texts.push_back(v.dump());
            }
            if (nullable) texts.push_back("null");
            return add_literals(std::move(texts));
        }

        JsonNode n;
        n.types = types;
        STRATA_TRY(read_count(s, "minLength", n.min_length, true));
        STRATA_TRY(read_count(s, "maxLength", n.max_length, false));
        STRATA_TRY(read_count(s, "minItems", n.min_items, true));
        STRATA_TRY(read_count(s, "maxItems", n.max_items, false));
        STRATA_TRY(compile_array(s, n, depth));
        STRATA_TRY(compile_object(s, n, depth));
        return add(std::move(n));
    }

    // The type mask; without "type", guessed from the keywords present (a schema with
    // "properties" means an object), else any type.
    Result<uint8_t> parse_types(const Json& s) {
        if (!s.contains("type")) {
            for (const char* kw : {"properties", "required", "additionalProperties"}) {
                if (s.contains(kw)) return uint8_t{kTypeObject};
            }
            for (const char* kw : {"items", "prefixItems", "minItems", "maxItems"}) {
                if (s.contains(kw)) return uint8_t{kTypeArray};
            }
            for (const char* kw : {"minLength", "maxLength", "pattern", "format"}) {
                if (s.contains(kw)) return uint8_t{kTypeString};
            }
            return uint8_t{kTypeAny};
        }
        const Json& t = s["type"];
        std::vector<Json> names =
            t.is_array() ? std::vector<Json>(t.begin(), t.end()) : std::vector<Json>{t};
        uint8_t types = 0;
        for (const Json& name : names) {
            static const std::pair<const char*, uint8_t> kNames[] = {
                {"null", kTypeNull},       {"boolean", kTypeBoolean},
                {"integer", kTypeInteger}, {"number", kTypeNumber | kTypeInteger},
                {"string", kTypeString},   {"array", kTypeArray},
                {"object", kTypeObject},
            };
            bool known = false;
            for (auto [text, bit] : kNames) {
                if (name == text) {
                    types |= bit;
                    known = true;
                }
            }
            if (!known) return err("JSON schema: unknown \"type\" ", name.dump());
        }
        return types;
    }

    static Result<void> read_count(const Json& s, const char* kw, uint32_t& out, bool forced) {
        if (!s.contains(kw)) return {};
        const Json& v = s[kw];
        if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
            return err("JSON schema: \"", kw, "\" must be a non-negative integer");
        }
        const uint64_t value = v.get<uint64_t>();
        if (forced && value > kMaxForcedCount) {
            return err("JSON schema: \"", kw, "\" of ", std::to_string(value), " is over ",
                       std::to_string(kMaxForcedCount), ", the most that can be forced");
        }
        out = static_cast<uint32_t>(std::min<uint64_t>(value, kUnbounded));
        return {};
    }

    Result<void> compile_array(const Json& s, JsonNode& n, int depth) {
        // Draft 4-7 tuple form: "items": [...] is prefixItems, then additionalItems.
        const bool tuple_items = s.contains("items") && s["items"].is_array();
        const Json* prefix = s.contains("prefixItems") ? &s["prefixItems"]
                             : tuple_items             ? &s["items"]
                                                       : nullptr;
        if (prefix != nullptr) {
            if (!prefix->is_array()) return err("JSON schema: \"prefixItems\" must be an array");
            for (const Json& item : *prefix) {
                STRATA_ASSIGN(const uint32_t id, compile(item, depth + 1));
                n.prefix_items.push_back(id);
            }
        }
        const char* rest_kw = tuple_items ? "additionalItems" : "items";
        n.items = kAnyNode;
        if (s.contains(rest_kw)) {
            const Json& rest = s[rest_kw];
            if (rest == false) {
                n.items = kNoNode;
            } else {
                STRATA_ASSIGN(n.items, compile(rest, depth + 1));
            }
        }
        return {};
    }

    Result<void> compile_object(const Json& s, JsonNode& n, int depth) {
        if (s.contains("properties")) {
            const Json& props = s["properties"];
            if (!props.is_object()) return err("JSON schema: \"properties\" must be an object");
            n.has_properties = true;
            for (const auto& [name, schema] : props.items()) {
                STRATA_ASSIGN(const uint32_t id, compile(schema, depth + 1));
                n.properties.push_back({Json(name).dump(), id, false});
            }
        }
        if (s.contains("required")) {
            const Json& req = s["required"];
            if (!req.is_array()) return err("JSON schema: \"required\" must be an array");
            for (const Json& name : req) {
                if (!name.is_string()) return err("JSON schema: \"required\" must list strings");
                const std::string key = name.dump();
                auto it = std::find_if(n.properties.begin(), n.properties.end(),
                                       [&](const JsonProperty& p) { return p.key == key; });
                if (it != n.properties.end()) {
                    it->required = true;
                } else {
                    // Required but not described: any value, after the described ones.
                    n.has_properties = true;
                    n.properties.push_back({key, kAnyNode, true});
                }
            }
        }
        // With properties listed, only those are emitted (additionalProperties is moot).
        n.additional = kAnyNode;
        if (!n.has_properties && s.contains("additionalProperties")) {
            const Json& extra = s["additionalProperties"];
            if (extra == false) {
                n.additional = kNoNode;
            } else {
                STRATA_ASSIGN(n.additional, compile(extra, depth + 1));
            }
        }
        return {};
    }

    // An alias or union cycle (a: anyOf[{$ref a}, ...]) would make the matcher expand
    // alternatives forever before reading a byte.
    Result<void> check_cycles() const {
        enum : uint8_t { kWhite, kGrey, kBlack };
        std::vector<uint8_t> color(nodes_.size(), kWhite);
        // Iterative DFS over alias/union edges; each stack entry is (node, next edge).
        for (uint32_t start = 0; start < nodes_.size(); ++start) {
            if (color[start] != kWhite) continue;
            std::vector<std::pair<uint32_t, size_t>> stack{{start, 0}};
            color[start] = kGrey;
            while (!stack.empty()) {
                auto& [id, edge] = stack.back();
                const JsonNode& n = nodes_[id];
                std::vector<uint32_t> edges = n.alternatives;
                if (n.kind == JsonNode::Kind::Alias) edges = {n.target};
                if (n.kind != JsonNode::Kind::Alias && n.kind != JsonNode::Kind::Union)
                    edges.clear();
                if (edge == edges.size()) {
                    color[id] = kBlack;
                    stack.pop_back();
                    continue;
                }
                const uint32_t next = edges[edge++];
                if (color[next] == kGrey) {
                    return err("JSON schema: a $ref/anyOf cycle refers to itself before any value");
                }
                if (color[next] == kWhite) {
                    color[next] = kGrey;
                    stack.emplace_back(next, 0);
                }
            }
        }
        return {};
    }

    // Shortest value lengths: start at "none" and lower until nothing changes; sizes only fall
    // and are bounded below, so this ends.
    void compute_sizes() {
        for (bool changed = true; changed;) {
            changed = false;
            for (JsonNode& n : nodes_) {
                const uint32_t size = static_cast<uint32_t>(node_size(n, nodes_));
                if (size < n.min_size) {
                    n.min_size = size;
                    changed = true;
                }
            }
        }
    }

    // Removes options that can never finish; shortest sizes do not change (the shortest value
    // never used them).
    void prune() {
        auto finite = [&](uint32_t id) {
            return id != kNoNode && nodes_[id].min_size != kUnbounded;
        };
        for (JsonNode& n : nodes_) {
            if (n.kind == JsonNode::Kind::Union) {
                std::erase_if(n.alternatives, [&](uint32_t a) { return !finite(a); });
            }
            if (n.kind != JsonNode::Kind::Typed) continue;
            for (uint8_t bit : kTypeOrder) {
                if ((n.types & bit) && type_size(n, bit, nodes_) == kUnbounded) n.types &= ~bit;
            }
            std::erase_if(n.properties,
                          [&](const JsonProperty& p) { return !p.required && !finite(p.node); });
            if (!finite(n.additional)) n.additional = kNoNode;
            for (uint32_t k = 0; k < n.prefix_items.size(); ++k) {
                if (!finite(n.prefix_items[k])) n.max_items = std::min(n.max_items, k);
            }
            if (!finite(n.items)) {
                n.max_items = std::min(n.max_items, static_cast<uint32_t>(n.prefix_items.size()));
            }
            n.next_required.assign(n.properties.size() + 1, n.properties.size());
            for (size_t i = n.properties.size(); i-- > 0;) {
                n.next_required[i] =
                    n.properties[i].required ? static_cast<uint32_t>(i) : n.next_required[i + 1];
            }
        }
    }

    const Json& root_;
    std::vector<JsonNode> nodes_;
    std::map<std::string, uint32_t> refs_;
    std::vector<std::pair<uint32_t, const Json*>> pending_;
};

}  // namespace

void JsonGrammar::append_min_text(uint32_t id, std::string& out) const {
    const JsonNode& n = nodes[id];
    auto smallest = [&](const std::vector<uint32_t>& ids) {
        return *std::min_element(ids.begin(), ids.end(), [&](uint32_t a, uint32_t b) {
            return nodes[a].min_size < nodes[b].min_size;
        });
    };
    switch (n.kind) {
        case JsonNode::Kind::Alias:
            return append_min_text(n.target, out);
        case JsonNode::Kind::Union:
            return append_min_text(smallest(n.alternatives), out);
        case JsonNode::Kind::Literals:
            out += *std::min_element(
                n.literals.begin(), n.literals.end(),
                [](const std::string& a, const std::string& b) { return a.size() < b.size(); });
            return;
        case JsonNode::Kind::Typed:
            break;
    }
    uint8_t best = 0;
    for (uint8_t bit : kTypeOrder) {
        if ((n.types & bit) && type_size(n, bit, nodes) == n.min_size) {
            best = bit;
            break;
        }
    }
    switch (best) {
        case kTypeNull:
            out += "null";
            break;
        case kTypeBoolean:
            out += "true";
            break;
        case kTypeInteger:
        case kTypeNumber:
            out += '0';
            break;
        case kTypeString:
            out += '"';
            out.append(n.min_length, 'a');
            out += '"';
            break;
        case kTypeArray:
            out += '[';
            for (uint32_t k = 0; k < n.min_items; ++k) {
                if (k > 0) out += ',';
                append_min_text(n.item_node(k), out);
            }
            out += ']';
            break;
        case kTypeObject: {
            out += '{';
            bool first = true;
            for (const JsonProperty& p : n.properties) {
                if (!p.required) continue;
                if (!first) out += ',';
                first = false;
                out += p.key;
                out += ':';
                append_min_text(p.node, out);
            }
            out += '}';
            break;
        }
        default:
            assert(false && "min_text of a node that accepts nothing");
    }
}

std::string JsonGrammar::min_text(uint32_t id) const {
    std::string out;
    append_min_text(id, out);
    return out;
}

Result<std::shared_ptr<JsonGrammar>> compile_json_schema(const nlohmann::ordered_json& schema) {
    return SchemaCompiler(schema).run();
}

}  // namespace strata
