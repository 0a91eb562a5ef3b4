// nccl-tests import on real published outputs (tests/unit/core/data/README.md says where each comes from): the mesh
// from the rank list or given, the collective from the header or the file name, both result halves, N/A, rows of
// 0 bytes, interleaved NCCL INFO lines, rows with wrong results left out and reported, and bad text named by line;
// the JSON nccl-tests writes with -J, which must give what its text gives.
#include "core/cost/nccl_tests_import.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace lins {
namespace {

std::string data(const std::string& name) { return std::string(LINS_TEST_DATA_DIR) + "/" + name; }

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(NcclTestsImport, AllReduceOnTwoH100Nodes) {
  BandwidthProfile prof;
  auto r = load_nccl_tests(data("all_reduce_perf_h100_8x2.txt"), std::nullopt, &prof);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->op, CollKind::all_reduce);  // from the file name: this version prints no "Collective test starting"
  EXPECT_EQ(r->mesh, (Mesh{8, 2}));        // 8 ranks on ztan-mig-235z, 8 on ztan-mig-gq73
  EXPECT_TRUE(r->mesh_from_header);
  EXPECT_EQ(r->rows_used, 31);  // 8 B .. 8 GiB
  EXPECT_EQ(r->halves_used, 62);
  EXPECT_EQ(r->halves_unchecked, 0);  // validation: 1, every #wrong is 0
  EXPECT_TRUE(r->rejected.empty());
  // 8 GiB: out-of-place 47535 us, in-place 47743 us; mean 47639 us -> 8589934592 / 47639e-6 / 1e9 = 180.31 GB/s,
  // between the two printed algbw (180.71, 179.92). The bus bandwidth is 2 x 15/16 of it = 338.1 GB/s.
  const double alg = *prof.algbw_gbps(CollKind::all_reduce, Mesh{8, 2}, 8589934592.0);
  EXPECT_NEAR(alg, 8589934592.0 / 47639e-6 / 1e9, 1e-9);
  EXPECT_NEAR(alg * bus_factor(CollKind::all_reduce, 16), 338.1, 0.05);
  // 8 B: (135.8 + 123.5) / 2 = 129.65 us.
  EXPECT_NEAR(*prof.time_s(CollKind::all_reduce, Mesh{8, 2}, 8), 129.65e-6, 1e-12);
}

TEST(NcclTestsImport, OlderFormatsWithErrorColumnsAndInterleavedLogs) {
  struct Case {
    const char* file;
    CollKind op;
    double big_time_us;  // mean of the two halves at 8 GiB
  } cases[] = {{"all_gather_perf_a100_8x1.log", CollKind::all_gather, (33646 + 32669) / 2.0},
               {"reduce_scatter_perf_a100_8x1.log", CollKind::reduce_scatter, (32464 + 32502) / 2.0},
               {"broadcast_perf_a100_8x1.log", CollKind::broadcast, (36896 + 36599) / 2.0}};
  for (const auto& c : cases) {
    BandwidthProfile prof;
    auto r = load_nccl_tests(data(c.file), std::nullopt, &prof);
    ASSERT_TRUE(r) << c.file << ": " << r.error();
    EXPECT_EQ(r->op, c.op) << c.file;
    EXPECT_EQ(r->mesh, (Mesh{8, 1})) << c.file;                // eight ranks on "localhost"
    EXPECT_GE(r->zero_size_rows, 2) << c.file;                 // "0 0 float" rows are skipped
    EXPECT_EQ(r->halves_unchecked, r->halves_used) << c.file;  // validation: 0 -> N/A everywhere
    EXPECT_NEAR(*prof.time_s(c.op, Mesh{8, 1}, 8589934592.0), c.big_time_us * 1e-6, 1e-12) << c.file;
  }
}

