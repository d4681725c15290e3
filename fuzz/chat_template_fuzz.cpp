// libFuzzer target for the chat-template language: the input is a template (GGUF files carry
// them, so they are untrusted). Parsing and rendering must never crash or hang; an error must
// name the template; rendering twice must give the same result. Limits are tight so that each
// execution stays fast: runaway templates must stop at a limit, which is the behaviour under
// test.
//
// Build with -DSTRATA_FUZZ=ON (clang), then run for example:
//   build-fuzz/fuzz/chat_template_fuzz -max_total_time=300 -timeout=10 -rss_limit_mb=2048 \
//       CORPUS_DIR ../shared/testdata/templates
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "template/jinja_template.h"

namespace {

#define FUZZ_CHECK(cond)                                                                        \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            std::fprintf(stderr, "chat_template_fuzz: check failed at line %d: %s\n", __LINE__, \
                         #cond);                                                                \
            std::abort();                                                                       \
        }                                                                                       \
    } while (0)

const nlohmann::ordered_json& context() {
    static const nlohmann::ordered_json c = nlohmann::ordered_json::parse(R"({
      "messages": [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "Héllo <think>x</think> 👋"},
        {"role": "assistant", "content": null,
         "tool_calls": [{"id": "call_123456789", "type": "function",
                         "function": {"name": "f", "arguments": {"x": [1, 2.5, null]}}}]},
        {"role": "tool", "tool_call_id": "call_123456789", "content": "{\"ok\": true}"},
        {"role": "assistant", "content": "Done."}],
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
      "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>",
      "enable_thinking": false
    })");
    return c;
}

strata::jinja::RenderOptions options() {
    strata::jinja::RenderOptions o;
    o.limits.max_output_bytes = 1 << 20;
    o.limits.max_string_bytes = 1 << 20;
    o.limits.max_list_items = 1 << 16;
    o.limits.max_loop_iterations = 10'000;
    o.limits.max_work = 500'000;
    o.now = 1721995200;  // deterministic strftime_now
    return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view source(reinterpret_cast<const char*>(data), size);
    auto t = strata::jinja::Template::parse(source, "fuzz.jinja");
    if (!t) {
        FUZZ_CHECK(t.error().message.rfind("fuzz.jinja:", 0) == 0);
        return 0;
    }
    const auto first = t->render(context(), options());
    const auto second = t->render(context(), options());
    FUZZ_CHECK(first.ok() == second.ok());
    if (first.ok()) {
        FUZZ_CHECK(*first == *second);
    } else {
        FUZZ_CHECK(first.error().message.rfind("fuzz.jinja", 0) == 0);
        FUZZ_CHECK(first.error().message == second.error().message);
    }
    return 0;
}
