// JSON-constrained sampling: accept/reject tables (each rejection at the byte where the text
// stops being a valid prefix), generation fuzz through TokenMask with random logits whose
// output must parse and validate against the schema, TokenMask against a token-by-token
// allows() reference, shortest_completion() from random prefixes, wrapped() literals, schema
// errors, and the apply() time on a synthetic 152k-token vocabulary.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "constrain/json_constraint.h"

namespace strata {
namespace {

using Json = nlohmann::ordered_json;

JsonConstraint make(const char* schema) {
    auto r = JsonConstraint::from_schema(Json::parse(schema));
    EXPECT_TRUE(r.ok()) << schema << ": " << (r.ok() ? "" : r.error().message);
    return std::move(r).value();
}

// ---- a validator for the schema subset, written independently of the matcher ----

size_t code_points(const std::string& s) {
    return static_cast<size_t>(
        std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

bool validate(const Json& schema, const Json& v, const Json& root, std::string& why);

bool validate_typed(const Json& s, const Json& v, const Json& root, std::string& why) {
    auto fail = [&](const std::string& msg) {
        why = msg + " at " + v.dump();
        return false;
    };
    if (s.contains("type")) {
        const Json& t = s["type"];
        const std::vector<Json> types =
            t.is_array() ? std::vector<Json>(t.begin(), t.end()) : std::vector<Json>{t};
        bool ok = false;
        for (const Json& name : types) {
            ok |= (name == "null" && v.is_null()) || (name == "boolean" && v.is_boolean()) ||
                  (name == "integer" && v.is_number_integer()) ||
                  (name == "number" && v.is_number()) || (name == "string" && v.is_string()) ||
                  (name == "array" && v.is_array()) || (name == "object" && v.is_object());
        }
        if (!ok) return fail("wrong type");
    }
    if (v.is_string()) {
        const size_t n = code_points(v.get<std::string>());
        if (s.contains("minLength") && n < s["minLength"].get<size_t>()) return fail("short");
        if (s.contains("maxLength") && n > s["maxLength"].get<size_t>()) return fail("long");
    }
    if (v.is_array()) {
        if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return fail("few");
        if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return fail("many");
        const size_t prefix = s.contains("prefixItems") ? s["prefixItems"].size() : 0;
        for (size_t i = 0; i < v.size(); ++i) {
            const Json item = i < prefix            ? s["prefixItems"][i]
                              : s.contains("items") ? s["items"]
                                                    : Json(true);
            if (!validate(item, v[i], root, why)) return false;
        }
    }
    if (v.is_object()) {
        if (s.contains("required")) {
            for (const Json& name : s["required"]) {
                if (!v.contains(name.get<std::string>())) return fail("missing " + name.dump());
            }
        }
        if (s.contains("properties")) {
            const Json& props = s["properties"];
            size_t last_index = 0;
            for (const auto& [key, value] : v.items()) {
                if (!props.contains(key)) return fail("extra property " + key);
                // Emitted in the schema's order.
                size_t index = 0;
                for (const auto& [name, _] : props.items()) {
                    if (name == key) break;
                    ++index;
                }
                if (index < last_index) return fail("out of order " + key);
                last_index = index;
                if (!validate(props[key], value, root, why)) return false;
            }
        } else if (s.contains("additionalProperties")) {
            for (const auto& [key, value] : v.items()) {
                if (!validate(s["additionalProperties"], value, root, why)) return false;
            }
        }
    }
    return true;
}

bool validate(const Json& s, const Json& v, const Json& root, std::string& why) {
    if (s.is_boolean()) return s.get<bool>() || (why = "schema false", false);
    if (s.contains("$ref")) {
        const std::string ref = s["$ref"].get<std::string>();
        return validate(root.at(Json::json_pointer(ref.substr(1))), v, root, why);
    }
    if (s.contains("allOf")) return validate(s["allOf"][0], v, root, why);
    if (s.contains("nullable") && s["nullable"] == true && v.is_null()) return true;
    for (const char* kw : {"anyOf", "oneOf"}) {
        if (!s.contains(kw)) continue;
        for (const Json& alt : s[kw]) {
            if (validate(alt, v, root, why)) return true;
        }
        why = "no alternative matches " + v.dump();
        return false;
    }
    if (s.contains("const") && v != s["const"]) return why = "not the const", false;
    if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end()) {
        return why = "not in enum: " + v.dump(), false;
    }
    return validate_typed(s, v, root, why);
}

// Parses text and validates it; an empty string when fine, else what is wrong.
std::string check_output(const Json& schema, const std::string& text) {
    Json v;
    try {
        v = Json::parse(text);
    } catch (const std::exception& e) {
        return std::string("does not parse: ") + e.what();
    }
    std::string why;
    if (!validate(schema, v, schema, why)) return why;
    return "";
}

// ---- schemas used in several tests ----

const char* kPersonSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 12, "description": "ignored"},
    "age": {"type": "integer"},
    "ok": {"type": "boolean"},
    "color": {"enum": ["red", "green", 3, null]},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
    "score": {"type": "number"},
    "nick": {"type": ["string", "null"], "minLength": 2}
  },
  "required": ["name", "age", "ok", "color", "tags"]
})";