TEST(NcclTestsImport, AnExplicitMeshIsCheckedAgainstTheRankList) {
  const std::string text = read(data("all_reduce_perf_h100_8x2.txt"));
  auto ok = import_nccl_tests(text, "all_reduce_perf.txt", Mesh{4, 4}, std::nullopt, nullptr);  // 16 ranks either way
  ASSERT_TRUE(ok) << ok.error();
  EXPECT_EQ(ok->mesh, (Mesh{4, 4}));
  EXPECT_FALSE(ok->mesh_from_header);
  auto bad = import_nccl_tests(text, "all_reduce_perf.txt", Mesh{8, 4}, std::nullopt, nullptr);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("has 32 ranks but the header lists 16"), std::string::npos) << bad.error();
}

TEST(NcclTestsImport, RowsWithWrongResultsAreLeftOutAndReported) {
  // The H100 run with two results marked wrong (this edit is the test's; the published run had none): the 1 MiB
  // out-of-place half and both halves of 2 MiB.
  std::string text = read(data("all_reduce_perf_h100_8x2.txt"));
  auto edit = [&](const std::string& from, const std::string& to) {
    const auto p = text.find(from);
    ASSERT_NE(p, std::string::npos) << from;
    text.replace(p, from.size(), to);
  };
  edit("203.2    5.16    9.68      0", "203.2    5.16    9.68      7");
  edit("254.0    8.26   15.48      0    252.9    8.29   15.55      0",
       "254.0    8.26   15.48  1.04858e+06    252.9    8.29   15.55  1.04858e+06");
  BandwidthProfile prof;
  auto r = import_nccl_tests(text, "all_reduce_perf.txt", std::nullopt, std::nullopt, &prof);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->rows_used, 30);
  EXPECT_EQ(r->halves_used, 59);
  ASSERT_EQ(r->rejected.size(), 3u);
  EXPECT_NE(r->rejected[0].find("all_reduce_perf.txt:41: 1048576 B out-of-place: #wrong = 7"), std::string::npos)
      << r->rejected[0];
  EXPECT_NE(r->rejected[2].find("2097152 B in-place: #wrong = 1.04858e+06 (nccl-tests found wrong results), left out"),
            std::string::npos)
      << r->rejected[2];
  // 1 MiB keeps its in-place half only (207.2 us); 2 MiB is gone, so it interpolates between 1 and 4 MiB.
  EXPECT_NEAR(*prof.time_s(CollKind::all_reduce, Mesh{8, 2}, 1048576), 207.2e-6, 1e-12);
}

TEST(NcclTestsImport, AFailedRunPricesNothing) {
  BandwidthProfile prof;
  auto r = load_nccl_tests(data("all_gather_perf_v100_failed.txt"), Mesh{8, 1}, &prof);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("every row failed nccl-tests' check"), std::string::npos) << r.error();
  EXPECT_EQ(prof.point_count(), 0u);
  // Its single row, marked good instead, would import: the oldest format (no '#', no rank list) needs the mesh.
  std::string text = read(data("all_gather_perf_v100_failed.txt"));
  for (std::size_t p; (p = text.find("1e+00")) != std::string::npos;) text.replace(p, 5, "0e+00");
  auto ok = import_nccl_tests(text, "all_gather_perf_v100.txt", Mesh{8, 1}, std::nullopt, &prof);
  ASSERT_TRUE(ok) << ok.error();
  EXPECT_EQ(ok->op, CollKind::all_gather);
  EXPECT_NEAR(*prof.time_s(CollKind::all_gather, Mesh{8, 1}, 4294967296.0), (29122 + 29169) / 2.0 * 1e-6, 1e-12);
  auto no_mesh = import_nccl_tests(text, "all_gather_perf_v100.txt", std::nullopt, std::nullopt, nullptr);
  ASSERT_FALSE(no_mesh);
  EXPECT_NE(no_mesh.error().find("give the mesh as all_gather_perf_v100.txt@GPUS_PER_NODExNODES"), std::string::npos)
      << no_mesh.error();
}

