// Error handling for library code: functions return Result<T> or Status; only main() turns an error into a
// message and an exit code. An error is one clear sentence naming the problem and what would be valid.
#pragma once

#include <string>
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
