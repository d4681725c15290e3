// `strata template`: prints the rendered prompt exactly (no newline added) from a template file
// or a GGUF, and reports errors on stderr as "strata: ..." with exit status 1.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "gguf/writer.h"
#include "test_support.h"

namespace strata::test {
namespace {

void write_file(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary);
    out << text;
}

const char* kConversation =
    R"({"messages": [{"role": "user", "content": "Héllo \"there\""}], "add_generation_prompt": true})";

TEST(TemplateCli, RendersATemplateFileExactly) {
    TempDir dir;
    write_file(dir.file("t.jinja"),
               "{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}"
               "{% if add_generation_prompt %}<assistant>\n{% endif %}\n");
    write_file(dir.file("ctx.json"), kConversation);
    const auto r = run_strata("template " + shell_quote(dir.file("t.jinja")) + " --context " +
                              shell_quote(dir.file("ctx.json")));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    // The template's own final newline is dropped, as jinja2 does; none is added.
    EXPECT_EQ(r.out, "<user>Héllo \"there\"\n<assistant>\n");
    EXPECT_EQ(r.err, "");
}

TEST(TemplateCli, RendersAGgufsTemplateWithItsSpecialTokens) {
    TempDir dir;
    GgufWriter w;
    w.set("general.architecture", Value(std::string("llama")));
    w.set("tokenizer.ggml.tokens", Value(make_string_array({"<unk>", "<s>", "</s>"})));
    w.set("tokenizer.ggml.bos_token_id", Value(uint32_t{1}));
    w.set("tokenizer.ggml.eos_token_id", Value(uint32_t{2}));
    w.set("tokenizer.chat_template",
          Value(std::string("{{ bos_token }}{{ messages[0].content }}{{ eos_token }}")));
    // No .gguf suffix: the file is recognised by its magic.
    ASSERT_TRUE(w.open(dir.file("model.bin")).ok());
    ASSERT_TRUE(w.finish().ok());
    write_file(dir.file("ctx.json"), kConversation);
    const auto r = run_strata("template " + shell_quote(dir.file("model.bin")) + " --context " +
                              shell_quote(dir.file("ctx.json")));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "<s>Héllo \"there\"</s>");
}

TEST(TemplateCli, UsesTheFamilyDefaultForAGgufWithoutTemplate) {
    STRATA_REQUIRE_TESTDATA();
    TempDir dir;
    write_file(dir.file("ctx.json"), kConversation);
    const auto r = run_strata(
        "template " + shell_quote((testdata_dir() / "vocab/ggml-vocab-qwen2.gguf").string()) +
        " --context " + shell_quote(dir.file("ctx.json")));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "<|im_start|>user\nHéllo \"there\"<|im_end|>\n<|im_start|>assistant\n");
    EXPECT_NE(r.err.find("built-in ChatML template"), std::string::npos) << r.err;
}

TEST(TemplateCli, RaiseExceptionIsAnErrorWithTheTemplatesMessage) {
    STRATA_REQUIRE_TESTDATA();
    const auto tmpl = testdata_dir() / "templates" / "google-gemma-2-2b-it.jinja";
    TempDir dir;
    write_file(dir.file("ctx.json"),
               R"({"messages": [{"role": "system", "content": "x"}], "bos_token": "<bos>"})");
    const auto r = run_strata("template " + shell_quote(tmpl.string()) + " --context " +
                              shell_quote(dir.file("ctx.json")));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "strata: " + tmpl.string() + ":1:59: System role not supported\n");
}

TEST(TemplateCli, SyntaxErrorsNameLineAndColumn) {
    TempDir dir;
    write_file(dir.file("t.jinja"), "line one\n{% if messages %}\n  {{ messages[0].content + }}\n");
    write_file(dir.file("ctx.json"), kConversation);
    const auto r = run_strata("template " + shell_quote(dir.file("t.jinja")) + " --context " +
                              shell_quote(dir.file("ctx.json")));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "strata: " + dir.file("t.jinja") +
                         ":3:28: expected an expression, got end of print statement '}}'\n");
}

TEST(TemplateCli, DateFixesTheClockThatTemplatesRead) {
    TempDir dir;
    write_file(dir.file("t.jinja"), "{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%H:%M') }}");
    write_file(dir.file("ctx.json"), "{}");
    const std::string args = "template " + shell_quote(dir.file("t.jinja")) + " --context " +
                             shell_quote(dir.file("ctx.json"));
    auto r = run_strata(args + " --date 2024-07-26");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "26 Jul 2024|12:00");
    r = run_strata(args + " --date 2024-07-26T08:30");
    EXPECT_EQ(r.out, "26 Jul 2024|08:30");
    r = run_strata(args + " --date 26/07/2024");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.err, "strata: --date 26/07/2024: expected YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS]\n");
}

TEST(TemplateCli, BadInputsAreErrors) {
    TempDir dir;
    write_file(dir.file("t.jinja"), "{{ messages|length }}");
    write_file(dir.file("bad.json"), "{\"messages\": [");
    write_file(dir.file("list.json"), "[1, 2]");
    const std::string t = shell_quote(dir.file("t.jinja"));
    auto r = run_strata("template " + shell_quote(dir.file("missing.jinja")) + " --context " +
                        shell_quote(dir.file("bad.json")));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("strata: " + dir.file("missing.jinja")), std::string::npos) << r.err;
    r = run_strata("template " + t + " --context " + shell_quote(dir.file("missing.json")));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("strata: " + dir.file("missing.json")), std::string::npos) << r.err;
    r = run_strata("template " + t + " --context " + shell_quote(dir.file("bad.json")));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.err, "strata: " + dir.file("bad.json") + ": not valid JSON\n");
    r = run_strata("template " + t + " --context " + shell_quote(dir.file("list.json")));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("the context must be a JSON object"), std::string::npos) << r.err;
    r = run_strata("template " + t);  // --context is required
    EXPECT_NE(r.exit_code, 0);
    EXPECT_EQ(r.out, "");
}

}  // namespace
}  // namespace strata::test
