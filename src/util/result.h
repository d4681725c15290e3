// Errors are values: functions that can fail on user input return Result<T>.
// An Error carries a message a user can act on; asserts are for programmer mistakes only.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace strata {

struct Error {
    std::string message;
};

// Make an Error from string pieces: err("model.gguf: ", "tensor ", name, " is truncated").
template <typename... Parts>
Error err(Parts&&... parts) {
    std::string s;
    (s.append(std::forward<Parts>(parts)), ...);
    return Error{std::move(s)};
}

template <typename T>
class [[nodiscard]] Result {
  public:
    Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
    Result(Error e) : v_(std::move(e)) {}      // NOLINT: implicit by design

    bool ok() const { return v_.index() == 0; }
    explicit operator bool() const { return ok(); }

    T& value() & {
        assert(ok());
        return std::get<0>(v_);
    }
    const T& value() const& {
        assert(ok());
        return std::get<0>(v_);
    }
    T&& value() && {
        assert(ok());
        return std::get<0>(std::move(v_));
    }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }

    const Error& error() const {
        assert(!ok());
        return std::get<1>(v_);
    }
    Error&& take_error() {
        assert(!ok());
        return std::get<1>(std::move(v_));
    }

  private:
    std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
  public:
    Result() = default;
    Result(Error e) : err_(std::move(e)), failed_(true) {}  // NOLINT: implicit by design

    bool ok() const { return !failed_; }
    explicit operator bool() const { return ok(); }
    const Error& error() const {
        assert(failed_);
        return err_;
    }
    Error&& take_error() {
        assert(failed_);
        return std::move(err_);
    }

  private:
    Error err_;
    bool failed_ = false;
};

}  // namespace strata

// Propagate a failed Result out of the enclosing function (which returns a Result).
#define STRATA_CONCAT_INNER(a, b) a##b
#define STRATA_CONCAT(a, b) STRATA_CONCAT_INNER(a, b)
#define STRATA_TRY(expr)                                            \
    do {                                                            \
        auto&& strata_try_r_ = (expr);                              \
        if (!strata_try_r_.ok()) return strata_try_r_.take_error(); \
    } while (0)
// Evaluate a Result<T>, return its error or bind its value: STRATA_ASSIGN(auto x, f());
#define STRATA_ASSIGN(decl, expr) STRATA_ASSIGN_IMPL(STRATA_CONCAT(strata_r_, __LINE__), decl, expr)
#define STRATA_ASSIGN_IMPL(tmp, decl, expr) \
    auto tmp = (expr);                      \
    if (!tmp.ok()) return tmp.take_error(); \
    decl = std::move(tmp).value()
