// Statements: text, {{ output }}, and the block tags (if, for, set, macro, call, filter, with,
// break, continue); expressions are parsed by ExpressionParser (jinja_expression_parser.cpp).
#include "session/jinja_parser.h"

#include <initializer_list>

#include "session/jinja_parse_internal.h"
#include "session/jinja_unicode.h"

namespace strata::jinja {

namespace {

class Parser : public ExpressionParser {
  public:
    using ExpressionParser::ExpressionParser;

    Result<Body> parse_template() {
        std::string ended_by;
        STRATA_ASSIGN(Body body, parse_body({}, ended_by, "", 0));
        return body;
    }

  private:
    // ---- statements ----

    // Parses statements until a block tag whose name is in `ends` (the tag name is consumed and
    // returned in ended_by) or, with no ends, until the end of the template.
    Result<Body> parse_body(std::initializer_list<std::string_view> ends, std::string& ended_by,
                            std::string_view open_tag, uint32_t open_offset) {
        DepthGuard guard(depth_);
        if (guard.too_deep()) return too_deep();
        Body body;
        while (true) {
            const Token& t = cur();
            switch (t.type) {
                case TokenType::Eof:
                    if (ends.size() == 0) return body;
                    return fail("unexpected end of template: expected " + list_tags(ends) +
                                " to close the '" + std::string(open_tag) + "' at " +
                                program_.source_map.location(open_offset));
                case TokenType::Text:
                    body.push_back(std::make_unique<TextStmt>(t.offset, t.text));
                    advance();
                    break;
                case TokenType::VariableBegin: {
                    const uint32_t off = t.offset;
                    advance();
                    STRATA_ASSIGN(ExprPtr e, parse_tuple(true, false));
                    if (cur().type != TokenType::VariableEnd) {
                        return unexpected("end of print statement '}}'");
                    }
                    advance();
                    body.push_back(std::make_unique<OutputStmt>(off, std::move(e)));
                    break;
                }
                case TokenType::BlockBegin: {
                    const uint32_t off = t.offset;
                    advance();
                    if (cur().type != TokenType::Name) return unexpected("a statement name");
                    const std::string tag = cur().text;
                    for (auto end : ends) {
                        if (tag == end) {
                            advance();
                            ended_by = tag;
                            return body;
                        }
                    }
                    STRATA_ASSIGN(StmtPtr s,
                                  parse_statement(tag, off, ends, open_tag, open_offset));
                    body.push_back(std::move(s));
                    break;
                }
                default:
                    return unexpected("text or a tag");
            }
        }
    }

    static std::string list_tags(std::initializer_list<std::string_view> tags) {
        std::string out;
        size_t i = 0;
        for (auto t : tags) {
            if (i) out += (i + 1 == tags.size()) ? " or " : ", ";
            out += "'" + std::string(t) + "'";
            ++i;
        }
        return out;
    }

    Result<StmtPtr> parse_statement(const std::string& tag, uint32_t off,
                                    std::initializer_list<std::string_view> ends,
                                    std::string_view open_tag, uint32_t open_offset) {
        const uint32_t name_offset = cur().offset;
        advance();  // the statement name
        if (tag == "if") return parse_if(off);
        if (tag == "for") return parse_for(off);
        if (tag == "set") return parse_set(off);
        if (tag == "macro") return parse_macro(off);
        if (tag == "call") return parse_call_block(off);
        if (tag == "filter") return parse_filter_block(off);
        if (tag == "with") return parse_with(off, "with", "endwith");
        // Hugging Face's {% generation %} marks assistant text for training masks; it renders
        // its body unchanged.
        if (tag == "generation") return parse_with(off, "generation", "endgeneration");
        if (tag == "break" || tag == "continue") {
            if (loop_depth_ == 0) return fail_at(name_offset, "'" + tag + "' outside a for loop");
            STRATA_TRY(expect_block_end());
            return StmtPtr(std::make_unique<SimpleStmt>(
                tag == "break" ? StmtKind::Break : StmtKind::Continue, off));
        }
        std::string msg = "unknown tag '" + tag + "'";
        if (ends.size() != 0) {
            msg += " (expected " + list_tags(ends) + " to close the '" + std::string(open_tag) +
                   "' at " + program_.source_map.location(open_offset) + ")";
        }
        if (tag == "include" || tag == "extends" || tag == "import" || tag == "from" ||
            tag == "block") {
            msg += ": chat templates are single files, '" + tag + "' is not supported";
        }
        return fail_at(name_offset, msg);
    }

