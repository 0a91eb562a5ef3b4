// CSV writing: quoting, the .partial file until finish(), resume with its keys, and the damaged-file errors.
#include "core/util/csv.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/util/text.h"

namespace lins {
namespace {

namespace fs = std::filesystem;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class CsvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("lins_csv_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST(CsvEscape, QuotesOnlyWhenNeeded) {
  EXPECT_EQ(csv_escape("plain"), "plain");
  EXPECT_EQ(csv_escape("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_escape("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_escape("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(csv_join({"p=4x1,g=4x1,os=8x1", "", "x"}), "\"p=4x1,g=4x1,os=8x1\",,x");
}

TEST(CsvParse, RoundTripsQuotedFields) {
  const std::vector<std::string> fields = {"p=4x1,g=4x1", "say \"hi\"", "two\nlines", "", "last"};
  auto recs = parse_csv(csv_join(fields) + "\r\nnext,row\n", "mem");
  ASSERT_TRUE(recs) << recs.error();
  ASSERT_EQ(recs->size(), 2u);
  EXPECT_EQ((*recs)[0].fields, fields);
  EXPECT_EQ((*recs)[1].line, 3);
  EXPECT_EQ((*recs)[1].fields, (std::vector<std::string>{"next", "row"}));
}

TEST(CsvParse, RejectsBrokenQuotes) {
  auto open_quote = parse_csv("a,b\n\"never closed,c\n", "f.csv");
  ASSERT_FALSE(open_quote);
  EXPECT_NE(open_quote.error().find("f.csv:2"), std::string::npos) << open_quote.error();
  EXPECT_NE(open_quote.error().find("never closed"), std::string::npos);
  auto stray = parse_csv("a,b\"c\n", "f.csv");
  ASSERT_FALSE(stray);
  EXPECT_NE(stray.error().find("quote inside an unquoted field"), std::string::npos) << stray.error();
}

TEST_F(CsvTest, WritesPartialUntilFinished) {
  auto w = CsvWriter::open(path("out.csv"), {"name", "value"});
  ASSERT_TRUE(w) << w.error();
  ASSERT_TRUE(w->write_row({"a,1", "2"}));
  EXPECT_TRUE(fs::exists(path("out.csv.partial")));
  EXPECT_FALSE(fs::exists(path("out.csv")));
  // Each row is flushed as soon as it is written.
  EXPECT_EQ(slurp(path("out.csv.partial")), "name,value\n\"a,1\",2\n");
  ASSERT_TRUE(w->finish());
  EXPECT_FALSE(fs::exists(path("out.csv.partial")));
  EXPECT_EQ(slurp(path("out.csv")), "name,value\n\"a,1\",2\n");
  EXPECT_FALSE(w->write_row({"b", "3"}));
  EXPECT_FALSE(w->finish());
}

TEST_F(CsvTest, RejectsBadRowsAndColumns) {
  EXPECT_FALSE(CsvWriter::open(path("x.csv"), {}));
  auto dup = CsvWriter::open(path("x.csv"), {"a", "a"});
  ASSERT_FALSE(dup);
  EXPECT_NE(dup.error().find("appears twice"), std::string::npos);
  auto w = CsvWriter::open(path("x.csv"), {"a", "b"});
  ASSERT_TRUE(w);
  auto s = w->write_row({"only one"});
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().find("expected 2"), std::string::npos) << s.error();
  auto missing_dir = CsvWriter::open(path("no/such/dir/x.csv"), {"a"});
  ASSERT_FALSE(missing_dir);
  EXPECT_NE(missing_dir.error().find("does not exist"), std::string::npos) << missing_dir.error();
}

TEST_F(CsvTest, ResumesAPartialFileAndReportsItsKeys) {
  {
    auto w = CsvWriter::open(path("sweep.csv"), {"strategy", "gpus", "time_s"});
    ASSERT_TRUE(w);
    ASSERT_TRUE(w->write_row({"zero3", "8", "1.5"}));
    ASSERT_TRUE(w->write_row({"mics", "8", "1.2"}));
    // Destroyed without finish(): a killed run.
  }
  EXPECT_FALSE(fs::exists(path("sweep.csv")));
  // A kill in the middle of a row leaves a cut-off last line; resume drops it.
  { std::ofstream(path("sweep.csv.partial"), std::ios::app) << "lins,8,0."; }
  auto w = CsvWriter::open(path("sweep.csv"), {"strategy", "gpus", "time_s"}, /*resume=*/true);
  ASSERT_TRUE(w) << w.error();
  EXPECT_EQ(w->resumed_row_count(), 2u);
  auto keys = w->existing_keys({"strategy", "gpus"});
  ASSERT_TRUE(keys) << keys.error();
  EXPECT_EQ(keys->size(), 2u);
  EXPECT_TRUE(keys->count(csv_key({"zero3", "8"})));
  EXPECT_TRUE(w->has_row({"strategy", "gpus"}, {"mics", "8"}));
  EXPECT_FALSE(w->has_row({"strategy", "gpus"}, {"lins", "8"}));
  EXPECT_FALSE(w->existing_keys({"nope"}));
  ASSERT_TRUE(w->write_row({"lins", "8", "0.9"}));
  EXPECT_TRUE(w->has_row({"strategy", "gpus"}, {"lins", "8"}));
  ASSERT_TRUE(w->finish());
  EXPECT_EQ(slurp(path("sweep.csv")), "strategy,gpus,time_s\nzero3,8,1.5\nmics,8,1.2\nlins,8,0.9\n");
}

TEST_F(CsvTest, ResumesAFinishedFile) {
  {
    auto w = CsvWriter::open(path("done.csv"), {"a", "b"});
    ASSERT_TRUE(w->write_row({"1", "2"}));
    ASSERT_TRUE(w->finish());
  }
  auto w = CsvWriter::open(path("done.csv"), {"a", "b"}, true);
  ASSERT_TRUE(w) << w.error();
  EXPECT_EQ(w->resumed_row_count(), 1u);
  // While more rows come the file is unfinished again.
  EXPECT_FALSE(fs::exists(path("done.csv")));
  ASSERT_TRUE(w->write_row({"3", "4"}));
  ASSERT_TRUE(w->finish());
  EXPECT_EQ(slurp(path("done.csv")), "a,b\n1,2\n3,4\n");
}

TEST_F(CsvTest, ResumeRefusesAnotherHeaderOrADamagedRow) {
  { std::ofstream(path("h.csv.partial")) << "x,y\n1,2\n"; }
  auto w = CsvWriter::open(path("h.csv"), {"a", "b"}, true);
  ASSERT_FALSE(w);
  EXPECT_NE(w.error().find("differs from the expected"), std::string::npos) << w.error();
  { std::ofstream(path("r.csv.partial")) << "a,b\n1,2\n1,2,3\n"; }
  auto r = CsvWriter::open(path("r.csv"), {"a", "b"}, true);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("r.csv.partial:3"), std::string::npos) << r.error();
  // Without resume an old partial is simply replaced.
  auto fresh = CsvWriter::open(path("h.csv"), {"a", "b"});
  ASSERT_TRUE(fresh) << fresh.error();
  EXPECT_EQ(fresh->resumed_row_count(), 0u);
  EXPECT_EQ(slurp(path("h.csv.partial")), "a,b\n");
}

TEST_F(CsvTest, ResumeWithNothingThereStartsFresh) {
  auto w = CsvWriter::open(path("new.csv"), {"a"}, true);
  ASSERT_TRUE(w) << w.error();
  EXPECT_EQ(w->row_count(), 0u);
  EXPECT_EQ(slurp(path("new.csv.partial")), "a\n");
}

// The table reader every header-based reader uses: columns by name, widths and numbers checked with file:line.
TEST(CsvTable, NamesFileLineAndColumnInEveryError) {
  auto t = CsvTable::parse("a,b,c\n1,2.5,x\n4,5\n\n7,nan,9\n", "t.csv", "a test table");
  ASSERT_TRUE(t.ok()) << t.error();
  EXPECT_EQ(t->rows(), 3u);
  EXPECT_EQ(t->column("b"), 1);
  EXPECT_EQ(t->column("z"), -1);
  EXPECT_TRUE(t->require({"a", "c"}).ok());
  const Status missing = t->require({"a", "z"});
  EXPECT_EQ(missing.error(), "t.csv:1: no column 'z' (expected a test table)");
  EXPECT_EQ(*t->number(0, "b"), 2.5);
  EXPECT_EQ(t->number(0, "c").error(), "t.csv:2: column 'c': 'x' is not a finite number");
  EXPECT_EQ(t->check_width(1).error(), "t.csv:3: 2 fields, the header has 3");
  EXPECT_EQ(t->text(1, "c"), "");  // a short row reads as empty, not out of bounds
  EXPECT_EQ(t->at(2), "t.csv:5");  // the empty line is skipped, the line numbers stay the file's
  EXPECT_FALSE(t->number(2, "b").ok());
  EXPECT_EQ(CsvTable::parse("", "e.csv", "a test table").error(), "e.csv: empty (expected a test table)");
}

TEST(CsvTable, SkipsCommentsOnlyWhenAskedTrimsFieldsAndRefusesBinaryLines) {
  const std::string text = "# provenance {\"a\": 1}\nx, y\n 1 ,2\n";
  auto with = CsvTable::parse(text, "p.csv", "a profile", /*comments=*/true);
  ASSERT_TRUE(with.ok()) << with.error();
  EXPECT_EQ(with->rows(), 1u);
  EXPECT_EQ(with->column("y"), 1);  // " y" read as "y"
  EXPECT_EQ(with->text(0, "x"), "1");
  EXPECT_EQ(with->at(0), "p.csv:3");
  EXPECT_EQ(with->require({"z"}).error(), "p.csv:2: no column 'z' (expected a profile)");
  auto without = CsvTable::parse(text, "p.csv", "a profile");  // the comment is read as CSV then
  ASSERT_FALSE(without.ok());
  EXPECT_EQ(without.error().rfind("p.csv:1: a quote inside an unquoted field", 0), 0u) << without.error();
  EXPECT_EQ(CsvTable::parse("a,b\n1,\x01\x02\n", "b.csv", "a table").error(),
            "b.csv:2: unreadable (control characters); expected a table");
}

TEST(Split, TheOneSplitterKeepsOrDropsEmptyFields) {
  EXPECT_EQ(split("4x", 'x'), (std::vector<std::string>{"4", ""}));
  EXPECT_EQ(split(" a , b ,,", ','), (std::vector<std::string>{"a", "b", "", ""}));
  EXPECT_EQ(split(" a , b ,,", ',', false), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(split("", ','), (std::vector<std::string>{""}));
  EXPECT_TRUE(split("", ',', false).empty());
}

TEST(ParseWhole, TheWholeTextIsDecimalDigits) {
  EXPECT_EQ(*parse_whole("0"), 0u);
  EXPECT_EQ(*parse_whole("18446744073709551615"), 18446744073709551615ull);
  for (const char* bad : {"", "-1", "+2", "1.0", "1e3", " 7", "7 ", "18446744073709551616", "0x10"})
    EXPECT_FALSE(parse_whole(bad)) << bad;
}

TEST(ParseFinite, TheWholeTextIsOneFiniteNumber) {
  EXPECT_EQ(*parse_finite("1048576"), 1048576.0);
  EXPECT_EQ(*parse_finite("-2.5e3"), -2500.0);
  for (const char* bad : {"", "nan", "inf", "-inf", "12abc", "1 ", "0x", "1e999"})
    EXPECT_FALSE(parse_finite(bad)) << bad;
}

}  // namespace
}  // namespace lins
