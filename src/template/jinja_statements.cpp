// The renderer's statements (jinja_renderer.h): text and output, if, for, set, set blocks,
// filter and call blocks, with; and the macros they define and call.
#include "template/jinja_renderer.h"

#include <memory>
#include <string>
#include <vector>

#include "template/jinja_builtins.h"
#include "template/jinja_render_internal.h"

namespace strata::jinja {

namespace {

// Swaps the current scope for the lifetime of the guard.
class ScopeSwap {
  public:
    ScopeSwap(std::shared_ptr<Scope>& slot, std::shared_ptr<Scope> next)
        : slot_(slot), saved_(std::move(slot)) {
        slot_ = std::move(next);
    }
    ~ScopeSwap() { slot_ = std::move(saved_); }
    ScopeSwap(const ScopeSwap&) = delete;
    ScopeSwap& operator=(const ScopeSwap&) = delete;

  private:
    std::shared_ptr<Scope>& slot_;
    std::shared_ptr<Scope> saved_;
};

}  // namespace

// ---- statements ----

Result<Renderer::Flow> Renderer::exec_body(const Body& body) {
    for (const auto& s : body) {
        STRATA_ASSIGN(Flow f, exec(*s));
        if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
}

Result<Renderer::Flow> Renderer::exec(const Stmt& s) {
    EvalDepth depth(eval_depth_);
    if (eval_depth_ > options_.limits.max_eval_depth) {
        return at(s.offset,
                  err("the template nests deeper than ",
                      std::to_string(options_.limits.max_eval_depth), " levels while rendering"));
    }
    if (auto c = charge(1); !c) return at(s.offset, c.take_error());
    switch (s.kind) {
        case StmtKind::Text: {
            auto r = emit(static_cast<const TextStmt&>(s).text);
            if (!r) return at(s.offset, r.take_error());
            return Flow::Normal;
        }
        case StmtKind::Output: {
            const auto& o = static_cast<const OutputStmt&>(s);
            STRATA_ASSIGN(Value v, eval(*o.expr));
            auto text = to_str(v);
            if (!text) return at(o.expr->offset, text.take_error());
            auto r = emit(*text);
            if (!r) return at(s.offset, r.take_error());
            return Flow::Normal;
        }
        case StmtKind::If:
            return exec_if(static_cast<const IfStmt&>(s));
        case StmtKind::For:
            return exec_for(static_cast<const ForStmt&>(s));
        case StmtKind::Set:
            return exec_set(static_cast<const SetStmt&>(s));
        case StmtKind::SetBlock:
            return exec_set_block(static_cast<const SetBlockStmt&>(s));
        case StmtKind::Macro: {
            const auto& m = static_cast<const MacroStmt&>(s);
            scope_->set(m.name, define_macro(m));
            return Flow::Normal;
        }
        case StmtKind::CallBlock:
            return exec_call_block(static_cast<const CallBlockStmt&>(s));
        case StmtKind::FilterBlock:
            return exec_filter_block(static_cast<const FilterBlockStmt&>(s));
        case StmtKind::With:
            return exec_with(static_cast<const WithStmt&>(s));
        case StmtKind::Break:
            return Flow::Break;
        case StmtKind::Continue:
            return Flow::Continue;
    }
    return Flow::Normal;
}

Result<Renderer::Flow> Renderer::exec_if(const IfStmt& s) {
    for (const auto& [cond, body] : s.branches) {
        STRATA_ASSIGN(Value c, eval(*cond));
        if (truthy(c)) return exec_body(body);
    }
    return exec_body(s.else_body);
}

Result<Renderer::Flow> Renderer::exec_for(const ForStmt& s) {
    STRATA_ASSIGN(Value iterable, eval(*s.iterable));
    auto all = iterate(iterable);
    if (!all) return at(s.iterable->offset, all.take_error());
    std::vector<Value> items;
    if (s.filter) {
        // `for x in xs if cond`: filtered before the loop starts, so loop.length counts only
        // the items that pass.
        for (auto& item : *all) {
            ScopeSwap swap(scope_, std::make_shared<Scope>(scope_));
            STRATA_TRY(assign(s.target, item, s.offset));
            STRATA_ASSIGN(Value keep, eval(*s.filter));
            if (truthy(keep)) items.push_back(std::move(item));
        }
    } else {
        items = std::move(*all);
    }
    // Iterating a string makes one value per character, which costs more than copying a list.
    const uint64_t per_item = iterable.is_string() ? 4 : 1;
    if (auto c = charge(items.size() * per_item); !c) return at(s.offset, c.take_error());
    if (items.empty()) {
        if (s.else_body.empty()) return Flow::Normal;
        ScopeSwap swap(scope_, std::make_shared<Scope>(scope_));
        STRATA_ASSIGN(Flow f, exec_body(s.else_body));
        (void)f;
        return Flow::Normal;
    }
    auto shared_items = std::make_shared<const std::vector<Value>>(std::move(items));
    auto loop = std::make_shared<ObjectData>();
    loop->type = ObjectData::Type::Loop;
    loop->loop_items = shared_items;
    const Value loop_value = Value::object(loop);
    for (size_t i = 0; i < shared_items->size(); ++i) {
        if (++iterations_ > options_.limits.max_loop_iterations) {
            return at(s.offset,
                      err("loops ran more than ",
                          std::to_string(options_.limits.max_loop_iterations), " iterations"));
        }
        loop->loop_index = i;
        ScopeSwap swap(scope_, std::make_shared<Scope>(scope_));
        STRATA_TRY(assign(s.target, (*shared_items)[i], s.offset));
        scope_->set("loop", loop_value);
        STRATA_ASSIGN(Flow f, exec_body(s.body));
        if (f == Flow::Break) break;
    }
    return Flow::Normal;
}

Result<Renderer::Flow> Renderer::exec_set(const SetStmt& s) {
    STRATA_ASSIGN(Value v, eval(*s.value));
    STRATA_TRY(assign(s.target, std::move(v), s.offset));
    return Flow::Normal;
}

Result<std::string> Renderer::capture_scoped(const Body& body) {
    ScopeSwap swap(scope_, std::make_shared<Scope>(scope_));
    return capture(body);
}

Result<std::string> Renderer::capture(const Body& body) {
    std::string buffer;
    std::string* saved = out_;
    out_ = &buffer;
    auto flow = exec_body(body);
    out_ = saved;
    if (!flow) return flow.take_error();
    return buffer;
}

Result<Renderer::Flow> Renderer::exec_set_block(const SetBlockStmt& s) {
    STRATA_ASSIGN(std::string text, capture_scoped(s.body));
    Value v = Value::string(std::move(text));
    if (s.filter) {
        STRATA_ASSIGN(v, eval_filter(static_cast<const FilterExpr&>(*s.filter), &v));
    }
    STRATA_TRY(assign(s.target, std::move(v), s.offset));
    return Flow::Normal;
}

Result<Renderer::Flow> Renderer::exec_filter_block(const FilterBlockStmt& s) {
    STRATA_ASSIGN(std::string text, capture_scoped(s.body));
    const Value input = Value::string(std::move(text));
    STRATA_ASSIGN(Value v, eval_filter(static_cast<const FilterExpr&>(*s.filter), &input));
    auto str = to_str(v);
    if (!str) return at(s.offset, str.take_error());
    auto r = emit(*str);
    if (!r) return at(s.offset, r.take_error());
    return Flow::Normal;
}

Result<Renderer::Flow> Renderer::exec_call_block(const CallBlockStmt& s) {
    const Value caller = define_macro(s.caller);
    const auto& call = static_cast<const CallExpr&>(*s.call);
    STRATA_ASSIGN(CallArgs args, eval_arguments(call.args));
    args.keyword.emplace_back("caller", caller);
    STRATA_ASSIGN(Value callee, eval(*call.callee));
    auto result = this->call(callee, args);
    if (!result) return at(call.offset, result.take_error());
    auto text = to_str(*result);
    if (!text) return at(s.offset, text.take_error());
    auto r = emit(*text);
    if (!r) return at(s.offset, r.take_error());
    return Flow::Normal;
}

Result<Renderer::Flow> Renderer::exec_with(const WithStmt& s) {
    std::vector<Value> values;
    for (const auto& [target, expr] : s.assignments) {
        STRATA_ASSIGN(Value v, eval(*expr));
        values.push_back(std::move(v));
    }
    ScopeSwap swap(scope_, std::make_shared<Scope>(scope_));
    for (size_t i = 0; i < values.size(); ++i) {
        STRATA_TRY(assign(s.assignments[i].first, std::move(values[i]), s.offset));
    }
    return exec_body(s.body);
}

// ---- macros ----

Value Renderer::define_macro(const MacroStmt& m) {
    std::shared_ptr<Scope> closure = scope_;
    macro_scopes_.push_back(closure);
    const MacroStmt* macro = &m;
    return Value::callable(m.name, "<Macro '" + m.name + "'>",
                           [macro, closure](Renderer& r, CallArgs& args) {
                               return r.invoke_macro(*macro, closure, args);
                           });
}

Result<Value> Renderer::invoke_macro(const MacroStmt& m, const std::shared_ptr<Scope>& closure,
                                     CallArgs& args) {
    if (call_depth_ >= options_.limits.max_call_depth) {
        return err("macro calls nest deeper than ", std::to_string(options_.limits.max_call_depth),
                   " (runaway recursion in macro '", m.name, "'?)");
    }
    auto scope = std::make_shared<Scope>(closure);
    std::vector<bool> bound(m.params.size(), false);
    std::vector<Value> extra_positional;
    for (size_t i = 0; i < args.positional.size(); ++i) {
        if (i < m.params.size()) {
            scope->set(m.params[i].name, std::move(args.positional[i]));
            bound[i] = true;
        } else if (m.uses_varargs) {
            extra_positional.push_back(std::move(args.positional[i]));
        } else {
            return err("macro '", m.name, "' takes not more than ", std::to_string(m.params.size()),
                       " argument(s)");
        }
    }
    DictData extra_keywords;
    for (auto& [key, value] : args.keyword) {
        size_t p = 0;
        while (p < m.params.size() && m.params[p].name != key) ++p;
        if (p < m.params.size()) {
            if (bound[p]) {
                return err("macro '", m.name, "' got multiple values for argument '", key, "'");
            }
            scope->set(key, std::move(value));
            bound[p] = true;
        } else if (key == "caller" && m.uses_caller) {
            scope->set("caller", std::move(value));
        } else if (m.uses_kwargs) {
            extra_keywords.set(Value::string(key), std::move(value));
        } else {
            return err("macro '", m.name, "' takes no keyword argument '", key, "'");
        }
    }
    ++call_depth_;
    struct DepthRestore {
        int& d;
        ~DepthRestore() { --d; }
    } restore{call_depth_};
    ScopeSwap swap(scope_, scope);
    for (size_t i = 0; i < m.params.size(); ++i) {
        if (bound[i]) continue;
        if (m.params[i].default_value) {
            STRATA_ASSIGN(Value v, eval(*m.params[i].default_value));
            scope->set(m.params[i].name, std::move(v));
        } else {
            scope->set(m.params[i].name,
                       Value::undefined("parameter '" + m.params[i].name + "' was not provided"));
        }
    }
    if (m.uses_varargs) {
        STRATA_ASSIGN(Value varargs, Value::list(std::move(extra_positional), true));
        scope->set("varargs", std::move(varargs));
    }
    if (m.uses_kwargs) {
        STRATA_ASSIGN(Value kwargs, Value::dict(std::move(extra_keywords)));
        scope->set("kwargs", std::move(kwargs));
    }
    if (m.uses_caller && !scope->find_local("caller")) {
        scope->set("caller", Value::undefined("'caller' is undefined: macro '" + m.name +
                                              "' was not called from {% call %}"));
    }
    STRATA_ASSIGN(std::string text, capture(m.body));
    return Value::string(std::move(text));
}

}  // namespace strata::jinja
