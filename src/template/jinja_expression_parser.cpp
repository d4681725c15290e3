#include "template/jinja_parse_internal.h"

namespace strata::jinja {

// Comma-separated expressions make a tuple: `{{ a, b }}`, `{% set x = 1, 2 %}`.
Result<ExprPtr> ExpressionParser::parse_tuple(bool with_conditional, bool explicit_parentheses) {
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

Result<ExprPtr> ExpressionParser::parse_expression(bool with_conditional) {
    if (with_conditional) return parse_conditional();
    return parse_or();
}

Result<ExprPtr> ExpressionParser::parse_conditional() {
    const uint32_t off = cur().offset;
    STRATA_ASSIGN(ExprPtr expr, parse_or());
    while (skip_name("if")) {
        auto c = std::make_unique<ConditionalExpr>(off);
        c->then_value = std::move(expr);
        STRATA_ASSIGN(c->condition, parse_or());
        if (skip_name("else")) {
            // `a if x else b if y else ...` recurses once per else: one nesting level each.
            DepthGuard guard(depth_);
            if (guard.too_deep()) return too_deep();
            STRATA_ASSIGN(c->else_value, parse_conditional());
        }
        expr = std::move(c);
    }
    return expr;
}

Result<ExprPtr> ExpressionParser::parse_or() {
    STRATA_ASSIGN(ExprPtr lhs, parse_and());
    while (is_name("or")) {
        const uint32_t off = cur().offset;
        advance();
        STRATA_ASSIGN(ExprPtr rhs, parse_and());
        lhs = std::make_unique<BinaryExpr>(off, BinaryOp::Or, std::move(lhs), std::move(rhs));
    }
    return lhs;
}

Result<ExprPtr> ExpressionParser::parse_and() {
    STRATA_ASSIGN(ExprPtr lhs, parse_not());
    while (is_name("and")) {
        const uint32_t off = cur().offset;
        advance();
        STRATA_ASSIGN(ExprPtr rhs, parse_not());
        lhs = std::make_unique<BinaryExpr>(off, BinaryOp::And, std::move(lhs), std::move(rhs));
    }
    return lhs;
}

Result<ExprPtr> ExpressionParser::parse_not() {
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

Result<ExprPtr> ExpressionParser::parse_compare() {
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

Result<ExprPtr> ExpressionParser::parse_add() {
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

Result<ExprPtr> ExpressionParser::parse_concat() {
    STRATA_ASSIGN(ExprPtr lhs, parse_mul());
    while (is_op("~")) {
        const uint32_t off = cur().offset;
        advance();
        STRATA_ASSIGN(ExprPtr rhs, parse_mul());
        lhs = std::make_unique<BinaryExpr>(off, BinaryOp::Concat, std::move(lhs), std::move(rhs));
    }
    return lhs;
}

Result<ExprPtr> ExpressionParser::parse_mul() {
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
Result<ExprPtr> ExpressionParser::parse_pow() {
    STRATA_ASSIGN(ExprPtr lhs, parse_unary(true));
    while (is_op("**")) {
        const uint32_t off = cur().offset;
        advance();
        STRATA_ASSIGN(ExprPtr rhs, parse_unary(true));
        lhs = std::make_unique<BinaryExpr>(off, BinaryOp::Pow, std::move(lhs), std::move(rhs));
    }
    return lhs;
}

Result<ExprPtr> ExpressionParser::parse_unary(bool with_filters) {
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

Result<ExprPtr> ExpressionParser::parse_primary() {
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
        default:
            break;
    }
    return unexpected("an expression");
}

Result<ExprPtr> ExpressionParser::parse_list() {
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

Result<ExprPtr> ExpressionParser::parse_dict() {
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

Result<ExprPtr> ExpressionParser::parse_postfix(ExprPtr node) {
    while (true) {
        const uint32_t off = node->offset;  // errors point at the start of `a.b[c]`
        if (skip_op(".")) {
            if (cur().type == TokenType::Integer) {  // xs.0 is xs[0]
                auto idx =
                    std::make_unique<LiteralExpr>(cur().offset, Value::integer(cur().int_value));
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

Result<ExprPtr> ExpressionParser::parse_subscript(ExprPtr object, uint32_t off) {
    ExprPtr start;
    if (!is_op(":")) {
        STRATA_ASSIGN(start, parse_expression(true));
        if (is_op(",")) {  // x[a, b] indexes with a tuple
            auto t = std::make_unique<ListExpr>(start->offset, true);
            t->items.push_back(std::move(start));
            while (skip_op(",")) {  // no trailing comma, as in jinja2
                STRATA_ASSIGN(ExprPtr e, parse_expression(true));
                t->items.push_back(std::move(e));
            }
            start = std::move(t);
        }
        if (skip_op("]")) {
            return ExprPtr(
                std::make_unique<SubscriptExpr>(off, std::move(object), std::move(start)));
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

Result<Arguments> ExpressionParser::parse_arguments() {
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

Result<ExprPtr> ExpressionParser::parse_call(ExprPtr callee) {
    const uint32_t off = callee->offset;  // errors point at the start of the call
    auto call = std::make_unique<CallExpr>(off, std::move(callee));
    STRATA_ASSIGN(call->args, parse_arguments());
    return ExprPtr(std::move(call));
}

// After a postfix expression: any number of `| filter(args)`, `is test args` and calls.
Result<ExprPtr> ExpressionParser::parse_filters(ExprPtr node) {
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
Result<ExprPtr> ExpressionParser::parse_filter_chain_from_name(ExprPtr node) {
    STRATA_ASSIGN(node, parse_one_filter(std::move(node)));
    while (skip_op("|")) {
        STRATA_ASSIGN(node, parse_one_filter(std::move(node)));
    }
    return node;
}

Result<ExprPtr> ExpressionParser::parse_one_filter(ExprPtr operand) {
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

Result<ExprPtr> ExpressionParser::parse_test(ExprPtr operand) {
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
                cur().type == TokenType::Integer || cur().type == TokenType::Float || is_op("[") ||
                is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
        // One argument without parentheses: `x is divisibleby 3`, `x is sameas false`.
        if (is_name("is")) return fail("tests cannot be chained: use 'and'");
        STRATA_ASSIGN(ExprPtr arg, parse_primary());
        STRATA_ASSIGN(arg, parse_postfix(std::move(arg)));
        t->args.positional.push_back(std::move(arg));
    }
    return ExprPtr(std::move(t));
}

}  // namespace strata::jinja