TEST(NcclTestsImport, NamesWhatIsWrong) {
  const std::string h100 = read(data("all_reduce_perf_h100_8x2.txt"));
  auto expect_error = [](const std::string& text, const std::string& where, const std::string& what,
                         std::optional<Mesh> mesh = std::nullopt) {
    auto r = import_nccl_tests(text, where, mesh, std::nullopt, nullptr);
    ASSERT_FALSE(r) << "accepted " << where;
    EXPECT_NE(r.error().find(what), std::string::npos) << r.error();
  };
  expect_error("", "all_reduce_perf.txt", "no nccl-tests result table");
  expect_error("hello\n", "all_reduce_perf.txt", "no nccl-tests result table");
  // A truncated row (line 30 of the file is the 512 B row).
  std::string cut = h100;
  const std::string row512 = "126.6    0.00    0.01      0    123.4    0.00    0.01      0";
  cut.replace(cut.find(row512), row512.size(), "126.6");
  expect_error(cut, "all_reduce_perf.txt", "all_reduce_perf.txt:30: has 6 fields, expected 13");
  std::string garbage = h100;
  garbage.replace(garbage.find("           8             2"), 0, "Warning: Permanently added host\n");
  expect_error(garbage, "all_reduce_perf.txt", "all_reduce_perf.txt:24: 'Warning: Permanently added host' is not");
  std::string bad_time = h100;
  bad_time.replace(bad_time.find("135.8"), 5, "-1.00");
  expect_error(bad_time, "all_reduce_perf.txt", ":24: out-of-place time '-1.00' is not a positive number");
  std::string bad_wrong = h100;
  bad_wrong.replace(bad_wrong.find("135.8    0.00    0.00      0"), 28, "135.8    0.00    0.00    abc");
  expect_error(bad_wrong, "all_reduce_perf.txt", "#wrong 'abc' is neither a count of wrong elements nor N/A");
  // The collective must be known.
  expect_error(h100, "results.txt", "cannot tell which collective");
  std::string sendrecv = "# Collective test starting: sendrecv_perf\n" + h100;
  expect_error(sendrecv, "x.txt", "measures sendrecv_perf, which lins has no collective for; valid: all_gather_perf");
  // alltoall_perf is one of them: its table reads as all_to_all.
  auto alltoall = import_nccl_tests("# Collective test starting: alltoall_perf\n" + h100, "x.txt", std::nullopt,
                                    std::nullopt, nullptr);
  ASSERT_TRUE(alltoall) << alltoall.error();
  EXPECT_EQ(alltoall->op, CollKind::all_to_all);
  // Uneven hosts and a single rank.
  std::string uneven = h100;
  uneven.replace(uneven.find("on ztan-mig-gq73 device  7"), 16, "on ztan-mig-235z");
  expect_error(uneven, "all_reduce_perf.txt", "host ztan-mig-gq73 runs 7 ranks but ztan-mig-235z runs 9");
  expect_error(h100, "all_reduce_perf.txt", "has 1 ranks but the header lists 16", Mesh{1, 1});
  std::string no_ranks = read(data("all_gather_perf_v100_failed.txt"));
  no_ranks.replace(no_ranks.find("1e+00"), 5, "0e+00");
  expect_error(no_ranks, "all_gather_perf.txt", "a single rank", Mesh{1, 1});
}

TEST(NcclTestsImport, TheJsonOfDashJGivesWhatTheTextGives) {
  // The H100 run as nccl-tests writes it with -J (data/README.md): the same rows, ranks and hosts as the text.
  BandwidthProfile from_text, from_json;
  auto t = load_nccl_tests(data("all_reduce_perf_h100_8x2.txt"), std::nullopt, &from_text);
  auto j = load_nccl_tests(data("all_reduce_perf_h100_8x2.json"), std::nullopt, &from_json);
  ASSERT_TRUE(t) << t.error();
  ASSERT_TRUE(j) << j.error();
  EXPECT_EQ(j->op, CollKind::all_reduce);  // from args[0], /opt/src/nccl-tests/build/all_reduce_perf
  EXPECT_EQ(j->mesh, (Mesh{8, 2}));        // 16 processes of one GPU: 8 on each host
  EXPECT_TRUE(j->mesh_from_header);
  EXPECT_EQ(j->rows_used, t->rows_used);
  EXPECT_EQ(j->halves_used, t->halves_used);
  EXPECT_EQ(j->halves_unchecked, 0);
  EXPECT_EQ(from_json.point_count(), from_text.point_count());
  for (double bytes = 8; bytes <= 8589934592.0; bytes *= 2)
    EXPECT_DOUBLE_EQ(*from_json.time_s(CollKind::all_reduce, Mesh{8, 2}, bytes),
                     *from_text.time_s(CollKind::all_reduce, Mesh{8, 2}, bytes))
        << bytes;
}