const char* kTreeSchema = R"({
  "$defs": {"node": {"type": "object",
    "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
    "required": ["v", "kids"]}},
  "$ref": "#/$defs/node"
})";

const char* kAnyOfSchema = R"({"anyOf": [
  {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
  {"type": "object", "properties": {"x": {"type": "string"}, "y": {"type": "boolean"}}, "required": ["x", "y"]},
  {"type": "array", "items": {"type": "number"}, "minItems": 1},
  {"type": "null"}
]})";

const char* kMixedSchema = R"({
  "type": "object",
  "properties": {
    "pair": {"prefixItems": [{"type": "string", "minLength": 3, "maxLength": 5}, {"const": {"k": [1, 2]}}], "items": false},
    "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
    "none": {"type": "object", "additionalProperties": false},
    "opt": {"allOf": [{"$ref": "#/definitions/choice"}]}
  },
  "required": ["pair", "counts"],
  "definitions": {"choice": {"type": "string", "enum": ["a", "ab", "abc"], "nullable": true}}
})";

// ---- accept / reject tables ----

struct Accept {
    const char* schema;  // nullptr: any_object()
    std::string doc;
};

JsonConstraint make_or_any(const char* schema) {
    return schema ? make(schema) : JsonConstraint::any_object();
}

TEST(JsonConstraint, AcceptsValidDocumentsByteByByteAndInRandomChunks) {
    const std::vector<Accept> cases = {
        {nullptr, "{}"},
        {nullptr, R"({"a":[1,-2.5e+10,0,-0,0.125E-3,true,false,null,{"b":"c"},[]],"d":{}})"},
        {nullptr, "{ \"a\" :\t1 ,\n\"b\"  :  [ 1 , 2 ] }"},
        {nullptr, R"({"s":"\"\\\/\b\f\n\r\t\u00e9\uD83D\uDE00\u0000"})"},
        {nullptr, "{\"s\":\"中文é😀\xF4\x8F\xBF\xBF\"}"},
        {kPersonSchema, R"({"name":"Ann","age":-3,"ok":true,"color":null,"tags":[]})"},
        {kPersonSchema,
         R"({"name":"Bob","age":40,"ok":false,"color":3,"tags":["a","b"],"score":1.5e3,"nick":"bo"})"},
        {kPersonSchema, R"({"name":"","age":0,"ok":true,"color":"green","tags":[],"nick":null})"},
        {kTreeSchema, R"({"v":1,"kids":[{"v":2,"kids":[]},{"v":3,"kids":[{"v":4,"kids":[]}]}]})"},
        {kAnyOfSchema, R"({"x":5})"},
        {kAnyOfSchema, R"({"x":"s","y":true})"},
        {kAnyOfSchema, "[1,2.5]"},
        {kAnyOfSchema, "null"},
        {kMixedSchema, R"({"pair":["abc",{"k":[1,2]}],"counts":{}})"},
        {kMixedSchema,
         R"({"pair":["abcde",{"k":[1,2]}],"counts":{"x":1,"y":-2},"none":{},"opt":"ab"})"},
        {kMixedSchema, R"({"pair":["abc",{"k":[1,2]}],"counts":{"":0},"opt":null})"},
        {R"({"type":"string","minLength":1})", "\"x\""},
        {R"({"const":"hi"})", "\"hi\""},
        {"true", R"([{"a":null},"x",1])"},
        {"{}", "false"},
    };
    std::mt19937 rng(1234);
    for (const Accept& a : cases) {
        SCOPED_TRACE(a.doc);
        JsonConstraint bytewise = make_or_any(a.schema);
        for (size_t i = 0; i < a.doc.size(); ++i) {
            ASSERT_FALSE(bytewise.complete()) << "complete early at byte " << i;
            ASSERT_TRUE(bytewise.advance(a.doc.substr(i, 1))) << "rejected byte " << i;
        }
        EXPECT_TRUE(bytewise.complete());
        EXPECT_TRUE(bytewise.can_end());
        EXPECT_EQ(bytewise.shortest_completion(), "");
        EXPECT_FALSE(bytewise.allows(" "));
        for (int split = 0; split < 20; ++split) {
            JsonConstraint chunked = make_or_any(a.schema);
            for (size_t i = 0; i < a.doc.size();) {
                const size_t n = std::uniform_int_distribution<size_t>(1, 7)(rng);
                ASSERT_TRUE(chunked.allows(a.doc.substr(i, n)));
                ASSERT_TRUE(chunked.advance(a.doc.substr(i, n))) << "chunk at " << i;
                i += n;
            }
            EXPECT_TRUE(chunked.complete());
        }
    }
}

