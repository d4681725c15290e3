// Chat templates end to end: every real template in the golden data renders every case byte for
// byte as Python's jinja2 did (and fails where it failed, with its message), the built-in
// per-family templates render the formats they stand for, and GGUF files get the right template
// and bos/eos texts.
#include <gtest/gtest.h>

#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "template/chat_template.h"
#include "test_support.h"

namespace strata {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

fs::path templates_dir() {
    return test::testdata_dir() / "templates";
}

std::vector<fs::path> golden_case_files() {
    std::vector<fs::path> out;
    if (!fs::exists(templates_dir())) return out;
    for (const auto& e : fs::directory_iterator(templates_dir())) {
        const std::string name = e.path().filename().string();
        if (name.size() > 14 && name.substr(name.size() - 14) == ".expected.json") {
            out.push_back(e.path());
        }
    }
    std::sort(out.begin(), out.end());
    return out;
}

// The golden errors are Python exception texts, "TemplateError: message"; the message is what
// a renderer must report.
std::string without_exception_class(const std::string& s) {
    const size_t colon = s.find(": ");
    if (colon == std::string::npos) return s;
    const std::string cls = s.substr(0, colon);
    const bool is_class = cls.find(' ') == std::string::npos &&
                          (cls.ends_with("Error") || cls.ends_with("Exception"));
    return is_class ? s.substr(colon + 2) : s;
}

json read_json(const fs::path& p) {
    return json::parse(test::read_text_file(p));
}

TEST(ChatTemplateGolden, EveryTemplateRendersEveryCaseAsJinja2) {
    STRATA_REQUIRE_TESTDATA();
    const auto files = golden_case_files();
    ASSERT_FALSE(files.empty()) << "no template golden data at " << templates_dir();
    size_t rendered = 0, failed_as_expected = 0;
    for (const auto& file : files) {
        const json golden = read_json(file);
        const std::string template_name = golden["template"].get<std::string>();
        SCOPED_TRACE(template_name);
        // Parse once, render every case with the same template.
        auto tmpl = ChatTemplate::parse(test::read_text_file(templates_dir() / template_name),
                                        template_name);
        ASSERT_TRUE(tmpl.ok()) << tmpl.error().message;
        for (const auto& c : golden["cases"]) {
            SCOPED_TRACE(c["name"].get<std::string>());
            auto out = tmpl->render(c["context"]);
            if (c.contains("expected")) {
                ASSERT_TRUE(out.ok()) << out.error().message;
                EXPECT_EQ(*out, c["expected"].get<std::string>());
                ++rendered;
            } else {
                ASSERT_FALSE(out.ok()) << "rendered where jinja2 failed: " << *out;
                const std::string want = without_exception_class(c["error"].get<std::string>());
                EXPECT_NE(out.error().message.find(want), std::string::npos) << out.error().message;
                EXPECT_EQ(out.error().message.rfind(template_name + ":", 0), 0u)
                    << "the error names the template: " << out.error().message;
                ++failed_as_expected;
            }
        }
    }
    // The data set has 10 templates × 7 conversations; all of them must have been checked.
    EXPECT_GE(rendered + failed_as_expected, 70u);
    EXPECT_GT(failed_as_expected, 0u);
}

TEST(ChatTemplateGolden, StrftimeNowUsesTheGivenClock) {
    STRATA_REQUIRE_TESTDATA();
    const fs::path path = templates_dir() / "meta-llama-Llama-3.2-3B-Instruct.jinja";
    auto tmpl = ChatTemplate::parse(test::read_text_file(path), "llama-3.2");
    ASSERT_TRUE(tmpl.ok()) << tmpl.error().message;
    // No date_string in the context: the template calls strftime_now("%d %b %Y").
    const json context = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                          {"bos_token", "<|begin_of_text|>"}};
    jinja::RenderOptions options;
    options.now = std::time_t{1721995200};  // 2024-07-26 12:00 UTC: the 26th in every zone
    auto out = tmpl->render(context, options);
    ASSERT_TRUE(out.ok()) << out.error().message;
    EXPECT_NE(out->find("Today Date: 26 Jul 2024\n"), std::string::npos) << *out;
}

// A conversation with a system prompt, leading/trailing spaces and two user turns.
const char* kConversation = R"({"messages": [
    {"role": "system", "content": "Be brief."}, {"role": "user", "content": " Hi "},
    {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Bye"}],
  "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"})";
// An assistant turn without text (content null), no generation prompt.
const char* kNullContent = R"({"messages": [
    {"role": "user", "content": "Q"}, {"role": "assistant", "content": null, "tool_calls": []}],
  "add_generation_prompt": false, "bos_token": "<s>", "eos_token": "</s>"})";

struct BuiltinCase {
    ChatFamily family;
    const char* conversation;
    const char* null_content;
};