    Result<StmtPtr> parse_if(uint32_t off) {
        auto stmt = std::make_unique<IfStmt>(off);
        std::string tag = "if";
        while (true) {
            STRATA_ASSIGN(ExprPtr cond, parse_tuple(true, false));
            STRATA_TRY(expect_block_end());
            std::string ended_by;
            STRATA_ASSIGN(Body body, parse_body({"elif", "else", "endif"}, ended_by, "if", off));
            stmt->branches.emplace_back(std::move(cond), std::move(body));
            if (ended_by == "elif") continue;
            if (ended_by == "else") {
                STRATA_TRY(expect_block_end());
                STRATA_ASSIGN(Body else_body, parse_body({"endif"}, ended_by, "if", off));
                stmt->else_body = std::move(else_body);
            }
            STRATA_TRY(expect_block_end());
            return StmtPtr(std::move(stmt));
        }
    }

    // Names to assign: `x`, `a, b`, `(a, b)`; with_attribute also allows `ns.attr`.
    Result<Target> parse_target(bool with_attribute) {
        Target target;
        if (with_attribute && cur().type == TokenType::Name && peek().type == TokenType::Operator &&
            peek().text == ".") {
            target.names.push_back(cur().text);
            advance();
            advance();
            STRATA_ASSIGN(target.attribute, expect_name());
            return target;
        }
        const bool parenthesised = skip_op("(");
        while (true) {
            STRATA_ASSIGN(std::string name, expect_name());
            target.names.push_back(std::move(name));
            if (!skip_op(",")) break;
            target.unpack = true;
            if (parenthesised && is_op(")")) break;
            if (!parenthesised && cur().type != TokenType::Name) break;
        }
        if (parenthesised) {
            STRATA_TRY(expect_op(")"));
            if (target.names.size() > 1) target.unpack = true;
        }
        return target;
    }

    Result<StmtPtr> parse_for(uint32_t off) {
        auto stmt = std::make_unique<ForStmt>(off);
        STRATA_ASSIGN(stmt->target, parse_target(false));
        if (!skip_name("in")) return unexpected("'in'");
        STRATA_ASSIGN(stmt->iterable, parse_tuple(false, false));
        if (skip_name("if")) {
            STRATA_ASSIGN(stmt->filter, parse_expression(true));
        }
        if (is_name("recursive")) return fail("recursive for loops are not supported");
        STRATA_TRY(expect_block_end());
        std::string ended_by;
        ++loop_depth_;
        auto body = parse_body({"else", "endfor"}, ended_by, "for", off);
        --loop_depth_;
        if (!body) return body.take_error();
        stmt->body = std::move(*body);
        if (ended_by == "else") {
            STRATA_TRY(expect_block_end());
            STRATA_ASSIGN(Body else_body, parse_body({"endfor"}, ended_by, "for", off));
            stmt->else_body = std::move(else_body);
        }
        STRATA_TRY(expect_block_end());
        return StmtPtr(std::move(stmt));
    }

    Result<StmtPtr> parse_set(uint32_t off) {
        STRATA_ASSIGN(Target target, parse_target(true));
        if (skip_op("=")) {
            auto stmt = std::make_unique<SetStmt>(off);
            stmt->target = std::move(target);
            STRATA_ASSIGN(stmt->value, parse_tuple(true, false));
            STRATA_TRY(expect_block_end());
            return StmtPtr(std::move(stmt));
        }
        if (target.unpack) return unexpected("'=' (a block assignment sets one name)");
        auto stmt = std::make_unique<SetBlockStmt>(off);
        stmt->target = std::move(target);
        if (is_op("|")) {
            STRATA_ASSIGN(stmt->filter, parse_filters(nullptr));
        }
        STRATA_TRY(expect_block_end());
        std::string ended_by;
        STRATA_ASSIGN(stmt->body, parse_body({"endset"}, ended_by, "set", off));
        STRATA_TRY(expect_block_end());
        return StmtPtr(std::move(stmt));
    }

    Result<void> parse_macro_params(MacroStmt& macro) {
        STRATA_TRY(expect_op("("));
        while (!is_op(")")) {
            if (!macro.params.empty()) STRATA_TRY(expect_op(","));
            if (is_op(")")) break;
            MacroParam p;
            STRATA_ASSIGN(p.name, expect_name());
            if (skip_op("=")) {
                STRATA_ASSIGN(p.default_value, parse_expression(true));
            } else if (!macro.params.empty() && macro.params.back().default_value) {
                return fail("parameter '" + p.name +
                            "' without a default follows one with a default");
            }
            macro.params.push_back(std::move(p));
        }
        advance();  // ')'
        return {};
    }