TEST(JsonConstraint, RootNumbersAndEnumsThatCouldGrowMayEnd) {
    JsonConstraint number = make(R"({"type":"number"})");
    ASSERT_TRUE(number.advance("-0.5E-3"));
    EXPECT_TRUE(number.can_end());
    EXPECT_FALSE(number.complete());
    EXPECT_TRUE(number.allows("1"));

    JsonConstraint choice = make(R"({"enum":[1,12,"x"]})");
    ASSERT_TRUE(choice.advance("1"));
    EXPECT_TRUE(choice.can_end());
    EXPECT_TRUE(choice.allows("2"));
    EXPECT_FALSE(choice.allows("3"));
    ASSERT_TRUE(choice.advance("2"));
    EXPECT_TRUE(choice.complete());
}

struct Reject {
    const char* schema;  // nullptr: any_object()
    std::string good;    // accepted in full
    std::string bad;     // its first byte is rejected
};

TEST(JsonConstraint, RejectsInvalidDocumentsAtTheFirstBadByte) {
    const std::vector<Reject> cases = {
        {nullptr, R"({"a":1,)", "}"},                 // trailing comma
        {nullptr, R"({"a":[1,)", "]}"},               // trailing comma in array
        {nullptr, R"({"a":0)", "1}"},                 // leading zero
        {nullptr, R"({"a":-)", "x}"},                 // '-' needs a digit
        {nullptr, R"({"a":1.)", "e5}"},               // '.' needs a digit
        {nullptr, "{", "a:1}"},                       // unquoted key
        {nullptr, "{\"a\":\"x", "\n\"}"},             // control char in a string
        {nullptr, R"({"a":"\)", "x\"}"},              // bad escape
        {nullptr, R"({"a":"\u00)", "g0\"}"},          // bad \u digit
        {nullptr, R"({"a":"\uD)", "C00\"}"},          // lone low surrogate
        {nullptr, R"({"a":"\uD800)", "x\"}"},         // high surrogate without a low one
        {nullptr, R"({"a":"\uD800\uD)", "800\"}"},    // high surrogate followed by a high one
        {nullptr, "{\"a\":\"", "\xC0\x80\"}"},        // overlong UTF-8
        {nullptr, "{\"a\":\"\xE0", "\x80\x80\"}"},    // overlong 3-byte UTF-8
        {nullptr, "{\"a\":\"\xED", "\xA0\x80\"}"},    // UTF-8-encoded surrogate
        {nullptr, "{\"a\":\"\xE4\xB8", "x\"}"},       // truncated UTF-8
        {nullptr, "{\"a\":\"", "\xFF\"}"},            // never valid in UTF-8
        {nullptr, "{  ", " \"a\":1}"},                // whitespace bound
        {nullptr, "", "[1]"},                         // format json: the root is an object
        {nullptr, "{}", " "},                         // nothing after the value
        {nullptr, R"({"a":1234567890123456)", "7}"},  // integer digit bound
        {nullptr, R"({"a":tr)", "ie}"},               // literal
        {kPersonSchema, R"({"name":"n")", "}"},       // missing required property
        {kPersonSchema, R"({"name":"n",")", R"(ok":true})"},  // required one skipped
        {kPersonSchema, R"({"name":"n","age":)", R"("3"})"},  // wrong type
        {kPersonSchema, R"({"name":"n","age":3)", ".5}"},     // integer with a fraction
        {kPersonSchema, R"({"name":"n","age":3,"ok":true,"color":"gr)", "a"},  // not in enum
        {kPersonSchema, R"({"name":"0123456789ab)", "c"},                      // maxLength
        {kPersonSchema, R"({"name":"n","age":3,"ok":true,"color":3,"tags":[],"nick":"x)", "\""},
        {kPersonSchema, R"({"name":"n","age":3,"ok":true,"color":3,"tags":["a","b","c")", ","},
        {kPersonSchema, R"({"name":"n","age":3,"ok":true,"color":3,"tags":[],"nick":null)",
         R"(,"x":1})"},  // extra property
        {kPersonSchema, R"({"name":"n","age":3,"ok":true,"color":3,"tags":[],")", "x"},
        {kPersonSchema, R"({"name":"n","age":3,"ok":true,"color":3,"tags":[],"nick")", ""},
        {kMixedSchema, R"({"pair":["ab)", "\""},               // minLength
        {kMixedSchema, R"({"pair":["abc",{"k":[1,2]})", ","},  // items: false
        {kMixedSchema, R"({"pair":["abc",{"k":[1,2]}],"counts":{"a":)", "true"},
        {kMixedSchema, R"({"pair":["abc",{"k":[1,2]}],"counts":{},"none":{)", "\""},
        {kMixedSchema, R"({"pair":["abc",{"k":[1,2]}],"counts":{},"opt":"abc)", "d"},
        {kAnyOfSchema, R"({"x":"s")", "}"},  // the string branch needs y
        {kAnyOfSchema, "[", "]"},            // minItems 1
        {kAnyOfSchema, "", "true"},
        {R"({"type":"boolean"})", "tr", "x"},
    };
    for (const Reject& r : cases) {
        SCOPED_TRACE(r.good + " | " + r.bad);
        JsonConstraint c = make_or_any(r.schema);
        for (size_t i = 0; i < r.good.size(); ++i) {
            ASSERT_TRUE(c.advance(r.good.substr(i, 1))) << "good byte " << i << " rejected";
        }
        if (r.bad.empty()) {
            // The text so far cannot end: it is not a complete value.
            EXPECT_FALSE(c.can_end());
            continue;
        }
        const std::string before = c.shortest_completion();
        EXPECT_FALSE(c.allows(r.bad.substr(0, 1)));
        EXPECT_FALSE(c.advance(r.bad));
        EXPECT_EQ(c.shortest_completion(), before) << "a failed advance changed the state";
    }
}

