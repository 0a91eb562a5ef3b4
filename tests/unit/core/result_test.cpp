// Result and Status, and the macros that forward an error from the enclosing function: LINS_TRY and
// LINS_ASSIGN_OR_RETURN.
#include "core/util/result.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace lins {
namespace {

Result<int> number(int v) { return v; }
Result<int> failure(const std::string& message) { return make_error(message); }

// Counts the calls, so that a test can see the expression evaluated once.
struct Counted {
  int calls = 0;
  Result<int> next(bool ok) {
    ++calls;
    if (!ok) return make_error("call " + std::to_string(calls) + " failed");
    return calls;
  }
};

TEST(ResultTest, HoldsAValueOrAnError) {
  Result<int> ok = number(3);
  ASSERT_TRUE(ok);
  EXPECT_EQ(*ok, 3);
  Result<int> bad = failure("no");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), "no");
  Status fine;
  EXPECT_TRUE(fine.ok());
  Status failed = make_error("broken");
  EXPECT_FALSE(failed.ok());
  EXPECT_EQ(failed.error(), "broken");
}

Status try_both(const Status& first, const Result<int>& second, int* reached) {
  LINS_TRY(first);
  *reached = 1;
  LINS_TRY(second);
  *reached = 2;
  return Status::ok_status();
}

TEST(ResultTest, TryForwardsTheFirstError) {
  int reached = 0;
  EXPECT_TRUE(try_both(Status(), number(1), &reached).ok());
  EXPECT_EQ(reached, 2);
  reached = 0;
  Status s = try_both(make_error("first"), number(1), &reached);
  EXPECT_EQ(s.error(), "first");
  EXPECT_EQ(reached, 0);
  s = try_both(Status(), failure("second"), &reached);
  EXPECT_EQ(s.error(), "second");
  EXPECT_EQ(reached, 1);
}

// A new variable: the value on success, the same message in another Result type on an error.
Result<std::string> doubled(Result<int> in) {
  LINS_ASSIGN_OR_RETURN(auto v, std::move(in));
  return std::to_string(2 * v);
}

TEST(ResultTest, AssignOrReturnDeclaresAVariable) {
  auto ok = doubled(number(21));
  ASSERT_TRUE(ok);
  EXPECT_EQ(*ok, "42");
  auto bad = doubled(failure("--steps must be a positive integer, got 'x'"));
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), "--steps must be a positive integer, got 'x'");
}

// An existing variable (a member of a struct) in a function that returns a Status; what follows an error is not run.
struct Options {
  int steps = -1;
  int seed = -1;
};
Status read_options(Options& o, Result<int> steps, Result<int> seed, bool* finished) {
  LINS_ASSIGN_OR_RETURN(o.steps, std::move(steps));
  LINS_ASSIGN_OR_RETURN(o.seed, std::move(seed));
  *finished = true;
  return Status::ok_status();
}

TEST(ResultTest, AssignOrReturnAssignsAnExistingVariable) {
  Options o;
  bool finished = false;
  ASSERT_TRUE(read_options(o, number(5), number(7), &finished).ok());
  EXPECT_EQ(o.steps, 5);
  EXPECT_EQ(o.seed, 7);
  EXPECT_TRUE(finished);

  Options p;
  finished = false;
  Status s = read_options(p, number(5), failure("--seed: bad"), &finished);
  EXPECT_EQ(s.error(), "--seed: bad");
  EXPECT_EQ(p.steps, 5);
  EXPECT_EQ(p.seed, -1);
  EXPECT_FALSE(finished);
}

// The expression runs once, whether it succeeds or fails.
Result<int> twice(Counted& c, bool first_ok, bool second_ok) {
  LINS_ASSIGN_OR_RETURN(int a, c.next(first_ok));
  LINS_ASSIGN_OR_RETURN(int b, c.next(second_ok));
  return a * 10 + b;
}

TEST(ResultTest, AssignOrReturnEvaluatesTheExpressionOnce) {
  Counted c;
  auto ok = twice(c, true, true);
  ASSERT_TRUE(ok);
  EXPECT_EQ(*ok, 12);
  EXPECT_EQ(c.calls, 2);

  Counted d;
  auto bad = twice(d, false, true);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), "call 1 failed");
  EXPECT_EQ(d.calls, 1);

  Counted e;
  bad = twice(e, true, false);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), "call 2 failed");
  EXPECT_EQ(e.calls, 2);
}

// Two on one line get temporaries of their own.
// clang-format off
Result<int> sum_on_one_line(int x, int y) {
  LINS_ASSIGN_OR_RETURN(int a, number(x)); LINS_ASSIGN_OR_RETURN(int b, number(y));
  return a + b;
}
// clang-format on

TEST(ResultTest, AssignOrReturnTwiceOnOneLine) {
  auto s = sum_on_one_line(2, 3);
  ASSERT_TRUE(s);
  EXPECT_EQ(*s, 5);
}

// A value that can only move, and an expression with a comma outside parentheses (a template's arguments).
template <class A, class B>
Result<std::pair<A, B>> make_pair_result(A a, B b) {
  return std::pair<A, B>(std::move(a), std::move(b));
}
Result<int> move_only(bool ok) {
  Result<std::unique_ptr<int>> made =
      ok ? Result<std::unique_ptr<int>>(std::make_unique<int>(9)) : Result<std::unique_ptr<int>>(make_error("none"));
  LINS_ASSIGN_OR_RETURN(std::unique_ptr<int> p, std::move(made));
  LINS_ASSIGN_OR_RETURN(auto pair, make_pair_result<int, std::string>(*p, "nine"));
  return pair.first + int(pair.second.size());
}

TEST(ResultTest, AssignOrReturnMovesTheValue) {
  auto ok = move_only(true);
  ASSERT_TRUE(ok);
  EXPECT_EQ(*ok, 13);
  auto bad = move_only(false);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), "none");
}

// Inside a lambda that returns a Status, and in a loop body with braces.
TEST(ResultTest, AssignOrReturnInALambdaAndALoop) {
  std::vector<int> seen;
  auto read_all = [&](const std::vector<Result<int>>& in) -> Status {
    for (const auto& r : in) {
      LINS_ASSIGN_OR_RETURN(int v, r);
      seen.push_back(v);
    }
    return Status::ok_status();
  };
  EXPECT_TRUE(read_all({number(1), number(2)}).ok());
  EXPECT_EQ(seen, (std::vector<int>{1, 2}));
  seen.clear();
  Status s = read_all({number(1), failure("the second"), number(3)});
  EXPECT_EQ(s.error(), "the second");
  EXPECT_EQ(seen, (std::vector<int>{1}));
}

}  // namespace
}  // namespace lins