    // Parses a macro's body; the names it mentions decide whether varargs/kwargs/caller apply.
    Result<void> parse_macro_body(MacroStmt& macro, std::string_view open_tag,
                                  std::string_view end_tag, uint32_t off) {
        macros_.push_back(&macro);
        const int saved_loop_depth = loop_depth_;
        loop_depth_ = 0;  // break/continue cannot reach a loop outside the macro
        std::string ended_by;
        auto body = parse_body({end_tag}, ended_by, open_tag, off);
        loop_depth_ = saved_loop_depth;
        macros_.pop_back();
        if (!body) return body.take_error();
        macro.body = std::move(*body);
        return expect_block_end();
    }

    Result<StmtPtr> parse_macro(uint32_t off) {
        auto stmt = std::make_unique<MacroStmt>(off);
        STRATA_ASSIGN(stmt->name, expect_name());
        STRATA_TRY(parse_macro_params(*stmt));
        STRATA_TRY(expect_block_end());
        STRATA_TRY(parse_macro_body(*stmt, "macro", "endmacro", off));
        return StmtPtr(std::move(stmt));
    }

    Result<StmtPtr> parse_call_block(uint32_t off) {
        auto stmt = std::make_unique<CallBlockStmt>(off);
        stmt->caller.name = "caller";
        stmt->caller.offset = off;
        if (is_op("(")) STRATA_TRY(parse_macro_params(stmt->caller));
        const uint32_t call_offset = cur().offset;
        STRATA_ASSIGN(stmt->call, parse_expression(true));
        if (stmt->call->kind != ExprKind::Call) {
            return fail_at(call_offset, "{% call %} needs a macro call such as m(args)");
        }
        STRATA_TRY(expect_block_end());
        STRATA_TRY(parse_macro_body(stmt->caller, "call", "endcall", off));
        return StmtPtr(std::move(stmt));
    }

    Result<StmtPtr> parse_filter_block(uint32_t off) {
        auto stmt = std::make_unique<FilterBlockStmt>(off);
        STRATA_ASSIGN(stmt->filter, parse_filter_chain_from_name(nullptr));
        STRATA_TRY(expect_block_end());
        std::string ended_by;
        STRATA_ASSIGN(stmt->body, parse_body({"endfilter"}, ended_by, "filter", off));
        STRATA_TRY(expect_block_end());
        return StmtPtr(std::move(stmt));
    }

    Result<StmtPtr> parse_with(uint32_t off, std::string_view tag, std::string_view end_tag) {
        auto stmt = std::make_unique<WithStmt>(off);
        while (tag == "with" && cur().type != TokenType::BlockEnd) {
            if (!stmt->assignments.empty()) STRATA_TRY(expect_op(","));
            STRATA_ASSIGN(Target target, parse_target(false));
            STRATA_TRY(expect_op("="));
            STRATA_ASSIGN(ExprPtr value, parse_expression(true));
            stmt->assignments.emplace_back(std::move(target), std::move(value));
        }
        STRATA_TRY(expect_block_end());
        std::string ended_by;
        STRATA_ASSIGN(stmt->body, parse_body({end_tag}, ended_by, tag, off));
        STRATA_TRY(expect_block_end());
        return StmtPtr(std::move(stmt));
    }
};

}  // namespace

Result<std::shared_ptr<const Program>> parse_program(std::string_view source, std::string name) {
    auto program = std::make_shared<Program>();
    program->name = std::move(name);
    const size_t bad = unicode::first_invalid_utf8(source);
    if (bad != std::string_view::npos) {
        return err(program->name, ": the template is not valid UTF-8 (byte ", std::to_string(bad),
                   ")");
    }
    const std::string normalized = normalize_template_source(source);
    program->source_map = SourceMap(normalized);
    auto tokens = tokenize(normalized, program->source_map);
    if (!tokens) return err(program->name, ":", tokens.error().message);
    Parser parser(std::move(*tokens), *program);
    STRATA_ASSIGN(program->body, parser.parse_template());
    return std::shared_ptr<const Program>(std::move(program));
}

}  // namespace strata::jinja