TEST(NcclTestsImport, JsonVariantsAndWhatIsWrongInThem) {
  const nlohmann::json run = nlohmann::json::parse(read(data("all_reduce_perf_h100_8x2.json")));
  auto import = [](const nlohmann::json& doc, std::optional<Mesh> mesh = std::nullopt,
                   BandwidthProfile* into = nullptr) {
    return import_nccl_tests(doc.dump(), "run.json", mesh, std::nullopt, into);
  };
  auto expect_error = [&](const nlohmann::json& doc, const std::string& what, std::optional<Mesh> mesh = std::nullopt) {
    auto r = import(doc, mesh);
    ASSERT_FALSE(r) << "accepted";
    EXPECT_NE(r.error().find(what), std::string::npos) << r.error();
  };
  // Results marked wrong are left out and reported; nwrong null (validation off) counts as unchecked; cpu_time (-C 1)
  // is read like time; a half that did not run (null) is skipped.
  nlohmann::json edited = run;
  edited["results"][17]["out_of_place"]["nwrong"] = 7.0;  // 1 MiB
  edited["results"][18]["out_of_place"]["nwrong"] = nullptr;
  edited["results"][19]["in_place"] = nullptr;
  auto& big = edited["results"][30]["in_place"];
  big["cpu_time"] = big["time"];
  big.erase("time");
  BandwidthProfile prof;
  auto r = import(edited, std::nullopt, &prof);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->halves_used, 60);
  EXPECT_EQ(r->halves_unchecked, 1);
  ASSERT_EQ(r->rejected.size(), 1u);
  EXPECT_EQ(r->rejected[0],
            "run.json: results[17]: 1048576 B out-of-place: nwrong = 7.0 (nccl-tests found wrong "
            "results), left out");
  EXPECT_NEAR(*prof.time_s(CollKind::all_reduce, Mesh{8, 2}, 1048576), 207.2e-6, 1e-12);
  EXPECT_NEAR(*prof.time_s(CollKind::all_reduce, Mesh{8, 2}, 8589934592.0), 47639e-6, 1e-12);
  // Two processes of 8 GPUs each (-g 8): one devices entry per process.
  nlohmann::json per_process = run;
  per_process["config"]["ngpus"] = 8;
  per_process["config"]["devices"] = {run["config"]["devices"][0], run["config"]["devices"][8]};
  auto two = import(per_process);
  ASSERT_TRUE(two) << two.error();
  EXPECT_EQ(two->mesh, (Mesh{8, 2}));

  // Not JSON, or a run cut short (nccl-tests closes the file at its end).
  const std::string text = run.dump();
  auto cut = import_nccl_tests(text.substr(0, text.size() / 2), "run.json", std::nullopt, std::nullopt, nullptr);
  ASSERT_FALSE(cut);
  EXPECT_NE(cut.error().find("run.json:1:"), std::string::npos) << cut.error();
  EXPECT_NE(cut.error().find("not valid JSON"), std::string::npos) << cut.error();
  EXPECT_NE(cut.error().find("ends before the JSON does"), std::string::npos) << cut.error();
  auto two_lines = import_nccl_tests("{\n  \"results\": [1,]\n}", "run.json", std::nullopt, std::nullopt, nullptr);
  ASSERT_FALSE(two_lines);
  EXPECT_NE(two_lines.error().find("run.json:2:"), std::string::npos) << two_lines.error();
  // Values of the wrong kind, named by their place in the document.
  expect_error(nlohmann::json::object({{"version", 3}}), "run.json: JSON without a 'results' list");
  nlohmann::json bad = run;
  bad["results"][0]["out_of_place"]["time"] = "nan";  // what nccl-tests writes for a NaN time
  expect_error(bad, "run.json: results[0].out_of_place.time: \"nan\" is not a positive number of microseconds");
  bad = run;
  bad["results"][2]["size"] = -8;
  expect_error(bad, "run.json: results[2] has no 'size', a whole number of bytes");
  bad = run;
  bad["results"][0]["in_place"]["nwrong"] = "none";
  expect_error(bad, "results[0].in_place.nwrong: \"none\" is neither a count of wrong elements nor null");
  bad = run;
  bad["args"][0] = "./build/sendrecv_perf";
  expect_error(bad, "measures sendrecv_perf, which lins has no collective for");
  bad = run;
  bad["config"].erase("devices");
  expect_error(bad, "no config.devices list to tell GPUs per node and nodes");
  EXPECT_TRUE(import(bad, Mesh{8, 2}));
  expect_error(run, "has 32 ranks but the header lists 16", Mesh{8, 4});
  for (auto& half : bad["results"]) half["out_of_place"]["nwrong"] = half["in_place"]["nwrong"] = 1.0;
  expect_error(bad, "every row failed nccl-tests' check (nwrong above 0)", Mesh{8, 2});
}