TEST(JsonConstraint, SchemasItCannotHonourAreErrorsNamingTheKeyword) {
    const std::vector<std::pair<const char*, const char*>> cases = {
        {R"({"not": {"type": "string"}})", "not"},
        {R"({"type": "object", "patternProperties": {"a": {}}})", "patternProperties"},
        {R"({"allOf": [{"type": "string"}, {"minLength": 2}]})", "allOf"},
        {R"({"$ref": "https://example.com/s.json"})", "$ref"},
        {R"({"$ref": "#/$defs/missing"})", "points nowhere"},
        {R"({"type": "text"})", "type"},
        {R"({"type": "integer", "multipleOf": 3})", "multipleOf"},
        {R"({"type": "array", "uniqueItems": true})", "uniqueItems"},
        {R"({"type": "string", "minLength": 100000})", "minLength"},
        // No finite value: the required child recurses forever.
        {R"({"$defs": {"a": {"type": "object", "properties": {"x": {"$ref": "#/$defs/a"}},
            "required": ["x"]}}, "$ref": "#/$defs/a"})",
         "no value"},
        // An anyOf that refers to itself before any byte.
        {R"({"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "null"}]}},
            "$ref": "#/$defs/a"})",
         "cycle"},
        {"false", "no value"},
    };
    for (auto [schema, keyword] : cases) {
        auto r = JsonConstraint::from_schema(Json::parse(schema));
        ASSERT_FALSE(r.ok()) << schema;
        EXPECT_NE(r.error().message.find(keyword), std::string::npos) << r.error().message;
    }
}