TEST(ChatTemplateBuiltin, EachFamilyRendersItsFormat) {
    const BuiltinCase cases[] = {
        {ChatFamily::ChatML,
         "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n Hi <|im_end|>\n"
         "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"
         "<|im_start|>assistant\n",
         "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<|im_end|>\n"},
        {ChatFamily::Llama3,
         "<s><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
         "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
         "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
         "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
         "<|start_header_id|>assistant<|end_header_id|>\n\n",
         "<s><|start_header_id|>user<|end_header_id|>\n\nQ<|eot_id|>"
         "<|start_header_id|>assistant<|end_header_id|>\n\n<|eot_id|>"},
        {ChatFamily::Llama2,
         "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\n Hi [/INST] Hello. </s><s>[INST] Bye [/INST]",
         "<s>[INST] Q [/INST]  </s>"},
        {ChatFamily::Mistral, "<s>[INST] Be brief.\n\n Hi  [/INST]Hello.</s>[INST] Bye [/INST]",
         "<s>[INST] Q [/INST]</s>"},
        {ChatFamily::Gemma,
         "<s><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n"
         "Hello.<end_of_turn>\n<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n",
         "<s><start_of_turn>user\nQ<end_of_turn>\n<start_of_turn>model\n<end_of_turn>\n"},
        {ChatFamily::Phi3,
         "<|system|>\nBe brief.<|end|>\n<|user|>\n Hi <|end|>\n<|assistant|>\nHello.<|end|>\n"
         "<|user|>\nBye<|end|>\n<|assistant|>\n",
         "<|user|>\nQ<|end|>\n<|assistant|>\n<|end|>\n</s>"},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(std::string(chat_family_name(c.family)));
        const ChatTemplate t = ChatTemplate::builtin(c.family);
        auto out = t.render(json::parse(kConversation));
        ASSERT_TRUE(out.ok()) << out.error().message;
        EXPECT_EQ(*out, c.conversation);
        out = t.render(json::parse(kNullContent));
        ASSERT_TRUE(out.ok()) << out.error().message;
        EXPECT_EQ(*out, c.null_content);
    }
}

// Where a published template and the built-in one describe the same format, they must agree.
TEST(ChatTemplateBuiltin, AgreesWithPublishedTemplatesOfItsFamily) {
    STRATA_REQUIRE_TESTDATA();
    struct Agreement {
        ChatFamily family;
        const char* golden;
        std::vector<std::string> cases;
    };
    const Agreement agreements[] = {
        {ChatFamily::ChatML,
         "Qwen-Qwen3-0.6B",
         {"single_user", "system_multi_turn", "unicode_whitespace", "system_only_first"}},
        {ChatFamily::Mistral,
         "mixtral-style-inst",
         {"single_user", "closed_conversation", "unicode_whitespace", "thinking_disabled"}},
        {ChatFamily::Gemma,
         "google-gemma-2-2b-it",
         {"single_user", "closed_conversation", "unicode_whitespace", "thinking_disabled"}},
        {ChatFamily::Phi3,
         "microsoft-Phi-3.5-mini-instruct",
         {"single_user", "system_multi_turn", "closed_conversation", "unicode_whitespace",
          "tools_call_and_result", "system_only_first", "thinking_disabled"}},
    };
    for (const auto& a : agreements) {
        SCOPED_TRACE(a.golden);
        const json golden = read_json(templates_dir() / (std::string(a.golden) + ".expected.json"));
        const ChatTemplate t = ChatTemplate::builtin(a.family);
        size_t checked = 0;
        for (const auto& c : golden["cases"]) {
            const std::string name = c["name"].get<std::string>();
            if (std::find(a.cases.begin(), a.cases.end(), name) == a.cases.end()) continue;
            SCOPED_TRACE(name);
            auto out = t.render(c["context"]);
            ASSERT_TRUE(out.ok()) << out.error().message;
            EXPECT_EQ(*out, c["expected"].get<std::string>());
            ++checked;
        }
        EXPECT_EQ(checked, a.cases.size());
    }
}

TEST(ChatTemplateDefault, RuleFollowsVocabularyThenArchitecture) {
    using V = std::vector<std::string>;
    EXPECT_EQ(default_chat_family("llama", V{"<|start_header_id|>", "<|eot_id|>"}, "gpt2").family,
              ChatFamily::Llama3);
    EXPECT_EQ(default_chat_family("qwen2", V{"<|im_start|>", "<|im_end|>"}, "gpt2").family,
              ChatFamily::ChatML);
    // The vocabulary wins over the architecture: a llama-architecture ChatML fine-tune.
    EXPECT_EQ(default_chat_family("llama", V{"<s>", "<|im_start|>"}, "llama").family,
              ChatFamily::ChatML);
    EXPECT_EQ(default_chat_family("gemma2", V{}, "llama").family, ChatFamily::Gemma);
    EXPECT_EQ(default_chat_family("llama", V{"<start_of_turn>"}, "llama").family,
              ChatFamily::Gemma);
    EXPECT_EQ(default_chat_family("phi3", V{}, "llama").family, ChatFamily::Phi3);
    EXPECT_EQ(default_chat_family("llama", V{"<|user|>", "<|assistant|>"}, "llama").family,
              ChatFamily::Phi3);
    EXPECT_EQ(default_chat_family("llama", V{"<s>", "[INST]", "[/INST]"}, "llama").family,
              ChatFamily::Mistral);
    EXPECT_EQ(default_chat_family("llama", V{"<s>", "</s>"}, "llama").family, ChatFamily::Llama2);
    EXPECT_EQ(default_chat_family("gpt2", V{"<|endoftext|>"}, "gpt2").family, ChatFamily::ChatML);
    EXPECT_FALSE(default_chat_family("qwen2", V{"<|im_start|>"}, "gpt2").reason.empty());
}

