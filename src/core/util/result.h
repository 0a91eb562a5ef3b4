// Error handling for library code: functions return Result<T> or Status; only main() turns an error into a
// message and an exit code. An error is one clear sentence naming the problem and what would be valid.
#pragma once

#include <string>
#include <type_traits>
#include <utility>
#include <variant>

namespace lins {

struct Error {
  std::string message;
};

inline Error make_error(std::string message) { return Error{std::move(message)}; }

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT(google-explicit-constructor): returned by value
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  const T& value() const& { return std::get<0>(v_); }
  T& value() & { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }
  const std::string& error() const { return std::get<1>(v_).message; }

 private:
  std::variant<T, Error> v_;
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error.message)), failed_(true) {}  // NOLINT(google-explicit-constructor)
  static Status ok_status() { return Status(); }
  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const std::string& error() const { return error_; }

 private:
  std::string error_;
  bool failed_ = false;
};

}  // namespace lins

// Returns the error of a Status or Result expression from the enclosing function (which returns a Status or any
// Result<T>), else goes on: LINS_TRY(check_plan(p));
#define LINS_TRY(expr)                                                                     \
  do {                                                                                     \
    if (auto lins_try_ = (expr); !lins_try_) return ::lins::make_error(lins_try_.error()); \
  } while (0)

// Evaluates a Result expression once; on an error returns it from the enclosing function as LINS_TRY does, else moves
// its value into lhs, a new variable or one that exists:
//   LINS_ASSIGN_OR_RETURN(auto text, read_text_file(path));
//   LINS_ASSIGN_OR_RETURN(o.steps, a.get_positive_int("steps"));
// It expands to more than one statement and declares lhs in the enclosing block, so it cannot be the whole body of an
// if or a loop (write the braces). lhs must not hold a comma; the expression may.
#define LINS_ASSIGN_OR_RETURN(lhs, ...) \
  LINS_ASSIGN_OR_RETURN_IMPL_(LINS_RESULT_CONCAT_(lins_assign_or_return_, __COUNTER__), lhs, __VA_ARGS__)
#define LINS_ASSIGN_OR_RETURN_IMPL_(result, lhs, ...)                                  \
  auto result = (__VA_ARGS__);                                                         \
  static_assert(!std::is_same_v<decltype(result), ::lins::Status>,                     \
                "LINS_ASSIGN_OR_RETURN takes a Result<T>; use LINS_TRY for a Status"); \
  if (!result) return ::lins::make_error(result.error());                              \
  lhs = std::move(result).value()
#define LINS_RESULT_CONCAT_(a, b) LINS_RESULT_CONCAT_INNER_(a, b)
#define LINS_RESULT_CONCAT_INNER_(a, b) a##b