TEST(JsonConstraint, ShortestCompletionEmitsRequiredPropertiesWithMinimalValues) {
    JsonConstraint c = make(R"({"properties": {"a": {"type": "string", "minLength": 2},
        "o": {"type": "string"}, "b": {"type": "array", "minItems": 2, "items": {"type": "integer"}},
        "e": {"enum": ["long", "s"]}, "n": {"type": ["string", "null"]}},
        "required": ["a", "b", "e", "n"]})");
    EXPECT_EQ(c.shortest_completion(), R"({"a":"aa","b":[0,0],"e":"s","n":""})");
    ASSERT_TRUE(c.advance(R"({"a":"\u00)"));
    EXPECT_EQ(c.shortest_completion(), R"(00a","b":[0,0],"e":"s","n":""})");
    ASSERT_TRUE(c.advance(R"(00a","b":[)"));
    EXPECT_EQ(c.shortest_completion(), R"(0,0],"e":"s","n":""})");
    JsonConstraint surrogate = JsonConstraint::any_object();
    ASSERT_TRUE(surrogate.advance(R"({"\uDB)"));
    EXPECT_EQ(surrogate.shortest_completion(), R"(00\uDC00":0})");
}

TEST(JsonConstraint, WrappedEnforcesPrefixAndSuffix) {
    auto r = JsonConstraint::wrapped(
        "<tool_call>\n", Json::parse(R"({"type": "object", "properties": {"name": {"const": "get"},
            "arguments": {"type": "object"}}, "required": ["name", "arguments"]})"),
        "\n</tool_call>");
    ASSERT_TRUE(r.ok()) << r.error().message;
    JsonConstraint c = *r;
    EXPECT_EQ(c.shortest_completion(),
              "<tool_call>\n{\"name\":\"get\",\"arguments\":{}}\n</tool_call>");
    EXPECT_FALSE(c.allows("{"));
    EXPECT_FALSE(c.allows("<tool_calls"));
    ASSERT_TRUE(c.advance("<tool_call>\n"));
    EXPECT_FALSE(c.allows("\n\n\n"));  // whitespace before the value is bounded too
    ASSERT_TRUE(c.advance(R"({"name":"get","arguments":{"city":"Oslo"}})"));
    EXPECT_FALSE(c.complete());
    EXPECT_FALSE(c.can_end());
    EXPECT_FALSE(c.allows(" "));
    EXPECT_EQ(c.shortest_completion(), "\n</tool_call>");
    ASSERT_TRUE(c.advance("\n</tool_"));
    EXPECT_FALSE(c.allows("x"));
    ASSERT_TRUE(c.advance("call>"));
    EXPECT_TRUE(c.complete());
    EXPECT_FALSE(c.allows("\n"));

    auto no_suffix = JsonConstraint::wrapped("```json\n", Json::parse(R"({"type":"integer"})"), "");
    ASSERT_TRUE(no_suffix.ok());
    JsonConstraint n = *no_suffix;
    ASSERT_TRUE(n.advance("```json\n42"));
    EXPECT_TRUE(n.can_end());
}

// ---- generation through TokenMask ----

struct Vocab {
    std::vector<std::string> bytes;
    std::vector<bool> eog;
};

// A small byte-level vocabulary: every single byte (as byte-level BPE vocabularies have; closing
// mode relies on it to finish a partial UTF-8 character), pieces that span several JSON lexical
// elements, partial and complete UTF-8, escapes, and two end tokens.
Vocab fake_vocab() {
    Vocab v;
    for (int c = 0; c < 256; ++c) v.bytes.push_back(std::string(1, static_cast<char>(c)));
    for (const char* t : {"\n",
                          "\t",
                          "  ",
                          " \"",
                          "\":",
                          "\": ",
                          "\",\"",
                          "\"}",
                          "},{",
                          "]}",
                          "}]",
                          "{\"",
                          "\":\"",
                          "\":[",
                          "\":{",
                          "\",",
                          "[]",
                          "{}",
                          "[{",
                          "true",
                          "false",
                          "null",
                          "nu",
                          "ll",
                          "tr",
                          "12",
                          "0.",
                          "-1",
                          "01",
                          "e+",
                          "E-3",
                          "1e",
                          ".5",
                          "\\n",
                          "\\\"",
                          "\\u",
                          "\\u00e9",
                          "\\uD83D",
                          "\\uDE00",
                          "\\uDC",
                          "\xC3\xA9",
                          "\xE4",
                          "\xB8",
                          "\xAD",
                          "\xE4\xB8\xAD\xE6\x96\x87",
                          "\xF0\x9F",
                          "\x98\x80",
                          "\xC0\x80",
                          "\xED\xA0\x80",
                          "\x01",
                          "name",
                          "age",
                          "ok",
                          "color",
                          "tags",
                          "score",
                          "nick",
                          "red",
                          "green",
                          "\"name\"",
                          "\"age\":",
                          "kids",
                          "\"v\":",
                          "pair",
                          "counts",
                          "none",
                          "opt",
                          "abc",
                          "<tool_call>",
                          "\n</tool_call>",
                          "Hello world",
                          "\"red\"",
                          ",\"tags\":[\"",
                          "\"]}"}) {
        v.bytes.push_back(t);
    }
    v.eog.assign(v.bytes.size(), false);
    v.bytes.push_back("<|im_end|>");
    v.eog.push_back(true);
    v.bytes.push_back("");
    v.eog.push_back(true);
    v.bytes.push_back("");  // an empty non-end token is never allowed
    v.eog.push_back(false);
    return v;
}

