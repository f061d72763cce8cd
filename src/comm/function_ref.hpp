// A callable borrowed for the length of one call: what std::function would copy (and, for a
// lambda with a few captures, allocate for) on every queue command an operation enqueues.
#pragma once

#include <cstddef>
#include <type_traits>

namespace trn::comm {

template <typename Signature>
class FunctionRef;

template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
 public:
  FunctionRef(std::nullptr_t) {}  // NOLINT(google-explicit-constructor): "no callable"
  template <typename F>
  requires(!std::is_same_v<std::decay_t<F>, FunctionRef> && std::is_invocable_r_v<R, F &, Args...>)
      FunctionRef(
          F &&f)  // NOLINT(google-explicit-constructor): a parameter type, like std::function
      : object_(static_cast<const void *>(&f)), call_([](const void *object, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F> *>(const_cast<void *>(object)))(
              static_cast<Args>(args)...);
        }) {}
  R operator()(Args... args) const { return call_(object_, static_cast<Args>(args)...); }
  explicit operator bool() const { return call_ != nullptr; }

 private:
  const void *object_ = nullptr;
  R (*call_)(const void *, Args...) = nullptr;
};

}  // namespace trn::comm
