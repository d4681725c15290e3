// Statements: text, {{ output }}, and the block tags (if, for, set, macro, call, filter, with,
// break, continue); expressions are parsed by ExpressionParser (jinja_expression_parser.cpp).
#include "template/jinja_parser.h"

#include <initializer_list>

#include "template/jinja_builtins.h"
#include "template/jinja_parse_internal.h"
#include "template/jinja_unicode.h"

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

// Unknown filter and test names are errors when the template is loaded, as in jinja2, except
// inside `{% if %}` statements and `a if b else c` expressions, where jinja2 defers them until
// they run (so templates can guard optional filters). Loop, macro, call, filter, with and
// set-block bodies are checked strictly again, as jinja2's inner frames are.
class NameCheck {
  public:
    explicit NameCheck(const Program& program) : program_(program) {}

    Result<void> body(const Body& b, bool deferred) {
        for (const auto& s : b) STRATA_TRY(stmt(*s, deferred));
        return {};
    }

  private:
    Result<void> stmt(const Stmt& s, bool deferred) {
        switch (s.kind) {
            case StmtKind::Output:
                return expr(static_cast<const OutputStmt&>(s).expr.get(), deferred);
            case StmtKind::If: {
                const auto& i = static_cast<const IfStmt&>(s);
                for (const auto& [cond, b] : i.branches) {
                    STRATA_TRY(expr(cond.get(), true));
                    STRATA_TRY(body(b, true));
                }
                return body(i.else_body, true);
            }
            case StmtKind::For: {
                const auto& f = static_cast<const ForStmt&>(s);
                STRATA_TRY(expr(f.iterable.get(), deferred));
                STRATA_TRY(expr(f.filter.get(), false));
                STRATA_TRY(body(f.body, false));
                return body(f.else_body, false);
            }
            case StmtKind::Set:
                return expr(static_cast<const SetStmt&>(s).value.get(), deferred);
            case StmtKind::SetBlock: {
                const auto& b = static_cast<const SetBlockStmt&>(s);
                STRATA_TRY(expr(b.filter.get(), false));
                return body(b.body, false);
            }
            case StmtKind::Macro:
                return macro(static_cast<const MacroStmt&>(s));
            case StmtKind::CallBlock: {
                const auto& c = static_cast<const CallBlockStmt&>(s);
                STRATA_TRY(expr(c.call.get(), deferred));
                return macro(c.caller);
            }
            case StmtKind::FilterBlock: {
                const auto& f = static_cast<const FilterBlockStmt&>(s);
                STRATA_TRY(expr(f.filter.get(), false));
                return body(f.body, false);
            }
            case StmtKind::With: {
                const auto& w = static_cast<const WithStmt&>(s);
                for (const auto& [target, value] : w.assignments) {
                    STRATA_TRY(expr(value.get(), deferred));
                }
                return body(w.body, false);
            }
            case StmtKind::Text:
            case StmtKind::Break:
            case StmtKind::Continue:
                return {};
        }
        return {};
    }

    Result<void> macro(const MacroStmt& m) {
        for (const auto& p : m.params) STRATA_TRY(expr(p.default_value.get(), false));
        return body(m.body, false);
    }

    Result<void> arguments(const Arguments& a, bool deferred) {
        for (const auto& e : a.positional) STRATA_TRY(expr(e.get(), deferred));
        for (const auto& [key, e] : a.keyword) STRATA_TRY(expr(e.get(), deferred));
        return {};
    }

    Result<void> expr(const Expr* e, bool deferred) {
        if (!e) return {};
        switch (e->kind) {
            case ExprKind::Literal:
            case ExprKind::Name:
                return {};
            case ExprKind::ListLit:
                for (const auto& item : static_cast<const ListExpr*>(e)->items) {
                    STRATA_TRY(expr(item.get(), deferred));
                }
                return {};
            case ExprKind::DictLit:
                for (const auto& [k, v] : static_cast<const DictExpr*>(e)->items) {
                    STRATA_TRY(expr(k.get(), deferred));
                    STRATA_TRY(expr(v.get(), deferred));
                }
                return {};
            case ExprKind::Unary:
                return expr(static_cast<const UnaryExpr*>(e)->operand.get(), deferred);
            case ExprKind::Binary: {
                const auto* b = static_cast<const BinaryExpr*>(e);
                STRATA_TRY(expr(b->lhs.get(), deferred));
                return expr(b->rhs.get(), deferred);
            }
            case ExprKind::Compare: {
                const auto* c = static_cast<const CompareExpr*>(e);
                STRATA_TRY(expr(c->first.get(), deferred));
                for (const auto& [op, rhs] : c->rest) STRATA_TRY(expr(rhs.get(), deferred));
                return {};
            }
            case ExprKind::Attribute:
                return expr(static_cast<const AttributeExpr*>(e)->object.get(), deferred);
            case ExprKind::Subscript: {
                const auto* s = static_cast<const SubscriptExpr*>(e);
                STRATA_TRY(expr(s->object.get(), deferred));
                return expr(s->index.get(), deferred);
            }
            case ExprKind::Slice: {
                const auto* s = static_cast<const SliceExpr*>(e);
                for (const Expr* part :
                     {s->object.get(), s->start.get(), s->stop.get(), s->step.get()}) {
                    STRATA_TRY(expr(part, deferred));
                }
                return {};
            }
            case ExprKind::Call: {
                const auto* c = static_cast<const CallExpr*>(e);
                STRATA_TRY(expr(c->callee.get(), deferred));
                return arguments(c->args, deferred);
            }
            case ExprKind::Filter: {
                const auto* f = static_cast<const FilterExpr*>(e);
                if (!deferred && !find_filter(f->name)) {
                    return err(program_.location(f->offset), ": no filter named '", f->name, "'");
                }
                STRATA_TRY(expr(f->operand.get(), deferred));
                return arguments(f->args, deferred);
            }
            case ExprKind::Test: {
                const auto* t = static_cast<const TestExpr*>(e);
                if (!deferred && !find_test(t->name)) {
                    return err(program_.location(t->offset), ": no test named '", t->name, "'");
                }
                STRATA_TRY(expr(t->operand.get(), deferred));
                return arguments(t->args, deferred);
            }
            case ExprKind::Conditional: {
                const auto* c = static_cast<const ConditionalExpr*>(e);
                STRATA_TRY(expr(c->condition.get(), true));
                STRATA_TRY(expr(c->then_value.get(), true));
                return expr(c->else_value.get(), true);
            }
        }
        return {};
    }

    const Program& program_;
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
    STRATA_TRY(NameCheck(*program).body(program->body, false));
    return std::shared_ptr<const Program>(std::move(program));
}

}  // namespace strata::jinja