// The mask must equal asking allows() about each token's bytes.
void expect_mask_matches_reference(const TokenMask& mask, const Vocab& v, const JsonConstraint& c,
                                   bool closing) {
    std::vector<float> logits(v.bytes.size() + 3, 0.0f);
    mask.apply(c, logits, closing);
    const std::string completion = closing ? c.shortest_completion() : "";
    for (size_t id = 0; id < v.bytes.size(); ++id) {
        bool expected = false;
        if (v.eog[id]) {
            expected = c.can_end();
        } else if (!v.bytes[id].empty()) {
            expected = closing ? completion.starts_with(v.bytes[id]) : c.allows(v.bytes[id]);
        }
        ASSERT_EQ(std::isfinite(logits[id]), expected)
            << "token " << id << " \"" << v.bytes[id] << "\" closing=" << closing;
    }
    for (size_t id = v.bytes.size(); id < logits.size(); ++id) ASSERT_TRUE(std::isinf(logits[id]));
}

struct Generated {
    std::string text;
    bool ended = false;
};

// Samples argmax of random logits under the mask; after `budget` tokens, switches to closing.
// With check_reference, every step's mask is compared to the allows() reference.
Generated generate(JsonConstraint c, const TokenMask& mask, const Vocab& v, std::mt19937& rng,
                   int budget, bool check_reference) {
    Generated out;
    std::normal_distribution<float> noise;
    std::vector<float> logits(v.bytes.size());
    for (int step = 0; step < budget + 400; ++step) {
        const bool closing = step >= budget;
        if (check_reference) expect_mask_matches_reference(mask, v, c, closing);
        for (float& x : logits) x = noise(rng);
        mask.apply(c, logits, closing);
        const auto best = std::max_element(logits.begin(), logits.end());
        EXPECT_TRUE(std::isfinite(*best)) << "no token allowed after: " << out.text;
        if (!std::isfinite(*best)) return out;
        const size_t id = static_cast<size_t>(best - logits.begin());
        if (v.eog[id]) {
            out.ended = true;
            return out;
        }
        EXPECT_TRUE(c.advance(v.bytes[id])) << "masked-in token rejected: " << v.bytes[id];
        out.text += v.bytes[id];
    }
    ADD_FAILURE() << "closing mode did not finish: " << out.text;
    return out;
}

struct FuzzCase {
    const char* name;
    const char* schema;  // nullptr: any_object()
};

const FuzzCase kFuzzCases[] = {
    {"person", kPersonSchema},
    {"tree", kTreeSchema},
    {"anyOf", kAnyOfSchema},
    {"mixed", kMixedSchema},
    {"any_object", nullptr},
    {"any", "{}"},
    {"number", R"({"type":"number"})"},
    {"short_string", R"({"type":"string","minLength":3,"maxLength":4})"},
};

TEST(JsonConstraintFuzz, GeneratedTextParsesAndValidates) {
    const Vocab v = fake_vocab();
    const TokenMask mask(v.bytes, v.eog);
    std::random_device seeds;
    for (const FuzzCase& f : kFuzzCases) {
        const Json schema = Json::parse(f.schema ? f.schema : R"({"type":"object"})");
        const JsonConstraint c = make_or_any(f.schema);
        for (int run = 0; run < 60; ++run) {
            const unsigned seed = seeds();
            std::mt19937 rng(seed);
            const int budget = std::uniform_int_distribution<int>(0, 120)(rng);
            const Generated g = generate(c, mask, v, rng, budget, false);
            SCOPED_TRACE(std::string(f.name) + " seed " + std::to_string(seed) + ": " + g.text);
            ASSERT_TRUE(g.ended);
            EXPECT_EQ(check_output(schema, g.text), "");
        }
    }
}

TEST(JsonConstraintFuzz, TokenMaskEqualsPerTokenReference) {
    const Vocab v = fake_vocab();
    const TokenMask mask(v.bytes, v.eog);
    std::random_device seeds;
    for (const FuzzCase& f : kFuzzCases) {
        for (int run = 0; run < 6; ++run) {
            const unsigned seed = seeds();
            SCOPED_TRACE(std::string(f.name) + " seed " + std::to_string(seed));
            std::mt19937 rng(seed);
            generate(make_or_any(f.schema), mask, v, rng, 40, true);
        }
    }
    auto wrapped =
        JsonConstraint::wrapped("<tool_call>\n", Json::parse(kPersonSchema), "\n</tool_call>");
    ASSERT_TRUE(wrapped.ok());
    std::mt19937 rng(seeds());
    const Generated g = generate(*wrapped, mask, v, rng, 30, true);
    ASSERT_TRUE(g.text.starts_with("<tool_call>\n")) << g.text;
    ASSERT_TRUE(g.text.ends_with("}\n</tool_call>")) << g.text;
    const std::string inner = g.text.substr(12, g.text.size() - 12 - 13);
    EXPECT_EQ(check_output(Json::parse(kPersonSchema), inner), "");
}

