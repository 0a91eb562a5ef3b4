// JSON as lins prints it (nlohmann-json through json_dump): escaping, member order, numbers, and the atomic file
// write.
#include "core/util/json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace lins {
namespace {

TEST(Json, EscapesStrings) {
  EXPECT_EQ(json_dump(Json("plain")), "\"plain\"");
  EXPECT_EQ(json_dump(Json("a\"b\\c")), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(json_dump(Json("line\nnext\ttab")), "\"line\\nnext\\ttab\"");
  EXPECT_EQ(json_dump(Json(std::string("\x01", 1))), "\"\\u0001\"");
  EXPECT_EQ(json_dump(Json("h\xc3\xa9")), "\"h\xc3\xa9\"");  // UTF-8 passes through
  // Bytes that are not UTF-8 (a host name, an environment value) print as U+FFFD instead of throwing.
  EXPECT_EQ(json_dump(Json("a\xff" "b")), "\"a\xef\xbf\xbd" "b\"");
}

TEST(Json, Numbers) {
  EXPECT_EQ(json_dump(Json(0.5)), "0.5");
  EXPECT_EQ(json_dump(Json(1e-3)), "0.001");
  EXPECT_EQ(json_dump(Json(NAN)), "null");
  EXPECT_EQ(json_dump(Json(INFINITY)), "null");
  EXPECT_EQ(json_dump(Json(int64_t{6738415616})), "6738415616");
  EXPECT_EQ(json_dump(Json(uint64_t{18446744073709551615u})), "18446744073709551615");
  // Doubles read back as the same double.
  const double third = 1.0 / 3.0;
  EXPECT_EQ(Json::parse(json_dump(Json(third))).get<double>(), third);
}

TEST(Json, KeepsTheOrderMembersWereSetCompact) {
  Json o = Json::object();
  o["argv"] = std::vector<std::string>{"lins", "plan", "--model=\"x\""};
  o["world"] = 8;
  o["ok"] = true;
  o["none"] = nullptr;
  o["env"] = {{"algbw_gbps", std::vector<double>{1.5, 2.0}}};
  o["list"] = Json::array({{{"k", "v"}}, 3});
  o["world"] = 16;  // replaced in place
  EXPECT_EQ(json_dump(o, 0),
            "{\"argv\":[\"lins\",\"plan\",\"--model=\\\"x\\\"\"],\"world\":16,\"ok\":true,\"none\":null,"
            "\"env\":{\"algbw_gbps\":[1.5,2.0]},\"list\":[{\"k\":\"v\"},3]}");
}

TEST(Json, PrettyPrints) {
  const Json o = {{"a", 1}, {"b", {{"c", std::vector<std::string>{"x", "y"}}}}};
  EXPECT_EQ(json_dump(o, 2), "{\n  \"a\": 1,\n  \"b\": {\n    \"c\": [\n      \"x\",\n      \"y\"\n    ]\n  }\n}");
  EXPECT_EQ(json_dump(Json::object()), "{}");
  EXPECT_EQ(json_dump(Json::array()), "[]");
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
