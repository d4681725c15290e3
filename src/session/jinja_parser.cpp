// Recursive descent over the token stream, one function per precedence level as Jinja2 defines
// them (lowest first): conditional `a if c else b`, `or`, `and`, `not`, comparisons (`==` ...,
// `in`, `not in`), `+ -`, `~`, `* / // %`, `**`, unary `- +`, then primary expressions with
// their postfixes (`.attr`, `[i]`, `(args)`), filters (`|f`) and tests (`is t`).
#include "session/jinja_parser.h"

#include <initializer_list>

#include "session/jinja_unicode.h"

namespace strata::jinja {

namespace {

class Parser {
public:
    Parser(std::vector<Token> tokens, const Program& program)
        : tokens_(std::move(tokens)), program_(program) {}

    Result<Body> parse_template() {
        std::string ended_by;
        STRATA_ASSIGN(Body body, parse_body({}, ended_by, "", 0));
        return body;
    }

private:
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
            case TokenType::Text: return "text";
            case TokenType::VariableBegin: return "'{{'";
            case TokenType::VariableEnd: return "end of print statement '}}'";
            case TokenType::BlockBegin: return "'{%'";
            case TokenType::BlockEnd: return "end of statement block '%}'";
            case TokenType::Name: return "'" + t.text + "'";
            case TokenType::String: return "string literal";
            case TokenType::Integer:
            case TokenType::Float: return "number " + t.text;
            case TokenType::Operator: return "'" + t.text + "'";
            case TokenType::Eof: return "end of template";
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
        return fail("the template nests more than " + std::to_string(kMaxNesting) +
                    " levels deep");
    }

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
                    STRATA_ASSIGN(StmtPtr s, parse_statement(tag, off, ends, open_tag, open_offset));
                    body.push_back(std::move(s));
                    break;
                }
                default: return unexpected("text or a tag");
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
        if (target.unpack || !target.attribute.empty()) {
            return unexpected("'=' (a block assignment sets a single name)");
        }
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
                return fail("parameter '" + p.name + "' without a default follows one with a default");
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

    // ---- expressions ----

    // Comma-separated expressions make a tuple: `{{ a, b }}`, `{% set x = 1, 2 %}`.
    Result<ExprPtr> parse_tuple(bool with_conditional, bool explicit_parentheses) {
        const uint32_t off = cur().offset;
        std::vector<ExprPtr> items;
        bool is_tuple = false;
        while (true) {
            if (!items.empty()) STRATA_TRY(expect_op(","));
            if (cur().type == TokenType::VariableEnd || cur().type == TokenType::BlockEnd ||
                is_op(")") || (!items.empty() && (is_name("if") || is_name("recursive")))) {
                break;
            }
            STRATA_ASSIGN(ExprPtr e, parse_expression(with_conditional));
            items.push_back(std::move(e));
            if (is_op(",")) {
                is_tuple = true;
            } else {
                break;
            }
        }
        if (!is_tuple) {
            if (!items.empty()) return std::move(items[0]);
            if (!explicit_parentheses) return unexpected("an expression");
        }
        auto t = std::make_unique<ListExpr>(off, true);
        t->items = std::move(items);
        return ExprPtr(std::move(t));
    }

    Result<ExprPtr> parse_expression(bool with_conditional) {
        if (with_conditional) return parse_conditional();
        return parse_or();
    }

    Result<ExprPtr> parse_conditional() {
        DepthGuard guard(depth_);
        if (guard.too_deep()) return too_deep();
        const uint32_t off = cur().offset;
        STRATA_ASSIGN(ExprPtr expr, parse_or());
        while (skip_name("if")) {
            auto c = std::make_unique<ConditionalExpr>(off);
            c->then_value = std::move(expr);
            STRATA_ASSIGN(c->condition, parse_or());
            if (skip_name("else")) {
                STRATA_ASSIGN(c->else_value, parse_conditional());
            }
            expr = std::move(c);
        }
        return expr;
    }

    Result<ExprPtr> parse_or() {
        STRATA_ASSIGN(ExprPtr lhs, parse_and());
        while (is_name("or")) {
            const uint32_t off = cur().offset;
            advance();
            STRATA_ASSIGN(ExprPtr rhs, parse_and());
            lhs = std::make_unique<BinaryExpr>(off, BinaryOp::Or, std::move(lhs), std::move(rhs));
        }
        return lhs;
    }

    Result<ExprPtr> parse_and() {
        STRATA_ASSIGN(ExprPtr lhs, parse_not());
        while (is_name("and")) {
            const uint32_t off = cur().offset;
            advance();
            STRATA_ASSIGN(ExprPtr rhs, parse_not());
            lhs = std::make_unique<BinaryExpr>(off, BinaryOp::And, std::move(lhs), std::move(rhs));
        }
        return lhs;
    }

