// JSON writer: escaping, nesting, numbers, and the atomic file write.
#include "core/json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace lins {
namespace {

TEST(Json, EscapesStrings) {
  EXPECT_EQ(json_quote("plain"), "\"plain\"");
  EXPECT_EQ(json_quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(json_quote("line\nnext\ttab"), "\"line\\nnext\\ttab\"");
  EXPECT_EQ(json_quote(std::string("\x01", 1)), "\"\\u0001\"");
  EXPECT_EQ(json_quote("h\xc3\xa9"), "\"h\xc3\xa9\"");  // UTF-8 passes through
}

TEST(Json, Numbers) {
  EXPECT_EQ(json_number(0.5), "0.5");
  EXPECT_EQ(json_number(1e-3), "0.001");
  EXPECT_EQ(json_number(NAN), "null");
  EXPECT_EQ(json_number(INFINITY), "null");
  EXPECT_EQ(JsonValue(int64_t{6738415616}).dump(), "6738415616");
}

TEST(Json, NestedObjectsAndArraysCompact) {
  JsonObject o;
  o.set("argv", std::vector<std::string>{"lins", "plan", "--model=\"x\""});
  o.set("world", 8).set("ok", true).set("none", nullptr);
  JsonObject inner;
  inner.set("algbw_gbps", std::vector<double>{1.5, 2.0});
  o.set("env", inner);
  JsonArray list;
  list.push(JsonObject().set("k", "v")).push(3);
  o.set("list", list);
  o.set("world", 16);  // replaced in place
  EXPECT_EQ(o.dump(0),
            "{\"argv\":[\"lins\",\"plan\",\"--model=\\\"x\\\"\"],\"world\":16,\"ok\":true,\"none\":null,"
            "\"env\":{\"algbw_gbps\":[1.5,2]},\"list\":[{\"k\":\"v\"},3]}");
}

TEST(Json, PrettyPrints) {
  JsonObject o;
  o.set("a", 1).set("b", JsonObject().set("c", std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(o.dump(2), "{\n  \"a\": 1,\n  \"b\": {\n    \"c\": [\"x\", \"y\"]\n  }\n}");
  EXPECT_EQ(JsonObject().dump(), "{}");
  EXPECT_EQ(JsonValue(JsonArray()).dump(), "[]");
}

TEST(Json, WriteFileAtomicReplacesWholeFile) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "lins_json_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / "prov.json").string();
  ASSERT_TRUE(write_file_atomic(path, "first"));
  ASSERT_TRUE(write_file_atomic(path, "{\"second\": 2}\n"));
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), "{\"second\": 2}\n");
  // No temporary file is left behind.
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
  auto bad = write_file_atomic((dir / "missing" / "x.json").string(), "x");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("does not exist"), std::string::npos) << bad.error();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace lins
