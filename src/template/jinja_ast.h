// The syntax tree of a parsed template: expressions and statements. Every node records the byte
// offset of its first token so that errors can name a line and column.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/jinja_value.h"

namespace strata::jinja {

// ---- expressions ----

enum class ExprKind : uint8_t {
    Literal,     // constant
    Name,        // variable
    ListLit,     // [a, b] or (a, b)
    DictLit,     // {k: v}
    Unary,       // -x, +x, not x
    Binary,      // arithmetic, ~, and, or
    Compare,     // chained comparisons, in, not in
    Attribute,   // x.name
    Subscript,   // x[i]
    Slice,       // x[a:b:c]
    Call,        // f(args)
    Filter,      // x | f(args)
    Test,        // x is [not] t(args)
    Conditional  // a if c else b
};

struct Expr {
    explicit Expr(ExprKind k, uint32_t off) : kind(k), offset(off) {}
    virtual ~Expr() = default;
    ExprKind kind;
    uint32_t offset;
};
using ExprPtr = std::unique_ptr<Expr>;

struct LiteralExpr : Expr {
    LiteralExpr(uint32_t off, Value v) : Expr(ExprKind::Literal, off), value(std::move(v)) {}
    Value value;
};

struct NameExpr : Expr {
    NameExpr(uint32_t off, std::string n) : Expr(ExprKind::Name, off), name(std::move(n)) {}
    std::string name;
};

struct ListExpr : Expr {
    ListExpr(uint32_t off, bool tuple) : Expr(ExprKind::ListLit, off), is_tuple(tuple) {}
    std::vector<ExprPtr> items;
    bool is_tuple;
};

struct DictExpr : Expr {
    explicit DictExpr(uint32_t off) : Expr(ExprKind::DictLit, off) {}
    std::vector<std::pair<ExprPtr, ExprPtr>> items;
};

enum class UnaryOp : uint8_t { Neg, Pos, Not };
struct UnaryExpr : Expr {
    UnaryExpr(uint32_t off, UnaryOp o, ExprPtr e)
        : Expr(ExprKind::Unary, off), op(o), operand(std::move(e)) {}
    UnaryOp op;
    ExprPtr operand;
};

enum class BinaryOp : uint8_t { Add, Sub, Mul, Div, FloorDiv, Mod, Pow, Concat, And, Or };
struct BinaryExpr : Expr {
    BinaryExpr(uint32_t off, BinaryOp o, ExprPtr l, ExprPtr r)
        : Expr(ExprKind::Binary, off), op(o), lhs(std::move(l)), rhs(std::move(r)) {}
    BinaryOp op;
    ExprPtr lhs, rhs;
};

enum class CompareOp : uint8_t { Eq, Ne, Lt, Le, Gt, Ge, In, NotIn };
struct CompareExpr : Expr {
    CompareExpr(uint32_t off, ExprPtr first_operand)
        : Expr(ExprKind::Compare, off), first(std::move(first_operand)) {}
    ExprPtr first;
    std::vector<std::pair<CompareOp, ExprPtr>>
        rest;  // a < b <= c: each pair compares to the previous
};

struct AttributeExpr : Expr {
    AttributeExpr(uint32_t off, ExprPtr o, std::string n)
        : Expr(ExprKind::Attribute, off), object(std::move(o)), name(std::move(n)) {}
    ExprPtr object;
    std::string name;
};

struct SubscriptExpr : Expr {
    SubscriptExpr(uint32_t off, ExprPtr o, ExprPtr i)
        : Expr(ExprKind::Subscript, off), object(std::move(o)), index(std::move(i)) {}
    ExprPtr object, index;
};

struct SliceExpr : Expr {
    SliceExpr(uint32_t off, ExprPtr o) : Expr(ExprKind::Slice, off), object(std::move(o)) {}
    ExprPtr object, start, stop, step;  // each may be null
};

struct Arguments {
    std::vector<ExprPtr> positional;
    std::vector<std::pair<std::string, ExprPtr>> keyword;
};

struct CallExpr : Expr {
    CallExpr(uint32_t off, ExprPtr c) : Expr(ExprKind::Call, off), callee(std::move(c)) {}
    ExprPtr callee;
    Arguments args;
};

struct FilterExpr : Expr {
    // operand is null inside `{% filter %}` blocks and `{% set x | f %}`: the body is the input.
    FilterExpr(uint32_t off, ExprPtr o, std::string n)
        : Expr(ExprKind::Filter, off), operand(std::move(o)), name(std::move(n)) {}
    ExprPtr operand;
    std::string name;
    Arguments args;
};

struct TestExpr : Expr {
    TestExpr(uint32_t off, ExprPtr o, std::string n, bool neg)
        : Expr(ExprKind::Test, off), operand(std::move(o)), name(std::move(n)), negated(neg) {}
    ExprPtr operand;
    std::string name;
    bool negated;
    Arguments args;
};

struct ConditionalExpr : Expr {
    explicit ConditionalExpr(uint32_t off) : Expr(ExprKind::Conditional, off) {}
    ExprPtr condition, then_value, else_value;  // else_value null: undefined when false
};

// ---- statements ----

enum class StmtKind : uint8_t {
    Text,
    Output,  // {{ expr }}
    If,
    For,
    Set,       // {% set target = expr %}
    SetBlock,  // {% set name %}...{% endset %}
    Macro,
    CallBlock,    // {% call m() %}...{% endcall %}
    FilterBlock,  // {% filter f %}...{% endfilter %}
    With,
    Break,
    Continue,
};

struct Stmt {
    explicit Stmt(StmtKind k, uint32_t off) : kind(k), offset(off) {}
    virtual ~Stmt() = default;
    StmtKind kind;
    uint32_t offset;
};
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct TextStmt : Stmt {
    TextStmt(uint32_t off, std::string t) : Stmt(StmtKind::Text, off), text(std::move(t)) {}
    std::string text;
};

struct OutputStmt : Stmt {
    OutputStmt(uint32_t off, ExprPtr e) : Stmt(StmtKind::Output, off), expr(std::move(e)) {}
    ExprPtr expr;
};

struct IfStmt : Stmt {
    explicit IfStmt(uint32_t off) : Stmt(StmtKind::If, off) {}
    std::vector<std::pair<ExprPtr, Body>> branches;  // if, elif...
    Body else_body;
};

// Assignment targets: one name, names to unpack (`for k, v in ...`), or `ns.attr`.
struct Target {
    std::vector<std::string> names;
    bool unpack = false;    // a tuple target, even of one name: `for (x,) in ...`
    std::string attribute;  // non-empty: assign names[0].attribute
};

struct ForStmt : Stmt {
    explicit ForStmt(uint32_t off) : Stmt(StmtKind::For, off) {}
    Target target;
    ExprPtr iterable;
    ExprPtr filter;  // `for x in xs if cond`, may be null
    Body body, else_body;
};

struct SetStmt : Stmt {
    explicit SetStmt(uint32_t off) : Stmt(StmtKind::Set, off) {}
    Target target;
    ExprPtr value;
};

struct SetBlockStmt : Stmt {
    explicit SetBlockStmt(uint32_t off) : Stmt(StmtKind::SetBlock, off) {}
    Target target;
    ExprPtr filter;  // filter chain applied to the captured text, may be null
    Body body;
};

struct MacroParam {
    std::string name;
    ExprPtr default_value;  // may be null
};

struct MacroStmt : Stmt {
    explicit MacroStmt(uint32_t off) : Stmt(StmtKind::Macro, off) {}
    std::string name;
    std::vector<MacroParam> params;
    Body body;
    // Whether the body mentions the special names; as in Jinja2, extra arguments are an error
    // unless the macro reads varargs / kwargs.
    bool uses_varargs = false;
    bool uses_kwargs = false;
    bool uses_caller = false;
};

struct CallBlockStmt : Stmt {
    explicit CallBlockStmt(uint32_t off) : Stmt(StmtKind::CallBlock, off) {}
    MacroStmt caller{0};  // the body as a macro named "caller"
    ExprPtr call;         // a CallExpr
};

struct FilterBlockStmt : Stmt {
    explicit FilterBlockStmt(uint32_t off) : Stmt(StmtKind::FilterBlock, off) {}
    ExprPtr filter;  // chain whose innermost operand is null
    Body body;
};

struct WithStmt : Stmt {
    explicit WithStmt(uint32_t off) : Stmt(StmtKind::With, off) {}
    std::vector<std::pair<Target, ExprPtr>> assignments;
    Body body;
};

struct SimpleStmt : Stmt {  // break, continue
    SimpleStmt(StmtKind k, uint32_t off) : Stmt(k, off) {}
};

}  // namespace strata::jinja