    Result<ExprPtr> parse_not() {
        if (is_name("not")) {
            DepthGuard guard(depth_);
            if (guard.too_deep()) return too_deep();
            const uint32_t off = cur().offset;
            advance();
            STRATA_ASSIGN(ExprPtr operand, parse_not());
            return ExprPtr(std::make_unique<UnaryExpr>(off, UnaryOp::Not, std::move(operand)));
        }
        return parse_compare();
    }

    Result<ExprPtr> parse_compare() {
        const uint32_t off = cur().offset;
        STRATA_ASSIGN(ExprPtr first, parse_add());
        std::unique_ptr<CompareExpr> cmp;
        while (true) {
            CompareOp op;
            if (skip_op("==")) {
                op = CompareOp::Eq;
            } else if (skip_op("!=")) {
                op = CompareOp::Ne;
            } else if (skip_op("<")) {
                op = CompareOp::Lt;
            } else if (skip_op("<=")) {
                op = CompareOp::Le;
            } else if (skip_op(">")) {
                op = CompareOp::Gt;
            } else if (skip_op(">=")) {
                op = CompareOp::Ge;
            } else if (skip_name("in")) {
                op = CompareOp::In;
            } else if (is_name("not") && peek().type == TokenType::Name && peek().text == "in") {
                advance();
                advance();
                op = CompareOp::NotIn;
            } else {
                break;
            }
            if (!cmp) cmp = std::make_unique<CompareExpr>(off, std::move(first));
            STRATA_ASSIGN(ExprPtr rhs, parse_add());
            cmp->rest.emplace_back(op, std::move(rhs));
        }
        if (cmp) return ExprPtr(std::move(cmp));
        return first;
    }

    Result<ExprPtr> parse_add() {
        STRATA_ASSIGN(ExprPtr lhs, parse_concat());
        while (is_op("+") || is_op("-")) {
            const uint32_t off = cur().offset;
            const BinaryOp op = is_op("+") ? BinaryOp::Add : BinaryOp::Sub;
            advance();
            STRATA_ASSIGN(ExprPtr rhs, parse_concat());
            lhs = std::make_unique<BinaryExpr>(off, op, std::move(lhs), std::move(rhs));
        }
        return lhs;
    }

    Result<ExprPtr> parse_concat() {
        STRATA_ASSIGN(ExprPtr lhs, parse_mul());
        while (is_op("~")) {
            const uint32_t off = cur().offset;
            advance();
            STRATA_ASSIGN(ExprPtr rhs, parse_mul());
            lhs = std::make_unique<BinaryExpr>(off, BinaryOp::Concat, std::move(lhs), std::move(rhs));
        }
        return lhs;
    }

    Result<ExprPtr> parse_mul() {
        STRATA_ASSIGN(ExprPtr lhs, parse_pow());
        while (true) {
            BinaryOp op;
            if (is_op("*")) {
                op = BinaryOp::Mul;
            } else if (is_op("/")) {
                op = BinaryOp::Div;
            } else if (is_op("//")) {
                op = BinaryOp::FloorDiv;
            } else if (is_op("%")) {
                op = BinaryOp::Mod;
            } else {
                break;
            }
            const uint32_t off = cur().offset;
            advance();
            STRATA_ASSIGN(ExprPtr rhs, parse_pow());
            lhs = std::make_unique<BinaryExpr>(off, op, std::move(lhs), std::move(rhs));
        }
        return lhs;
    }

    // Jinja2's ** is left-associative and binds looser than unary minus: -2 ** 2 == 4.
    Result<ExprPtr> parse_pow() {
        STRATA_ASSIGN(ExprPtr lhs, parse_unary(true));
        while (is_op("**")) {
            const uint32_t off = cur().offset;
            advance();
            STRATA_ASSIGN(ExprPtr rhs, parse_unary(true));
            lhs = std::make_unique<BinaryExpr>(off, BinaryOp::Pow, std::move(lhs), std::move(rhs));
        }
        return lhs;
    }

    Result<ExprPtr> parse_unary(bool with_filters) {
        DepthGuard guard(depth_);
        if (guard.too_deep()) return too_deep();
        const uint32_t off = cur().offset;
        ExprPtr node;
        if (is_op("-") || is_op("+")) {
            const UnaryOp op = is_op("-") ? UnaryOp::Neg : UnaryOp::Pos;
            advance();
            STRATA_ASSIGN(ExprPtr operand, parse_unary(false));
            node = std::make_unique<UnaryExpr>(off, op, std::move(operand));
        } else {
            STRATA_ASSIGN(node, parse_primary());
        }
        STRATA_ASSIGN(node, parse_postfix(std::move(node)));
        if (!with_filters) return node;
        return parse_filters(std::move(node));
    }

