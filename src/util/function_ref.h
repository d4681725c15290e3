// A non-owning reference to a callable: what a function that calls its argument before it
// returns should take instead of std::function, which may allocate to hold a lambda with more
// than a couple of captures. The decode loop makes hundreds of parallel calls a token and must
// not allocate (CUDA-graph capture of a step and steady latency both need that).
//
// Never store one beyond the call it was passed to: it points at the caller's callable.
#pragma once

#include <type_traits>
#include <utility>

namespace strata {

template <typename Signature>
class FunctionRef;

template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
  public:
    template <typename F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, FunctionRef> &&
             std::is_invocable_r_v<R, F&, Args...>) FunctionRef(F&& f)
    noexcept  // NOLINT: implicit, like std::function
        : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
          call_([](void* o, Args... args) -> R {
              return (*static_cast<std::remove_reference_t<F>*>(o))(std::forward<Args>(args)...);
          }) {}

    R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

  private:
    void* object_;
    R (*call_)(void*, Args...);
};

}  // namespace strata
