// TextTable: widths from the content, alignment, least widths, number formats, gaps, notes, and a table printed as its
// rows come.
#include "core/output/text_table.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace lins {
namespace {

using Align = TextTable::Align;

std::string printed(const TextTable& t) {
  std::ostringstream out;
  t.print(out);
  return out.str();
}

TEST(TextTableTest, WidthsComeFromTheWidestCell) {
  TextTable t({{.header = "rank", .align = Align::right}, {.header = "plan"}, {.header = "why"}});
  t.row().add("1").add("zero3").add("chosen");
  t.row().add("12").add("ddp").add("comm vs best: more");
  EXPECT_EQ(printed(t),
            "rank plan  why\n"
            "   1 zero3 chosen\n"
            "  12 ddp   comm vs best: more\n");
}

TEST(TextTableTest, TheHeaderWidensItsColumn) {
  TextTable t({{.header = "a long header"}, {.header = "n", .align = Align::right}});
  t.row().add("x").add("123");
  EXPECT_EQ(printed(t),
            "a long header   n\n"
            "x             123\n");
}

// A left-aligned cell that ends its line is not padded; a right-aligned one is.
TEST(TextTableTest, NoTrailingSpacesAfterALeftAlignedLastCell) {
  TextTable left({{.header = "k"}, {.header = "value"}});
  left.row().add("a").add("x");
  EXPECT_EQ(printed(left), "k value\na x\n");
  TextTable right({{.header = "k"}, {.header = "value", .align = Align::right}});
  right.row().add("a").add("x");
  EXPECT_EQ(printed(right), "k value\na     x\n");
}

// An empty last cell still gets its gap, as a printf of "%s  %s" would give it.
TEST(TextTableTest, AnEmptyLastCellKeepsItsGap) {
  TextTable t({{.header = "k"}, {.header = "why", .gap = "  "}});
  t.row().add("a").add("");
  EXPECT_EQ(printed(t), "k  why\na  \n");
}

TEST(TextTableTest, NumbersTakeTheirColumnsFormat) {
  TextTable t({{.header = "s", .align = Align::right, .format = "%.3f"},
               {.header = "mfu", .align = Align::right, .format = "%.1f%%"},
               {.header = "g", .align = Align::right}});
  t.row().add(1.23456).add(59.61).add(0.5);
  EXPECT_EQ(printed(t),
            "    s   mfu   g\n"
            "1.235 59.6% 0.5\n");
}

TEST(TextTableTest, GapsIndentAndLeastWidths) {
  TextTable t({{.header = "phase", .width = 8},
               {.header = "ops", .align = Align::right, .width = 5},
               {.header = "choice", .gap = "  "}},
              "  ");
  t.row().add("forward").add("12").add("ring");
  EXPECT_EQ(printed(t),
            "  phase      ops  choice\n"
            "  forward     12  ring\n");
}

TEST(TextTableTest, NotesFollowTheLastCell) {
  TextTable t({{.header = "strategy"}, {.header = "MFU", .align = Align::right, .width = 6}});
  t.header_note("  (paced)");
  t.row().add("ddp").add("78.4%");
  t.row().add("zero3").add("9.5%").note("  (measured bytes differ from the schedule)");
  EXPECT_EQ(printed(t),
            "strategy    MFU  (paced)\n"
            "ddp       78.4%\n"
            "zero3      9.5%  (measured bytes differ from the schedule)\n");
  // A left-aligned last cell is padded when a note follows it, so that the notes line up.
  TextTable u({{.header = "k"}, {.header = "name"}});
  u.row().add("a").add("x").note(" oom");
  EXPECT_EQ(printed(u), "k name\na x    oom\n");
}

// The columns' least widths equal to printf's field widths give printf's line, wherever no cell is wider.
TEST(TextTableTest, MatchesPrintfAtItsWidths) {
  TextTable t({{.header = "model", .width = 10},
               {.header = "gpus", .align = Align::right, .width = 6},
               {.header = "step_s", .align = Align::right, .width = 10, .format = "%.3f"},
               {.header = "mfu", .align = Align::right, .width = 7, .format = "%.1f%%"}});
  t.row().add("llama-7b").add(std::to_string(64)).add(16.562).add(58.2).note(" oom");
  char expected[256];
  std::snprintf(expected, sizeof expected, "%-10s %6s %10s %7s\n%-10s %6d %10.3f %6.1f%%%s\n", "model", "gpus",
                "step_s", "mfu", "llama-7b", 64, 16.562, 58.2, " oom");
  EXPECT_EQ(printed(t), expected);
}

// Printed as its rows come: the least widths, which a wider cell overflows as printf's widths do.
TEST(TextTableTest, StreamedRowsUseTheLeastWidths) {
  TextTable t({{.header = "model", .width = 6}, {.header = "n", .align = Align::right, .width = 3}});
  std::ostringstream out;
  t.print_header(out);
  t.row().add("tiny").add("1");
  t.print_row(out, t.row_count() - 1);
  t.row().add("llama-13b").add("1024");
  t.print_row(out, t.row_count() - 1);
  EXPECT_EQ(out.str(),
            "model    n\n"
            "tiny     1\n"
            "llama-13b 1024\n");
}

TEST(TextTableTest, RejectsCellsOutsideARowOrItsColumns) {
  TextTable t({{.header = "a"}});
  EXPECT_THROW(t.add("x"), std::logic_error);
  EXPECT_THROW(t.note("x"), std::logic_error);
  t.row().add("x");
  EXPECT_THROW(t.add("y"), std::logic_error);
  EXPECT_THROW(t.add(1.0), std::logic_error);
  EXPECT_THROW(t.print_row(std::cout, 1), std::out_of_range);
}

}  // namespace
}  // namespace lins
