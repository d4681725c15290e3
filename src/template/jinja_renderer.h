// Evaluates a parsed template. One Renderer renders once: it holds the variable scopes, the
// output buffer, and the counters that enforce RenderLimits. Builtins (filters, tests, methods,
// globals) receive it to call back into evaluation and to respect the limits.
//
// Scoping follows Jinja2: a for-loop iteration, a macro call and a `with` block each get a new
// scope whose assignments do not leak out (namespace() objects exist for that); `if` does not
// open a scope. The bodies of `{% set x %}...{% endset %}` and `{% filter %}` blocks are scopes
// too. Macros see the scope they were defined in, live.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "template/jinja_ast.h"
#include "template/jinja_parser.h"
#include "template/jinja_template.h"
#include "template/jinja_value.h"

namespace strata::jinja {

struct Scope {
    explicit Scope(std::shared_ptr<Scope> p) : parent(std::move(p)) {}
    std::shared_ptr<Scope> parent;
    std::vector<std::pair<std::string, Value>> vars;

    Value* find_local(std::string_view name);
    void set(std::string_view name, Value v);
};

class Renderer {
  public:
    Renderer(const Program& program, const RenderOptions& options);
    ~Renderer();
    Renderer(const Renderer&) = delete;
    Renderer& operator=(const Renderer&) = delete;

    Result<std::string> render(const nlohmann::ordered_json& context);

    // ---- services for builtins ----
    const RenderLimits& limits() const { return options_.limits; }
    const RenderOptions& options() const { return options_; }
    // Counts abstract work; fails once RenderLimits::max_work is spent.
    Result<void> charge(uint64_t units);
    // Builds values, enforcing the size limits.
    Result<Value> make_string(std::string s);
    Result<Value> make_list(std::vector<Value> items, bool is_tuple = false);
    // Remembers a container the template mutated (list.append, namespace attributes) so that
    // reference cycles it may have made are broken when rendering ends.
    void note_mutation(const Value& container);

    Result<Value> call(const Value& callee, CallArgs& args);
    Result<Value> get_attribute(const Value& object, std::string_view name);
    Result<Value> get_item(const Value& object, const Value& key);
    Result<Value> apply_filter(std::string_view name, Value input, CallArgs& args);
    Result<bool> apply_test(std::string_view name, const Value& value, CallArgs& args);

  private:
    enum class Flow { Normal, Break, Continue };

    Result<Flow> exec_body(const Body& body);
    Result<Flow> exec(const Stmt& s);
    Result<Flow> exec_if(const IfStmt& s);
    Result<Flow> exec_for(const ForStmt& s);
    Result<Flow> exec_set(const SetStmt& s);
    Result<Flow> exec_set_block(const SetBlockStmt& s);
    Result<Flow> exec_call_block(const CallBlockStmt& s);
    Result<Flow> exec_filter_block(const FilterBlockStmt& s);
    Result<Flow> exec_with(const WithStmt& s);

    Result<Value> eval(const Expr& e);
    Result<Value> eval_list(const ListExpr& e);
    Result<Value> eval_dict(const DictExpr& e);
    Result<Value> eval_unary(const UnaryExpr& e);
    Result<Value> eval_binary(const BinaryExpr& e);
    Result<Value> eval_compare(const CompareExpr& e);
    Result<Value> eval_slice(const SliceExpr& e);
    Result<Value> eval_call(const CallExpr& e);
    Result<Value> eval_filter(const FilterExpr& e, const Value* block_input);
    Result<Value> eval_test(const TestExpr& e);
    Result<CallArgs> eval_arguments(const Arguments& a);

    Value lookup(const std::string& name);
    Result<void> assign(const Target& target, Value value, uint32_t offset);
    Result<std::string> capture(const Body& body);  // renders into a separate buffer
    // The same in a new scope: assignments in {% set x %} and {% filter %} bodies stay inside.
    Result<std::string> capture_scoped(const Body& body);
    Result<void> emit(std::string_view text);
    Value define_macro(const MacroStmt& m);
    Result<Value> invoke_macro(const MacroStmt& m, const std::shared_ptr<Scope>& closure,
                               CallArgs& args);

    // Records where an error arose; the innermost node wins.
    Error at(uint32_t offset, Error e);

    const Program& program_;
    RenderOptions options_;
    std::shared_ptr<Scope> scope_;
    std::string* out_ = nullptr;
    size_t produced_ = 0;
    uint64_t work_ = 0;
    uint64_t iterations_ = 0;
    int call_depth_ = 0;
    int eval_depth_ = 0;
    std::optional<uint32_t> error_offset_;
    std::vector<std::shared_ptr<Scope>> macro_scopes_;
    std::vector<Value> mutated_;
};

}  // namespace strata::jinja