TEST(ChatTemplateDefault, GoldenVocabulariesGetTheirFamilyAndSpecialTokens) {
    STRATA_REQUIRE_TESTDATA();
    struct Expect {
        const char* file;
        ChatFamily family;
        const char* bos;
        const char* eos;
    };
    const Expect cases[] = {
        {"vocab/ggml-vocab-llama-bpe.gguf", ChatFamily::Llama3, "<|begin_of_text|>",
         "<|end_of_text|>"},
        {"vocab/ggml-vocab-llama-spm.gguf", ChatFamily::Llama2, "<s>", "</s>"},
        {"vocab/ggml-vocab-qwen2.gguf", ChatFamily::ChatML, "<|endoftext|>", "<|endoftext|>"},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.file);
        auto file = read_gguf((test::testdata_dir() / c.file).string());
        ASSERT_TRUE(file.ok()) << file.error().message;
        EXPECT_EQ(default_chat_family(*file).family, c.family);
        auto t = ChatTemplate::from_gguf(*file);
        ASSERT_TRUE(t.ok()) << t.error().message;
        EXPECT_NE(t->origin().find(std::string(chat_family_name(c.family))), std::string::npos)
            << t->origin();
        ASSERT_TRUE(t->bos_token().has_value());
        EXPECT_EQ(*t->bos_token(), c.bos);
        ASSERT_TRUE(t->eos_token().has_value());
        EXPECT_EQ(*t->eos_token(), c.eos);
    }
}

// Writes a vocabulary-only GGUF with the given chat template (none when empty).
std::string write_model(const test::TempDir& dir, const std::string& chat_template) {
    GgufWriter w;
    w.set("general.architecture", Value(std::string("llama")));
    w.set("tokenizer.ggml.model", Value(std::string("gpt2")));
    w.set("tokenizer.ggml.tokens", Value(make_string_array({"<unk>", "<BOS>", "<EOS>", "hi"})));
    w.set("tokenizer.ggml.bos_token_id", Value(uint32_t{1}));
    w.set("tokenizer.ggml.eos_token_id", Value(uint32_t{2}));
    if (!chat_template.empty()) w.set("tokenizer.chat_template", Value(chat_template));
    const std::string path = dir.file("model.gguf");
    EXPECT_TRUE(w.open(path, true).ok());
    EXPECT_TRUE(w.finish().ok());
    return path;
}

TEST(ChatTemplateGguf, UsesTheFilesTemplateAndVocabularyTokens) {
    test::TempDir dir;
    const std::string path =
        write_model(dir,
                    "{{ bos_token }}{% for m in messages %}[{{ m.role }}:{{ m.content }}]"
                    "{% endfor %}{{ eos_token }}");
    auto file = read_gguf(path);
    ASSERT_TRUE(file.ok()) << file.error().message;
    auto t = ChatTemplate::from_gguf(*file);
    ASSERT_TRUE(t.ok()) << t.error().message;
    EXPECT_EQ(t->origin(), "tokenizer.chat_template");
    const json conversation = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}};
    auto out = t->render(conversation);
    ASSERT_TRUE(out.ok()) << out.error().message;
    EXPECT_EQ(*out, "<BOS>[user:hi]<EOS>");
    // A context that sets the special tokens wins over the vocabulary.
    json with_tokens = conversation;
    with_tokens["bos_token"] = "";
    with_tokens["eos_token"] = "!";
    out = t->render(with_tokens);
    ASSERT_TRUE(out.ok()) << out.error().message;
    EXPECT_EQ(*out, "[user:hi]!");
}

TEST(ChatTemplateGguf, SyntaxErrorInTheFilesTemplateNamesTheFile) {
    test::TempDir dir;
    const std::string path = write_model(dir, "{% for m in messages %}{{ m.content }");
    auto file = read_gguf(path);
    ASSERT_TRUE(file.ok()) << file.error().message;
    auto t = ChatTemplate::from_gguf(*file);
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.error().message.find("model.gguf: tokenizer.chat_template:1:"), std::string::npos)
        << t.error().message;
}

}  // namespace
}  // namespace strata