    Result<ExprPtr> parse_primary() {
        const Token& t = cur();
        const uint32_t off = t.offset;
        switch (t.type) {
            case TokenType::Name: {
                const std::string& n = t.text;
                if (n == "true" || n == "True") {
                    advance();
                    return ExprPtr(std::make_unique<LiteralExpr>(off, Value::boolean(true)));
                }
                if (n == "false" || n == "False") {
                    advance();
                    return ExprPtr(std::make_unique<LiteralExpr>(off, Value::boolean(false)));
                }
                if (n == "none" || n == "None") {
                    advance();
                    return ExprPtr(std::make_unique<LiteralExpr>(off, Value::none()));
                }
                if (!macros_.empty()) {
                    if (n == "varargs") macros_.back()->uses_varargs = true;
                    if (n == "kwargs") macros_.back()->uses_kwargs = true;
                    if (n == "caller") macros_.back()->uses_caller = true;
                }
                auto e = std::make_unique<NameExpr>(off, n);
                advance();
                return ExprPtr(std::move(e));
            }
            case TokenType::String: {
                std::string s;
                while (cur().type == TokenType::String) {  // adjacent literals concatenate
                    s += cur().text;
                    advance();
                }
                return ExprPtr(std::make_unique<LiteralExpr>(off, Value::string(std::move(s))));
            }
            case TokenType::Integer: {
                auto e = std::make_unique<LiteralExpr>(off, Value::integer(t.int_value));
                advance();
                return ExprPtr(std::move(e));
            }
            case TokenType::Float: {
                auto e = std::make_unique<LiteralExpr>(off, Value::number(t.float_value));
                advance();
                return ExprPtr(std::move(e));
            }
            case TokenType::Operator:
                if (t.text == "(") {
                    advance();
                    STRATA_ASSIGN(ExprPtr e, parse_tuple(true, true));
                    STRATA_TRY(expect_op(")"));
                    return e;
                }
                if (t.text == "[") return parse_list();
                if (t.text == "{") return parse_dict();
                break;
            default: break;
        }
        return unexpected("an expression");
    }

    Result<ExprPtr> parse_list() {
        auto list = std::make_unique<ListExpr>(cur().offset, false);
        advance();  // '['
        while (!is_op("]")) {
            if (!list->items.empty()) STRATA_TRY(expect_op(","));
            if (is_op("]")) break;
            STRATA_ASSIGN(ExprPtr e, parse_expression(true));
            list->items.push_back(std::move(e));
        }
        advance();
        return ExprPtr(std::move(list));
    }

    Result<ExprPtr> parse_dict() {
        auto dict = std::make_unique<DictExpr>(cur().offset);
        advance();  // '{'
        while (!is_op("}")) {
            if (!dict->items.empty()) STRATA_TRY(expect_op(","));
            if (is_op("}")) break;
            STRATA_ASSIGN(ExprPtr key, parse_expression(true));
            STRATA_TRY(expect_op(":"));
            STRATA_ASSIGN(ExprPtr value, parse_expression(true));
            dict->items.emplace_back(std::move(key), std::move(value));
        }
        advance();
        return ExprPtr(std::move(dict));
    }

    Result<ExprPtr> parse_postfix(ExprPtr node) {
        while (true) {
            const uint32_t off = node->offset;  // errors point at the start of `a.b[c]`
            if (skip_op(".")) {
                if (cur().type == TokenType::Integer) {  // xs.0 is xs[0]
                    auto idx = std::make_unique<LiteralExpr>(cur().offset,
                                                             Value::integer(cur().int_value));
                    advance();
                    node = std::make_unique<SubscriptExpr>(off, std::move(node), std::move(idx));
                    continue;
                }
                STRATA_ASSIGN(std::string name, expect_name());
                node = std::make_unique<AttributeExpr>(off, std::move(node), std::move(name));
            } else if (is_op("[")) {
                advance();
                STRATA_ASSIGN(node, parse_subscript(std::move(node), off));
            } else if (is_op("(")) {
                STRATA_ASSIGN(node, parse_call(std::move(node)));
            } else {
                return node;
            }
        }
    }

    Result<ExprPtr> parse_subscript(ExprPtr object, uint32_t off) {
        ExprPtr start;
        if (!is_op(":")) {
            STRATA_ASSIGN(start, parse_expression(true));
            if (is_op(",")) {  // x[a, b] indexes with a tuple
                auto t = std::make_unique<ListExpr>(start->offset, true);
                t->items.push_back(std::move(start));
                while (skip_op(",")) {
                    if (is_op("]")) break;
                    STRATA_ASSIGN(ExprPtr e, parse_expression(true));
                    t->items.push_back(std::move(e));
                }
                start = std::move(t);
            }
            if (skip_op("]")) {
                return ExprPtr(std::make_unique<SubscriptExpr>(off, std::move(object), std::move(start)));
            }
        }
        auto slice = std::make_unique<SliceExpr>(off, std::move(object));
        slice->start = std::move(start);
        STRATA_TRY(expect_op(":"));
        if (!is_op("]") && !is_op(":")) {
            STRATA_ASSIGN(slice->stop, parse_expression(true));
        }
        if (skip_op(":") && !is_op("]")) {
            STRATA_ASSIGN(slice->step, parse_expression(true));
        }
        STRATA_TRY(expect_op("]"));
        return ExprPtr(std::move(slice));
    }

