#include "template/jinja_renderer.h"

#include <nlohmann/json.hpp>

#include "template/jinja_builtins.h"
#include "template/jinja_render_internal.h"

namespace strata::jinja {

// ---- Scope ----

Value* Scope::find_local(std::string_view name) {
    for (auto& [k, v] : vars) {
        if (k == name) return &v;
    }
    return nullptr;
}

void Scope::set(std::string_view name, Value v) {
    if (Value* existing = find_local(name)) {
        *existing = std::move(v);
        return;
    }
    vars.emplace_back(std::string(name), std::move(v));
}

namespace {

// Work charged for reading a value through (a comparison, `in`, a filter or method): a unit is
// roughly one evaluation step, which costs about as much as decoding four bytes of text.
uint64_t scan_cost(const Value& v) {
    if (v.is_string()) return v.str().size() / 4;
    if (v.is_list()) return v.items().size();
    if (v.is_dict()) return v.dict_data().size();
    return 0;
}

// Filters and methods read their whole input, except these, which take constant time on lists
// and dicts (the usual `messages|length` inside a loop over messages must stay cheap).
bool constant_time_on_containers(std::string_view filter) {
    return filter == "length" || filter == "count" || filter == "first" || filter == "last" ||
           filter == "default" || filter == "d" || filter == "attr";
}

std::string object_description(const Value& v) {
    if (v.is_none()) return "'None'";
    return "'" + std::string(type_name(v)) + " object'";
}

}  // namespace

Renderer::Renderer(const Program& program, const RenderOptions& options)
    : program_(program), options_(options) {}

Renderer::~Renderer() {
    // Break reference cycles: a macro's closure scope holds the macro, and templates can append
    // a list to itself or store a namespace in its own attribute.
    for (auto& s : macro_scopes_) s->vars.clear();
    for (auto& v : mutated_) {
        if (v.is_list()) v.list_data().items.clear();
        if (v.is_dict()) v.dict_data().clear();
        if (v.is_object()) v.object_data().attrs.clear();
    }
}

Error Renderer::at(uint32_t offset, Error e) {
    if (!error_offset_) error_offset_ = offset;
    return e;
}

Result<void> Renderer::charge(uint64_t units) {
    work_ += units;
    if (work_ > options_.limits.max_work) {
        return err("the template did more work than the render limit allows (",
                   std::to_string(options_.limits.max_work), " steps)");
    }
    return {};
}

Result<Value> Renderer::make_string(std::string s) {
    if (s.size() > options_.limits.max_string_bytes) {
        return err("a string of ", std::to_string(s.size()), " bytes passes the limit of ",
                   std::to_string(options_.limits.max_string_bytes));
    }
    // Charging for bytes built bounds the memory a template can churn through, not only time.
    STRATA_TRY(charge(s.size() / 4));
    return Value::string(std::move(s));
}

Result<Value> Renderer::make_list(std::vector<Value> items, bool is_tuple) {
    if (items.size() > options_.limits.max_list_items) {
        return err("a list of ", std::to_string(items.size()), " items passes the limit of ",
                   std::to_string(options_.limits.max_list_items));
    }
    STRATA_TRY(charge(items.size()));
    return Value::list(std::move(items), is_tuple);
}

void Renderer::note_mutation(const Value& container) {
    bool* registered = nullptr;
    if (container.is_list()) registered = &container.list_data().registered;
    if (container.is_dict()) registered = &container.dict_data().registered;
    if (container.is_object()) registered = &container.object_data().registered;
    if (registered && !*registered) {
        *registered = true;
        mutated_.push_back(container);
    }
}

Result<void> Renderer::emit(std::string_view text) {
    produced_ += text.size();
    if (produced_ > options_.limits.max_output_bytes) {
        return err("the template produced more than ",
                   std::to_string(options_.limits.max_output_bytes), " bytes of text");
    }
    out_->append(text);
    return {};
}

Result<std::string> Renderer::render(const nlohmann::ordered_json& context) {
    if (!context.is_object()) {
        return err(program_.name, ": the context must be a JSON object, not ", context.type_name());
    }
    scope_ = std::make_shared<Scope>(nullptr);
    for (const auto& [key, value] : context.items()) {
        auto v = from_json(value);
        if (!v) return err(program_.name, ": context key '", key, "': ", v.error().message);
        scope_->set(key, std::move(*v));
    }
    std::string out;
    out_ = &out;
    auto flow = exec_body(program_.body);
    if (!flow) {
        std::string where = error_offset_ ? program_.location(*error_offset_) : program_.name;
        return err(where, ": ", flow.error().message);
    }
    return out;
}

// ---- variables ----

Value Renderer::lookup(const std::string& name) {
    for (Scope* s = scope_.get(); s; s = s->parent.get()) {
        if (Value* v = s->find_local(name)) return *v;
    }
    if (const Value* g = find_global(name)) return *g;
    return Value::undefined("'" + name + "' is undefined");
}

Result<void> Renderer::assign(const Target& target, Value value, uint32_t offset) {
    if (!target.attribute.empty()) {
        Value ns = lookup(target.names[0]);
        if (!ns.is_namespace()) {
            return at(offset, err("cannot assign attribute '", target.attribute, "' on '",
                                  target.names[0], "', which is not a namespace()"));
        }
        if (value.depth() + 1 > kMaxValueDepth) {
            return at(offset, err("value is nested more than ", std::to_string(kMaxValueDepth),
                                  " levels deep"));
        }
        note_mutation(ns);
        ns.object_data().attrs.set(Value::string(target.attribute), std::move(value));
        return {};
    }
    if (!target.unpack) {
        scope_->set(target.names[0], std::move(value));
        return {};
    }
    auto items = iterate(value);
    if (!items) return at(offset, items.take_error());
    const size_t want = target.names.size();
    if (items->size() != want) {
        return at(offset,
                  items->size() < want
                      ? err("not enough values to unpack (expected ", std::to_string(want),
                            ", got ", std::to_string(items->size()), ")")
                      : err("too many values to unpack (expected ", std::to_string(want), ")"));
    }
    for (size_t i = 0; i < want; ++i) scope_->set(target.names[i], std::move((*items)[i]));
    return {};
}

// ---- calls, attributes, items ----

Result<Value> Renderer::call(const Value& callee, CallArgs& args) {
    if (callee.is_undefined()) return err(callee.undefined_hint());
    if (!callee.is_callable()) return err("'", type_name(callee), "' object is not callable");
    return callee.callable_data().fn(*this, args);
}

Result<Value> Renderer::get_attribute(const Value& object, std::string_view name) {
    switch (object.kind()) {
        case Kind::Undefined:
            return err(object.undefined_hint());
        case Kind::Dict:
            if (!has_method(object, name)) {
                if (const Value* v = object.dict_data().find(name)) return *v;
                return Value::undefined("'dict object' has no attribute '" + std::string(name) +
                                        "'");
            }
            break;
        case Kind::Object: {
            const ObjectData& o = object.object_data();
            if (o.type == ObjectData::Type::Namespace) {
                if (const Value* v = o.attrs.find(name)) return *v;
                return Value::undefined("'Namespace object' has no attribute '" +
                                        std::string(name) + "'");
            }
            const auto& items = *o.loop_items;
            const auto n = static_cast<int64_t>(items.size());
            const auto i = static_cast<int64_t>(o.loop_index);
            if (name == "index") return Value::integer(i + 1);
            if (name == "index0") return Value::integer(i);
            if (name == "revindex") return Value::integer(n - i);
            if (name == "revindex0") return Value::integer(n - i - 1);
            if (name == "first") return Value::boolean(i == 0);
            if (name == "last") return Value::boolean(i == n - 1);
            if (name == "length") return Value::integer(n);
            if (name == "depth") return Value::integer(1);
            if (name == "depth0") return Value::integer(0);
            if (name == "previtem") {
                if (i > 0) return items[static_cast<size_t>(i - 1)];
                return Value::undefined("there is no previous item");
            }
            if (name == "nextitem") {
                if (i + 1 < n) return items[static_cast<size_t>(i + 1)];
                return Value::undefined("there is no next item");
            }
            if (name == "cycle") {
                return Value::callable("cycle", "<bound method LoopContext.cycle>",
                                       [i](Renderer&, CallArgs& a) -> Result<Value> {
                                           if (a.positional.empty()) {
                                               return err("no items for cycling given");
                                           }
                                           const auto k =
                                               static_cast<size_t>(i) % a.positional.size();
                                           return a.positional[k];
                                       });
            }
            return Value::undefined("'LoopContext object' has no attribute '" + std::string(name) +
                                    "'");
        }
        default:
            break;
    }
    if (has_method(object, name)) {
        std::string method(name);
        return Value::callable(
            method,
            "<built-in method " + method + " of " + std::string(type_name(object)) + " object>",
            [object, method](Renderer& r, CallArgs& a) {
                return call_method(r, object, method, a);
            });
    }
    return Value::undefined(object_description(object) + " has no attribute '" + std::string(name) +
                            "'");
}

Result<Value> Renderer::get_item(const Value& object, const Value& key) {
    if (object.is_undefined()) return err(object.undefined_hint());
    if (object.is_string()) STRATA_TRY(charge(scan_cost(object)));  // indexes code points
    if (object.is_dict()) {
        if (const Value* v = object.dict_data().find(key)) return *v;
    } else if ((object.is_list() || object.is_string()) && key.is_integral()) {
        if (auto v = index_sequence(object, key.as_int())) return *v;
        return Value::undefined(object_description(object) + " has no element " +
                                std::to_string(key.as_int()));
    }
    // obj['name'] falls back to the attribute, as Jinja2's getitem does.
    if (key.is_string()) return get_attribute(object, key.str());
    auto shown = to_repr(key);
    return Value::undefined(object_description(object) + " has no element " +
                            (shown ? *shown : std::string("?")));
}

Result<Value> Renderer::apply_filter(std::string_view name, Value input, CallArgs& args) {
    FilterFn f = find_filter(name);
    if (!f) return err("no filter named '", name, "'");
    if (input.is_string() || !constant_time_on_containers(name)) {
        STRATA_TRY(charge(scan_cost(input)));
    }
    return f(*this, input, args);
}

Result<bool> Renderer::apply_test(std::string_view name, const Value& value, CallArgs& args) {
    TestFn t = find_test(name);
    if (!t) return err("no test named '", name, "'");
    return t(*this, value, args);
}

// ---- expressions ----

Result<CallArgs> Renderer::eval_arguments(const Arguments& a) {
    CallArgs args;
    args.positional.reserve(a.positional.size());
    for (const auto& e : a.positional) {
        STRATA_ASSIGN(Value v, eval(*e));
        args.positional.push_back(std::move(v));
    }
    for (const auto& [key, e] : a.keyword) {
        STRATA_ASSIGN(Value v, eval(*e));
        args.keyword.emplace_back(key, std::move(v));
    }
    return args;
}

Result<Value> Renderer::eval(const Expr& e) {
    EvalDepth depth(eval_depth_);
    if (eval_depth_ > options_.limits.max_eval_depth) {
        return at(e.offset,
                  err("the template nests deeper than ",
                      std::to_string(options_.limits.max_eval_depth), " levels while rendering"));
    }
    if (auto c = charge(1); !c) return at(e.offset, c.take_error());
    switch (e.kind) {
        case ExprKind::Literal:
            return static_cast<const LiteralExpr&>(e).value;
        case ExprKind::Name:
            return lookup(static_cast<const NameExpr&>(e).name);
        case ExprKind::ListLit:
            return eval_list(static_cast<const ListExpr&>(e));
        case ExprKind::DictLit:
            return eval_dict(static_cast<const DictExpr&>(e));
        case ExprKind::Unary:
            return eval_unary(static_cast<const UnaryExpr&>(e));
        case ExprKind::Binary:
            return eval_binary(static_cast<const BinaryExpr&>(e));
        case ExprKind::Compare:
            return eval_compare(static_cast<const CompareExpr&>(e));
        case ExprKind::Attribute: {
            const auto& a = static_cast<const AttributeExpr&>(e);
            STRATA_ASSIGN(Value object, eval(*a.object));
            auto v = get_attribute(object, a.name);
            if (!v) return at(e.offset, v.take_error());
            return v;
        }
        case ExprKind::Subscript: {
            const auto& s = static_cast<const SubscriptExpr&>(e);
            STRATA_ASSIGN(Value object, eval(*s.object));
            STRATA_ASSIGN(Value key, eval(*s.index));
            auto v = get_item(object, key);
            if (!v) return at(e.offset, v.take_error());
            return v;
        }
        case ExprKind::Slice:
            return eval_slice(static_cast<const SliceExpr&>(e));
        case ExprKind::Call:
            return eval_call(static_cast<const CallExpr&>(e));
        case ExprKind::Filter:
            return eval_filter(static_cast<const FilterExpr&>(e), nullptr);
        case ExprKind::Test:
            return eval_test(static_cast<const TestExpr&>(e));
        case ExprKind::Conditional: {
            const auto& c = static_cast<const ConditionalExpr&>(e);
            STRATA_ASSIGN(Value cond, eval(*c.condition));
            if (truthy(cond)) return eval(*c.then_value);
            if (c.else_value) return eval(*c.else_value);
            return Value::undefined("the conditional expression had no else branch");
        }
    }
    return Value::undefined();
}

Result<Value> Renderer::eval_list(const ListExpr& e) {
    std::vector<Value> items;
    items.reserve(e.items.size());
    for (const auto& item : e.items) {
        STRATA_ASSIGN(Value v, eval(*item));
        items.push_back(std::move(v));
    }
    auto v = Value::list(std::move(items), e.is_tuple);
    if (!v) return at(e.offset, v.take_error());
    return v;
}

Result<Value> Renderer::eval_dict(const DictExpr& e) {
    DictData d;
    for (const auto& [ke, ve] : e.items) {
        STRATA_ASSIGN(Value k, eval(*ke));
        STRATA_ASSIGN(Value v, eval(*ve));
        if (k.is_list() && !k.is_tuple()) return at(ke->offset, err("unhashable type: 'list'"));
        if (k.is_dict()) return at(ke->offset, err("unhashable type: 'dict'"));
        d.set(std::move(k), std::move(v));
    }
    auto v = Value::dict(std::move(d));
    if (!v) return at(e.offset, v.take_error());
    return v;
}

Result<Value> Renderer::eval_unary(const UnaryExpr& e) {
    STRATA_ASSIGN(Value v, eval(*e.operand));
    if (e.op == UnaryOp::Not) return Value::boolean(!truthy(v));
    auto r = unary_op(e.op, v);
    if (!r) return at(e.offset, r.take_error());
    return r;
}

Result<Value> Renderer::eval_binary(const BinaryExpr& e) {
    STRATA_ASSIGN(Value lhs, eval(*e.lhs));
    // and/or short-circuit and return an operand, as in Python.
    if (e.op == BinaryOp::And) return truthy(lhs) ? eval(*e.rhs) : Result<Value>(lhs);
    if (e.op == BinaryOp::Or) return truthy(lhs) ? Result<Value>(lhs) : eval(*e.rhs);
    STRATA_ASSIGN(Value rhs, eval(*e.rhs));
    auto r = binary_op(*this, e.op, lhs, rhs);
    if (!r) return at(e.offset, r.take_error());
    return r;
}

Result<Value> Renderer::eval_compare(const CompareExpr& e) {
    STRATA_ASSIGN(Value lhs, eval(*e.first));
    for (const auto& [op, rhs_expr] : e.rest) {
        STRATA_ASSIGN(Value rhs, eval(*rhs_expr));
        if (auto c = charge(scan_cost(lhs) + scan_cost(rhs)); !c) {
            return at(rhs_expr->offset, c.take_error());
        }
        auto r = compare_op(op, lhs, rhs);
        if (!r) return at(rhs_expr->offset, r.take_error());
        if (!*r) return Value::boolean(false);
        lhs = std::move(rhs);
    }
    return Value::boolean(true);
}

Result<Value> Renderer::eval_slice(const SliceExpr& e) {
    STRATA_ASSIGN(Value object, eval(*e.object));
    if (auto c = charge(scan_cost(object)); !c) return at(e.offset, c.take_error());
    Value bounds[3] = {Value::none(), Value::none(), Value::none()};
    const Expr* parts[3] = {e.start.get(), e.stop.get(), e.step.get()};
    for (int i = 0; i < 3; ++i) {
        if (parts[i]) {
            STRATA_ASSIGN(bounds[i], eval(*parts[i]));
        }
    }
    auto r = slice(*this, object, bounds[0], bounds[1], bounds[2]);
    if (!r) return at(e.offset, r.take_error());
    return r;
}

Result<Value> Renderer::eval_call(const CallExpr& e) {
    if (e.callee->kind == ExprKind::Attribute) {
        // obj.method(args) calls the method directly rather than building a bound method.
        const auto& a = static_cast<const AttributeExpr&>(*e.callee);
        STRATA_ASSIGN(Value object, eval(*a.object));
        if (has_method(object, a.name)) {
            STRATA_ASSIGN(CallArgs args, eval_arguments(e.args));
            // String methods scan the string; list methods other than append may scan the list.
            if (object.is_string() || (object.is_list() && a.name != "append")) {
                if (auto c = charge(scan_cost(object)); !c) return at(e.offset, c.take_error());
            }
            auto r = call_method(*this, object, a.name, args);
            if (!r) return at(e.offset, r.take_error());
            return r;
        }
        auto callee = get_attribute(object, a.name);
        if (!callee) return at(a.offset, callee.take_error());
        STRATA_ASSIGN(CallArgs args, eval_arguments(e.args));
        auto r = call(*callee, args);
        if (!r) return at(e.offset, r.take_error());
        return r;
    }
    STRATA_ASSIGN(Value callee, eval(*e.callee));
    STRATA_ASSIGN(CallArgs args, eval_arguments(e.args));
    auto r = call(callee, args);
    if (!r) return at(e.offset, r.take_error());
    return r;
}

Result<Value> Renderer::eval_filter(const FilterExpr& e, const Value* block_input) {
    Value input;
    if (!e.operand) {
        input = *block_input;
    } else if (e.operand->kind == ExprKind::Filter && block_input) {
        STRATA_ASSIGN(input, eval_filter(static_cast<const FilterExpr&>(*e.operand), block_input));
    } else {
        STRATA_ASSIGN(input, eval(*e.operand));
    }
    STRATA_ASSIGN(CallArgs args, eval_arguments(e.args));
    auto r = apply_filter(e.name, std::move(input), args);
    if (!r) return at(e.offset, r.take_error());
    return r;
}

Result<Value> Renderer::eval_test(const TestExpr& e) {
    STRATA_ASSIGN(Value v, eval(*e.operand));
    STRATA_ASSIGN(CallArgs args, eval_arguments(e.args));
    auto r = apply_test(e.name, v, args);
    if (!r) return at(e.offset, r.take_error());
    return Value::boolean(*r != e.negated);
}

// ---- Template ----

Result<Template> Template::parse(std::string_view source, std::string name) {
    STRATA_ASSIGN(auto program, parse_program(source, std::move(name)));
    return Template(std::move(program));
}

Result<std::string> Template::render(const nlohmann::ordered_json& context,
                                     const RenderOptions& options) const {
    Renderer renderer(*program_, options);
    return renderer.render(context);
}

const std::string& Template::name() const {
    return program_->name;
}

}  // namespace strata::jinja