TEST(JsonConstraintFuzz, ShortestCompletionFromRandomPrefixesIsValid) {
    const Vocab v = fake_vocab();
    const TokenMask mask(v.bytes, v.eog);
    std::random_device seeds;
    for (const FuzzCase& f : kFuzzCases) {
        const Json schema = Json::parse(f.schema ? f.schema : R"({"type":"object"})");
        for (int run = 0; run < 60; ++run) {
            const unsigned seed = seeds();
            std::mt19937 rng(seed);
            // A random prefix: random allowed tokens, stopping early at a random point.
            JsonConstraint c = make_or_any(f.schema);
            std::string text;
            std::normal_distribution<float> noise;
            std::vector<float> logits(v.bytes.size());
            const int length = std::uniform_int_distribution<int>(0, 80)(rng);
            for (int i = 0; i < length; ++i) {
                for (float& x : logits) x = noise(rng);
                mask.apply(c, logits);
                const size_t id = static_cast<size_t>(
                    std::max_element(logits.begin(), logits.end()) - logits.begin());
                if (v.eog[id] || !std::isfinite(logits[id])) break;
                ASSERT_TRUE(c.advance(v.bytes[id]));
                text += v.bytes[id];
            }
            const std::string rest = c.shortest_completion();
            SCOPED_TRACE(std::string(f.name) + " seed " + std::to_string(seed) + ": " + text +
                         " + " + rest);
            ASSERT_TRUE(c.advance(rest));
            EXPECT_TRUE(c.can_end());
            EXPECT_EQ(c.shortest_completion(), "");
            EXPECT_EQ(check_output(schema, text + rest), "");
        }
    }
}

// The fewest tokens that spell a text, and closing under a token budget: a token that begins the
// plan is allowed only if the rest can still be spelled in the tokens then left.
TEST(JsonConstraintBudget, SpellingCostsAreTheFewestTokens) {
    const Vocab v = fake_vocab();
    const TokenMask mask(v.bytes, v.eog);
    // {" name ":" "}
    EXPECT_EQ(mask.spelling_costs(R"({"name":""})")[0], 4u);
    const std::vector<uint32_t> abc = mask.spelling_costs("xabc");
    EXPECT_EQ(abc, (std::vector<uint32_t>{2, 1, 2, 1, 0}));
    EXPECT_EQ(mask.spelling_costs("")[0], 0u);
    const TokenMask no_single_bytes({"ab", "c"}, {false, false});
    EXPECT_EQ(no_single_bytes.spelling_costs("abc")[0], 2u);
    EXPECT_EQ(no_single_bytes.spelling_costs("ac")[0], TokenMask::kCannotSpell);
}

TEST(JsonConstraintBudget, ClosingKeepsOnlyTokensWhoseRestFits) {
    const Vocab v = fake_vocab();
    const TokenMask mask(v.bytes, v.eog);
    auto allowed = [&](const JsonConstraint& c, const std::string& plan, int64_t left) {
        std::vector<float> logits(v.bytes.size(), 0.0f);
        mask.apply_closing(c, logits, plan, left);
        std::vector<std::string> out;
        for (size_t id = 0; id < v.bytes.size(); ++id) {
            if (std::isfinite(logits[id])) out.push_back(v.eog[id] ? "<end>" : v.bytes[id]);
        }
        std::sort(out.begin(), out.end());
        return out;
    };
    const JsonConstraint any = JsonConstraint::any_object();
    using Tokens = std::vector<std::string>;
    EXPECT_EQ(allowed(any, "{}", 1), (Tokens{"{}"}));
    EXPECT_EQ(allowed(any, "{}", 2), (Tokens{"{", "{}"}));
    EXPECT_EQ(allowed(any, "{}", -1), (Tokens{"{", "{}"}));
    // Too few tokens for any way: the cheapest way is still followed.
    JsonConstraint person = make_or_any(kPersonSchema);
    ASSERT_TRUE(person.advance(R"({"name":)"));
    const std::string plan = person.shortest_completion();
    const uint32_t cost = mask.spelling_costs(plan)[0];
    ASSERT_GT(cost, 1u);
    EXPECT_FALSE(allowed(person, plan, cost).empty());
    EXPECT_EQ(allowed(person, plan, 1), allowed(person, plan, cost));
    // A value that may end here allows the end tokens.
    JsonConstraint number = make_or_any(R"({"type":"number"})");
    ASSERT_TRUE(number.advance("12"));
    EXPECT_EQ(allowed(number, "", 1), (Tokens{"<end>", "<end>"}));
}

// ---- speed on a vocabulary the size of Qwen2's ----