    Result<Arguments> parse_arguments() {
        Arguments args;
        STRATA_TRY(expect_op("("));
        while (!is_op(")")) {
            if (!args.positional.empty() || !args.keyword.empty()) STRATA_TRY(expect_op(","));
            if (is_op(")")) break;
            if (is_op("*") || is_op("**")) return fail("*args and **kwargs in calls are not supported");
            if (cur().type == TokenType::Name && peek().type == TokenType::Operator &&
                peek().text == "=") {
                std::string key = cur().text;
                advance();
                advance();
                STRATA_ASSIGN(ExprPtr value, parse_expression(true));
                args.keyword.emplace_back(std::move(key), std::move(value));
            } else {
                if (!args.keyword.empty()) return fail("positional argument after a keyword argument");
                STRATA_ASSIGN(ExprPtr value, parse_expression(true));
                args.positional.push_back(std::move(value));
            }
        }
        advance();  // ')'
        return args;
    }

    Result<ExprPtr> parse_call(ExprPtr callee) {
        const uint32_t off = callee->offset;  // errors point at the start of the call
        auto call = std::make_unique<CallExpr>(off, std::move(callee));
        STRATA_ASSIGN(call->args, parse_arguments());
        return ExprPtr(std::move(call));
    }

    // After a postfix expression: any number of `| filter(args)`, `is test args` and calls.
    Result<ExprPtr> parse_filters(ExprPtr node) {
        while (true) {
            if (is_op("|")) {
                advance();
                STRATA_ASSIGN(node, parse_one_filter(std::move(node)));
            } else if (is_name("is")) {
                STRATA_ASSIGN(node, parse_test(std::move(node)));
            } else if (is_op("(")) {
                STRATA_ASSIGN(node, parse_call(std::move(node)));
            } else {
                return node;
            }
        }
    }

    // `{% filter a | b(1) %}`: a chain that starts with a filter name, its input being the body.
    Result<ExprPtr> parse_filter_chain_from_name(ExprPtr node) {
        STRATA_ASSIGN(node, parse_one_filter(std::move(node)));
        while (skip_op("|")) {
            STRATA_ASSIGN(node, parse_one_filter(std::move(node)));
        }
        return node;
    }

    Result<ExprPtr> parse_one_filter(ExprPtr operand) {
        const uint32_t off = cur().offset;
        STRATA_ASSIGN(std::string name, expect_name());
        while (skip_op(".")) {
            STRATA_ASSIGN(std::string part, expect_name());
            name += "." + part;
        }
        auto f = std::make_unique<FilterExpr>(off, std::move(operand), std::move(name));
        if (is_op("(")) {
            STRATA_ASSIGN(f->args, parse_arguments());
        }
        return ExprPtr(std::move(f));
    }

    Result<ExprPtr> parse_test(ExprPtr operand) {
        const uint32_t off = cur().offset;
        advance();  // 'is'
        const bool negated = skip_name("not");
        STRATA_ASSIGN(std::string name, expect_name());
        while (skip_op(".")) {
            STRATA_ASSIGN(std::string part, expect_name());
            name += "." + part;
        }
        auto t = std::make_unique<TestExpr>(off, std::move(operand), std::move(name), negated);
        if (is_op("(")) {
            STRATA_ASSIGN(t->args, parse_arguments());
        } else if ((cur().type == TokenType::Name || cur().type == TokenType::String ||
                    cur().type == TokenType::Integer || cur().type == TokenType::Float ||
                    is_op("[") || is_op("{")) &&
                   !is_name("else") && !is_name("or") && !is_name("and")) {
            // One argument without parentheses: `x is divisibleby 3`, `x is sameas false`.
            if (is_name("is")) return fail("tests cannot be chained: use 'and'");
            STRATA_ASSIGN(ExprPtr arg, parse_primary());
            STRATA_ASSIGN(arg, parse_postfix(std::move(arg)));
            t->args.positional.push_back(std::move(arg));
        }
        return ExprPtr(std::move(t));
    }

    std::vector<Token> tokens_;
    const Program& program_;
    size_t pos_ = 0;
    int depth_ = 0;
    int loop_depth_ = 0;
    std::vector<MacroStmt*> macros_;
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
