// A Jinja2 template as chat templates use it: parsed once, rendered many times with a JSON
// context. The language and its filters follow Python's jinja2 3.1 configured as Hugging Face's
// apply_chat_template configures it (trim_blocks, lstrip_blocks, loop controls, a `tojson` that
// keeps non-ASCII text, `raise_exception`, `strftime_now`).
//
// Rendering is bounded: a hostile template gets an error, not a hang or a crash, once it passes
// any of the limits below. A parsed Template is immutable; render() may run concurrently.
//
// Deliberate differences from jinja2: integers are 64-bit (overflow is an error, not a big
// integer); lists have append/pop/insert/extend (Hugging Face's sandbox refuses them, llama.cpp
// allows them); filters that return generators in jinja2 (map, select, reverse, dict.items())
// return lists; escape/safe do not produce markup-safe strings (autoescape is off in chat
// templates); loop.changed and recursive loops are not supported.
#pragma once

#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "util/result.h"

namespace strata::jinja {

struct Program;

struct RenderLimits {
    size_t max_output_bytes = 64u << 20;       // all text produced, including captured blocks
    size_t max_string_bytes = 32u << 20;       // one string value
    size_t max_list_items = 1u << 20;          // one list value
    uint64_t max_loop_iterations = 1'000'000;  // summed over all loops of one render
    // Evaluation steps, plus a quarter of the bytes of each string built or read through and
    // the length of each list built or read through: at most a second or two of work.
    uint64_t max_work = 50'000'000;
    int max_call_depth = 100;  // macro calls in progress
    // Nested statements and expressions, summed over macro calls. Together with max_call_depth
    // this keeps rendering within about 512 KiB of stack.
    int max_eval_depth = 500;
};

struct RenderOptions {
    RenderLimits limits;
    // The clock that strftime_now() reads; the system clock when unset.
    std::optional<std::time_t> now;
};

class Template {
  public:
    // `name` prefixes error messages ("chat_template.jinja:3:14: ..."). Syntax errors are
    // reported here, with line and column.
    static Result<Template> parse(std::string_view source, std::string name = "template");

    // Context keys become variables. Keys keep their JSON order, which `tojson` and dict
    // iteration reproduce. Runtime errors (raise_exception, undefined values used where
    // jinja2 fails, limits) name the line and column of the expression at fault.
    Result<std::string> render(const nlohmann::ordered_json& context,
                               const RenderOptions& options = {}) const;

    const std::string& name() const;

  private:
    explicit Template(std::shared_ptr<const Program> p) : program_(std::move(p)) {}
    std::shared_ptr<const Program> program_;
};

}  // namespace strata::jinja
