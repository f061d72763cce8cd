// A callable borrowed for the length of one call: what std::function would copy (and, for a
// lambda with a few captures, allocate for) on every queue command an operation enqueues.
// Converts implicitly, as std::function does: it is a parameter type.
#pragma once

#include <cstddef>
#include <type_traits>

namespace trn::comm {

template <typename Signature>
class FunctionRef;

template <typename F, typename Self, typename R, typename... Args>
concept BorrowableAs =
    !std::is_same_v<std::decay_t<F>, Self> && std::is_invocable_r_v<R, F &, Args...>;

template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
 public:
  FunctionRef(std::nullptr_t) {}  // no callable

  template <BorrowableAs<FunctionRef, R, Args...> F>
  FunctionRef(F &&f) : object_(&f), call_(&invoke<std::remove_reference_t<F>>) {}

  R operator()(Args... args) const { return call_(object_, static_cast<Args>(args)...); }
  explicit operator bool() const { return call_ != nullptr; }

 private:
  template <typename Callable>
  static R invoke(const void *object, Args... args) {
    return (*static_cast<Callable *>(const_cast<void *>(object)))(static_cast<Args>(args)...);
  }

  const void *object_ = nullptr;
  R (*call_)(const void *, Args...) = nullptr;
};

}  // namespace trn::comm