TEST(NcclTestsImport, ArgumentsNameFileAndMesh) {
  auto a = parse_nccl_tests_arg("runs/all_gather_perf.txt@8x16");
  ASSERT_TRUE(a) << a.error();
  EXPECT_EQ(a->path, "runs/all_gather_perf.txt");
  EXPECT_EQ(*a->mesh, (Mesh{8, 16}));
  a = parse_nccl_tests_arg("ag.txt");
  ASSERT_TRUE(a);
  EXPECT_FALSE(a->mesh);
  auto bad = parse_nccl_tests_arg("ag.txt@eightxtwo");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("is not a mesh; valid: GPUS_PER_NODExNODES"), std::string::npos) << bad.error();
  EXPECT_FALSE(parse_nccl_tests_arg("@8x2"));
  EXPECT_EQ(nccl_tests_op_from_name("/x/nccl_reducescatter.log"), CollKind::reduce_scatter);
  EXPECT_EQ(nccl_tests_op_from_name("broadcast_perf"), CollKind::broadcast);
  EXPECT_EQ(nccl_tests_op_from_name("alltoall_perf"), CollKind::all_to_all);
  EXPECT_FALSE(nccl_tests_op_from_name("sendrecv_perf"));
}

TEST(NcclTestsImport, ProfilesFromSeveralFilesPriceTheirMeshes) {
  // What --nccl-tests does with a list: every file's series in one profile, the network model for the rest.
  BandwidthProfile all;
  for (const char* f :
       {"all_gather_perf_a100_8x1.log", "reduce_scatter_perf_a100_8x1.log", "all_reduce_perf_h100_8x2.txt"}) {
    BandwidthProfile one;
    ASSERT_TRUE(load_nccl_tests(data(f), std::nullopt, &one));
    all.merge(one);
  }
  EXPECT_TRUE(all.has(CollKind::all_gather, Mesh{8, 1}));
  EXPECT_TRUE(all.has(CollKind::reduce_scatter, Mesh{8, 1}));
  EXPECT_TRUE(all.has(CollKind::all_reduce, Mesh{8, 2}));
  EXPECT_FALSE(all.has(CollKind::all_reduce, Mesh{8, 1}));
  const auto cost = CostModel::make(resolve_network_spec("paper-a800").value(), NetworkModel::nccl, all).value();
  CommOp op;
  op.kind = CollKind::all_gather;
  op.mesh = Mesh{8, 1};
  op.elems = 1 << 30;  // 2 GiB of bf16, a measured size
  bool fell_back = true;
  EXPECT_NEAR(cost.op_time_s(op, Topology{8, 2}, Pricing::paper_isolated, &fell_back), (8658.8 + 8389.4) / 2 * 1e-6,
              1e-12);
  EXPECT_FALSE(fell_back);
  op.kind = CollKind::broadcast;
  cost.op_time_s(op, Topology{8, 2}, Pricing::paper_isolated, &fell_back);
  EXPECT_TRUE(fell_back);
}

}  // namespace
}  // namespace lins