// 152k token strings of 1-12 bytes shaped like a BPE vocabulary of text: words with and without
// a leading space, digits, punctuation runs, CJK, and every single byte.
Vocab synthetic_vocab(size_t size) {
    Vocab v;
    std::mt19937 rng(7);
    const std::string letters = "etaoinshrdlcumwfgypbvkjxqzETAOINSHRDLCUMWFGYPBVKJXQZ";
    const std::string punct = ".,;:!?'\"()[]{}<>-_/\\|@#$%^&*+=~`";
    const char* cjk[] = {"\xE4\xB8\xAD", "\xE6\x96\x87", "\xE7\x9A\x84", "\xE6\x98\xAF",
                         "\xE4\xBA\x86"};
    for (int b = 0; b < 256; ++b) v.bytes.push_back(std::string(1, static_cast<char>(b)));
    std::uniform_int_distribution<int> kind(0, 99), len(1, 11);
    while (v.bytes.size() < size) {
        std::string t;
        const int k = kind(rng);
        const int n = len(rng);
        if (k < 70) {  // word, mostly with a leading space
            if (k < 50) t += ' ';
            for (int i = 0; i < n && t.size() < 12; ++i)
                t += letters[rng() % 26 + (i == 0 && k % 3 == 0 ? 26 : 0)];
        } else if (k < 78) {  // digits
            for (int i = 0; i < std::min(n, 3); ++i) t += static_cast<char>('0' + rng() % 10);
        } else if (k < 90) {  // punctuation runs, sometimes with letters
            for (int i = 0; i < std::min(n, 4); ++i) t += punct[rng() % punct.size()];
            if (k % 2) t += letters[rng() % 26];
        } else {  // CJK, occasionally cut mid-character like byte-level BPE pieces
            for (int i = 0; i < std::min(n, 4); ++i) t += cjk[rng() % 5];
            if (k % 3 == 0) t.pop_back();
        }
        v.bytes.push_back(t);
    }
    v.eog.assign(v.bytes.size(), false);
    v.eog.back() = true;
    return v;
}

TEST(JsonConstraintBench, ApplyOnA152kVocabulary) {
    const Vocab v = synthetic_vocab(152064);
    const auto build_start = std::chrono::steady_clock::now();
    const TokenMask mask(v.bytes, v.eog);
    const double build_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - build_start)
            .count();
    std::printf("TokenMask build: %.1f ms for %zu tokens\n", build_ms, v.bytes.size());
    const JsonConstraint person = make(kPersonSchema);
    struct State {
        const char* name;
        const char* prefix;
        bool closing;
    };
    const State states[] = {
        {"start", "", false},
        {"expecting key", "{", false},
        {"in string value", R"({"name":"Ann)", false},
        {"in free-form string", R"({"tags":["a)", false},
        {"expecting value", R"({"name":"Ann","age":)", false},
        {"in number", R"({"name":"Ann","age":1)", false},
        {"after value", R"({"name":"Ann","age":1,"ok":true,"color":"red","tags":[])", false},
        {"closing", R"({"name":"Ann)", true},
    };
    double worst = 0;
    std::vector<float> logits(v.bytes.size());
    for (const State& s : states) {
        const bool free_form = std::string(s.name) == "in free-form string";
        JsonConstraint c = free_form ? JsonConstraint::any_object() : person;
        ASSERT_TRUE(c.advance(free_form ? R"({"tags":["a)" : s.prefix));
        constexpr int kRuns = 20;
        const auto start = std::chrono::steady_clock::now();
        size_t allowed = 0;
        for (int r = 0; r < kRuns; ++r) {
            std::fill(logits.begin(), logits.end(), 0.0f);
            mask.apply(c, logits, s.closing);
        }
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count() /
            kRuns;
        for (float x : logits) allowed += std::isfinite(x) ? 1 : 0;
        std::printf("apply %-20s %6.2f ms  (%zu tokens allowed)\n", s.name, ms, allowed);
        worst = std::max(worst, ms);
    }
    // The slow path, where the whole trie is walked: inside a string while an enum alternative is
    // alive too.
    JsonConstraint two = make(R"({"anyOf": [{"type": "string"}, {"enum": ["Annabel", "x"]}]})");
    ASSERT_TRUE(two.advance("\"Ann"));
    const auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < 5; ++r) mask.apply(two, logits);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count() /
        5;
    std::printf("apply %-20s %6.2f ms\n", "string or enum", ms);
    worst = std::max(worst, ms);
    // Far above the measured figure (see the commit message) so a loaded machine does not
    // fail it, yet a walk over the whole trie per byte would.
    EXPECT_LT(worst, 60.0);
}

}  // namespace
}  // namespace strata
