// The parser's shared machinery: the token cursor with its error helpers, and the expression
// grammar. Statements (jinja_parser.cpp) are parsed by a subclass; expressions are in
// jinja_expression_parser.cpp. Internal to the template implementation.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "template/jinja_ast.h"
#include "template/jinja_lexer.h"
#include "template/jinja_parser.h"
#include "util/result.h"

namespace strata::jinja {

class TokenStream {
  public:
    TokenStream(std::vector<Token> tokens, const Program& program)
        : tokens_(std::move(tokens)), program_(program) {}

    // ---- token helpers ----

    const Token& cur() const { return tokens_[pos_]; }
    const Token& peek(size_t ahead = 1) const {
        return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
    }
    void advance() {
        if (pos_ + 1 < tokens_.size()) ++pos_;
    }
    bool is_op(std::string_view op) const {
        return cur().type == TokenType::Operator && cur().text == op;
    }
    bool is_name(std::string_view name) const {
        return cur().type == TokenType::Name && cur().text == name;
    }
    bool skip_op(std::string_view op) {
        if (!is_op(op)) return false;
        advance();
        return true;
    }
    bool skip_name(std::string_view name) {
        if (!is_name(name)) return false;
        advance();
        return true;
    }

    static std::string describe(const Token& t) {
        switch (t.type) {
            case TokenType::Text:
                return "text";
            case TokenType::VariableBegin:
                return "'{{'";
            case TokenType::VariableEnd:
                return "end of print statement '}}'";
            case TokenType::BlockBegin:
                return "'{%'";
            case TokenType::BlockEnd:
                return "end of statement block '%}'";
            case TokenType::Name:
                return "'" + t.text + "'";
            case TokenType::String:
                return "string literal";
            case TokenType::Integer:
            case TokenType::Float:
                return "number " + t.text;
            case TokenType::Operator:
                return "'" + t.text + "'";
            case TokenType::Eof:
                return "end of template";
        }
        return "token";
    }

    Error fail_at(uint32_t offset, const std::string& msg) const {
        return err(program_.location(offset), ": ", msg);
    }
    Error fail(const std::string& msg) const { return fail_at(cur().offset, msg); }
    Error unexpected(const std::string& expected) const {
        return fail("expected " + expected + ", got " + describe(cur()));
    }

    Result<void> expect_op(std::string_view op) {
        if (!skip_op(op)) return unexpected("'" + std::string(op) + "'");
        return {};
    }
    Result<std::string> expect_name() {
        if (cur().type != TokenType::Name) return unexpected("a name");
        std::string n = cur().text;
        advance();
        return n;
    }
    Result<void> expect_block_end() {
        if (cur().type != TokenType::BlockEnd) return unexpected("end of statement block '%}'");
        advance();
        return {};
    }

    // Guards recursion: parsing and evaluation recurse once per nesting level.
    class DepthGuard {
      public:
        explicit DepthGuard(int& depth) : depth_(depth) { ++depth_; }
        ~DepthGuard() { --depth_; }
        DepthGuard(const DepthGuard&) = delete;
        DepthGuard& operator=(const DepthGuard&) = delete;
        bool too_deep() const { return depth_ > kMaxNesting; }

      private:
        int& depth_;
    };
    Error too_deep() const {
        return fail("the template nests more than " + std::to_string(kMaxNesting) + " levels deep");
    }

  protected:
    std::vector<Token> tokens_;
    const Program& program_;
    size_t pos_ = 0;
    int depth_ = 0;       // nesting of statements and expressions, bounded by kMaxNesting
    int loop_depth_ = 0;  // enclosing for loops, for break/continue
    // Macros whose body is being parsed: names they mention decide varargs/kwargs/caller.
    std::vector<MacroStmt*> macros_;
};

// Recursive descent, one function per precedence level as Jinja2 defines them (lowest first):
// conditional `a if c else b`, `or`, `and`, `not`, comparisons (`==` ..., `in`, `not in`),
// `+ -`, `~`, `* / // %`, `**`, unary `- +`, then primary expressions with their postfixes
// (`.attr`, `[i]`, `(args)`), filters (`|f`) and tests (`is t`).
class ExpressionParser : public TokenStream {
  public:
    using TokenStream::TokenStream;

    Result<ExprPtr> parse_tuple(bool with_conditional, bool explicit_parentheses);
    Result<ExprPtr> parse_expression(bool with_conditional);
    Result<ExprPtr> parse_conditional();
    Result<ExprPtr> parse_or();
    Result<ExprPtr> parse_and();
    Result<ExprPtr> parse_not();
    Result<ExprPtr> parse_compare();
    Result<ExprPtr> parse_add();
    Result<ExprPtr> parse_concat();
    Result<ExprPtr> parse_mul();
    Result<ExprPtr> parse_pow();
    Result<ExprPtr> parse_unary(bool with_filters);
    Result<ExprPtr> parse_primary();
    Result<ExprPtr> parse_list();
    Result<ExprPtr> parse_dict();
    Result<ExprPtr> parse_postfix(ExprPtr node);
    Result<ExprPtr> parse_subscript(ExprPtr object, uint32_t off);
    Result<Arguments> parse_arguments();
    Result<ExprPtr> parse_call(ExprPtr callee);
    Result<ExprPtr> parse_filters(ExprPtr node);
    Result<ExprPtr> parse_filter_chain_from_name(ExprPtr node);
    Result<ExprPtr> parse_one_filter(ExprPtr operand);
    Result<ExprPtr> parse_test(ExprPtr operand);
};

}  // namespace strata::jinja
