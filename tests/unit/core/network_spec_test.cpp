// Network files (TOML): a good one, every kind of bad value with file:line and field, the former format refused, the
// presets shipped in data/networks/ (compiled in, and equal to the files), the alpha-beta terms they give, their GPU
// (a preset or its numbers, and a gpu_arch that disagrees with it), and degradation with scale.
#include "core/cost/network_spec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/cost/cost_model.h"

namespace lins {
namespace {

const char* kGood =
    "# a test cluster\n"
    "name = \"test-net\"   # trailing comment\n"
    "description = \"two NICs\"\n"
    "gpus_per_node = 4\n"
    "gpu_arch = \"sm80\"\n"
    "nvlink_links = 4\n"
    "nvlink_gbps = 25\n"
    "nvswitch = true\n"
    "pcie_gen = 4\n"
    "nics_per_node = 2\n"
    "nic_gbit_per_s = 100\n"
    "intra_latency_us = 1.5\n"
    "inter_latency_us = 4\n"
    "bw_factor_per_node_doubling = 0.9\n"
    "latency_factor_per_node_doubling = 1.2\n";

void expect_error(const std::string& text, const std::string& where, const std::string& what) {
  auto s = parse_network_spec(text, "n.toml");
  ASSERT_FALSE(s) << "accepted:\n" << text;
  EXPECT_NE(s.error().find(where), std::string::npos) << s.error();
  EXPECT_NE(s.error().find(what), std::string::npos) << s.error();
}

TEST(NetworkSpec, ParsesAGoodFileAndDerivesTheAlphaBetaTerms) {
  auto s = parse_network_spec(kGood, "n.toml");
  ASSERT_TRUE(s) << s.error();
  EXPECT_EQ(s->name, "test-net");
  EXPECT_EQ(s->description, "two NICs");
  EXPECT_EQ(s->gpus_per_node, 4);
  EXPECT_EQ(s->compute_capability, 80);
  EXPECT_TRUE(s->nvswitch);
  EXPECT_EQ(s->nic_path, NicPath::pxb);  // the default
  // 4 links x 25 GB/s; 2 NICs x 100 Gb/s / 8 = 25 GB/s per node; one GPU drives one NIC, 12.5 GB/s.
  EXPECT_DOUBLE_EQ(s->intra_gpu_gbps, 100.0);
  EXPECT_DOUBLE_EQ(s->inter_node_gbps, 25.0);
  EXPECT_DOUBLE_EQ(s->inter_gpu_gbps, 12.5);
  EXPECT_DOUBLE_EQ(s->intra_latency_s, 1.5e-6);
  EXPECT_DOUBLE_EQ(s->pcie_gbps(), 24.0);
  // 8 nodes = 3 doublings: 0.9^3 = 0.729, 1.2^3 = 1.728.
  EXPECT_NEAR(s->bw_scale(8), 0.729, 1e-12);
  EXPECT_NEAR(s->latency_scale(8), 1.728, 1e-12);
  EXPECT_DOUBLE_EQ(s->bw_scale(1), 1.0);
  // Other TOML spellings of the same values: a literal string, a float rate, an inline comment after a flag.
  auto alt = parse_network_spec(std::string(kGood) + "nic_path = 'phb'\nsharp = false # none\nintra_gpu_gbps = 1e2\n",
                                "n.toml");
  ASSERT_TRUE(alt) << alt.error();
  EXPECT_EQ(alt->nic_path, NicPath::phb);
  EXPECT_DOUBLE_EQ(alt->intra_gpu_gbps, 100.0);
}

TEST(NetworkSpec, RejectsEachKindOfBadValueNamingFileLineAndField) {
  const std::string g = kGood;
  const std::string x = "name = \"x\"\n";
  // TOML itself: a key given twice, a line that is no key = value, a unit after a number, control characters.
  expect_error(g + "nvlink_gbps = 30\n", "n.toml:16:", "cannot redefine existing integer 'nvlink_gbps'");
  expect_error(g + "just words\n", "n.toml:16:", "not valid TOML");
  expect_error(x + "nvlink_gbps = 25 GB/s\n", "n.toml:2:18: not valid TOML",
               "; nvlink_gbps takes a positive rate in GB/s up to 1000");
  expect_error(x + "\x01\x02\n", "n.toml:2:", "not valid TOML");
  expect_error(x + "description = \"two\nlines\"\n", "n.toml:2:", "not valid TOML");
  // Keys and values.
  expect_error(g + "nic_speed = 100\n", "n.toml:16", "unknown key 'nic_speed'; valid keys: name,");
  expect_error(g + "[nics]\ncount = 2\n", "n.toml:16",
               "unknown table [nics] (the one table a network file may have is [contention])");
  expect_error(x + "gpu_arch = \"sm75\"\n", "n.toml:2",
               "gpu_arch: \"sm75\" is not valid; valid: \"sm70\", \"sm80\", \"sm90\" or \"none\"");
  expect_error(x + "nvlink_links = -1\n", "n.toml:2", "nvlink_links: -1 is not valid; valid: a whole number");
  expect_error(x + "nvlink_links = 2.5\n", "n.toml:2", "nvlink_links: 2.5 is a fractional number; valid: a whole");
  expect_error(x + "nic_gbit_per_s = 0\n", "n.toml:2", "nic_gbit_per_s: 0 is not valid; valid: a positive");
  expect_error(x + "nic_gbit_per_s = nan\n", "n.toml:2", "nic_gbit_per_s: nan is not valid");
  expect_error(x + "nic_gbit_per_s = inf\n", "n.toml:2", "nic_gbit_per_s: inf is not valid");
  expect_error(x + "nic_gbit_per_s = \"100\"\n", "n.toml:2", "nic_gbit_per_s: \"100\" is text; valid: a positive");
  expect_error(x + "nic_gbit_per_s = [100]\n", "n.toml:2", "nic_gbit_per_s: an array is not a single value");
  expect_error(x + "nvswitch = \"yes\"\n", "n.toml:2", "nvswitch: \"yes\" is text; valid: true or false");
  expect_error(x + "nvswitch = 1\n", "n.toml:2", "nvswitch: 1 is a whole number; valid: true or false");
  expect_error(x + "pcie_gen = 6\n", "n.toml:2", "pcie_gen");
  expect_error(x + "bw_factor_per_node_doubling = 1.5\n", "n.toml:2", "valid: a factor in (0, 1]");
  expect_error(x + "latency_factor_per_node_doubling = 0.5\n", "n.toml:2", "valid: a factor from 1");
  expect_error("name = \"bad name\"\n", "n.toml:1", "name: \"bad name\" is not valid");
  expect_error(x + "nic_path = \"nvlink\"\n", "n.toml:2", "valid: \"pix\", \"pxb\", \"phb\" or \"sys\"");
  expect_error(x + "description = \"two\\nlines\"\n", "n.toml:2",
               "description: \"two\nlines\" is not valid; valid: any");
  // What a file must say.
  expect_error("gpu_arch = \"sm80\"\n", "n.toml: missing 'name'", "name");
  expect_error(x, "n.toml: missing 'gpu_arch'", "none");
  expect_error(x + "gpu_arch = \"sm80\"\n", "missing 'nvlink_links'", "PCIe");
  expect_error(x + "gpu_arch = \"sm80\"\nnvlink_links = 8\n", "missing 'nvlink_gbps'", "per direction");
  expect_error(x + "gpu_arch = \"sm80\"\nnvlink_links = 0\npcie_gen = 4\nnics_per_node = 1\nnic_gbit_per_s = 100\n"
                   "intra_latency_us = 1\ninter_latency_us = 1\n",
               "missing 'intra_gpu_gbps'", "nvlink_links = 0");
  expect_error(g + "inter_gpu_gbps = 30\n", "n.toml:16", "inter_gpu_gbps: one GPU cannot drive more");
  // The first wrong key in the order of the file is the one reported, whatever the order of the names.
  expect_error(x + "pcie_gen = 9\ngpu_arch = \"sm1\"\n", "n.toml:2", "pcie_gen");
}

TEST(NetworkSpec, TheGpuIsAPresetOrItsNumbers) {
  // A preset: its datasheet numbers, each from the preset.
  auto h = parse_network_spec(std::string(kGood) + "gpu = \"a100-sxm\"\n", "n.toml");
  ASSERT_TRUE(h) << h.error();
  EXPECT_TRUE(h->gpu.described());
  EXPECT_EQ(h->gpu.preset, "a100-sxm");
  EXPECT_DOUBLE_EQ(h->gpu.peak_tflops, 312.0);
  EXPECT_DOUBLE_EQ(h->gpu.hbm_gbps, 2039.0);
  EXPECT_DOUBLE_EQ(h->gpu.mem_gib, 80.0);
  EXPECT_EQ(h->gpu.compute_capability, 80);
  EXPECT_EQ(h->gpu.peak_from, "gpu preset a100-sxm");
  EXPECT_TRUE(h->warnings.empty());
  // The file's own number replaces the preset's, whatever the order of the keys (a 40GB A100 written before it).
  auto forty = parse_network_spec("gpu_mem_gib = 40\n" + std::string(kGood) + "gpu = \"a100-sxm\"\n", "n.toml");
  ASSERT_TRUE(forty) << forty.error();
  EXPECT_DOUBLE_EQ(forty->gpu.mem_gib, 40.0);
  EXPECT_EQ(forty->gpu.mem_from, "gpu_mem_gib");
  EXPECT_DOUBLE_EQ(forty->gpu.peak_tflops, 312.0);
  EXPECT_EQ(forty->gpu.peak_from, "gpu preset a100-sxm");
  // The three numbers alone.
  auto own =
      parse_network_spec(std::string(kGood) + "peak_tflops = 500\nhbm_gbps = 2500.5\ngpu_mem_gib = 96\n", "n.toml");
  ASSERT_TRUE(own) << own.error();
  EXPECT_EQ(own->gpu.preset, "");
  EXPECT_DOUBLE_EQ(own->gpu.peak_tflops, 500.0);
  EXPECT_DOUBLE_EQ(own->gpu.hbm_gbps, 2500.5);
  EXPECT_DOUBLE_EQ(own->gpu.mem_gib, 96.0);
  EXPECT_EQ(own->gpu.compute_capability, 0);
  EXPECT_EQ(own->gpu.hbm_from, "hbm_gbps");
  // Neither: the network names no GPU (the commands assume one and say so).
  EXPECT_FALSE(parse_network_spec(kGood, "n.toml")->gpu.described());
}

TEST(NetworkSpec, AWrongGpuNamesTheKeyAndWhatIsValid) {
  const std::string g = kGood;
  // An unknown preset lists the valid ones.
  expect_error(g + "gpu = \"h100\"\n", "n.toml:16: gpu: \"h100\" is not valid",
               "valid: a GPU preset: \"a800-sxm\", \"a100-sxm\", \"h100-sxm\", \"h200\", \"b200\" (or give "
               "peak_tflops, hbm_gbps and gpu_mem_gib)");
  expect_error(g + "gpu = 100\n", "n.toml:16: gpu: 100 is a whole number", "valid: a GPU preset: \"a800-sxm\"");
  // Numbers out of range or of the wrong kind name the key and its unit.
  expect_error(g + "peak_tflops = 0\n", "n.toml:16: peak_tflops: 0 is not valid",
               "valid: the GPU's dense bf16 peak, a positive rate in TFLOP/s up to 100000");
  expect_error(g + "peak_tflops = 989e12\n", "n.toml:16: peak_tflops", "a positive rate in TFLOP/s");
  expect_error(g + "hbm_gbps = \"3.35 TB/s\"\n", "n.toml:16: hbm_gbps: \"3.35 TB/s\" is text",
               "valid: the GPU's HBM bandwidth, a positive rate in GB/s");
  expect_error(g + "gpu_mem_gib = -80\n", "n.toml:16: gpu_mem_gib: -80 is not valid",
               "valid: the GPU's memory, a positive size in GiB (2^30 bytes)");
  expect_error(g + "gpu_mem_gib = 85899345920\n", "gpu_mem_gib", "in GiB");
  // Numbers without a preset must be all three.
  expect_error(g + "peak_tflops = 500\nhbm_gbps = 2000\n", "n.toml: missing 'gpu_mem_gib'",
               "a GPU is a preset, gpu = \"a800-sxm\", \"a100-sxm\", \"h100-sxm\", \"h200\", \"b200\", or its three "
               "numbers");
  // A network without GPUs has none to describe.
  const std::string cpu =
      "name = \"c\"\ngpu_arch = \"none\"\nintra_gpu_gbps = 3\ninter_node_gbps = 3\n"
      "intra_latency_us = 1\ninter_latency_us = 1\n";
  ASSERT_TRUE(parse_network_spec(cpu, "n.toml")) << parse_network_spec(cpu, "n.toml").error();
  expect_error(cpu + "hbm_gbps = 100\ngpu = \"h200\"\n", "n.toml:7: hbm_gbps: the network has gpu_arch = \"none\"",
               "valid: leave the GPU keys out");
}

TEST(NetworkSpec, AGpuArchOfAnotherGenerationThanTheGpuIsAWarning) {
  // gpu_arch sm80 (what prices the collectives) against an H100 (sm90): read, with a warning naming both.
  auto w = parse_network_spec(std::string(kGood) + "gpu = \"h100-sxm\"\n", "n.toml");
  ASSERT_TRUE(w) << w.error();
  ASSERT_EQ(w->warnings.size(), 1u);
  EXPECT_NE(w->warnings[0].find("network test-net (n.toml): gpu_arch = \"sm80\" but gpu = \"h100-sxm\" is an sm90 GPU"),
            std::string::npos)
      << w->warnings[0];
  EXPECT_NE(w->warnings[0].find("the collectives are priced for sm80, the compute and memory for h100-sxm"),
            std::string::npos)
      << w->warnings[0];
  EXPECT_DOUBLE_EQ(w->gpu.peak_tflops, 989.4);
  // A Blackwell GPU: gpu_arch has no sm100, so its collectives are priced as on the generation given.
  std::string hopper = kGood;
  hopper.replace(hopper.find("sm80"), 4, "sm90");
  auto b = parse_network_spec(hopper + "gpu = \"b200\"\n", "n.toml");
  ASSERT_TRUE(b) << b.error();
  ASSERT_EQ(b->warnings.size(), 1u);
  EXPECT_NE(b->warnings[0].find("is an sm100 GPU"), std::string::npos) << b->warnings[0];
  EXPECT_NE(b->warnings[0].find("gpu_arch goes up to sm90"), std::string::npos) << b->warnings[0];
  // The numbers alone carry no generation: nothing to disagree with.
  EXPECT_TRUE(parse_network_spec(hopper + "peak_tflops = 312\nhbm_gbps = 2039\ngpu_mem_gib = 80\n", "n.toml")
                  ->warnings.empty());
}

TEST(NetworkSpec, TheFormerFormatIsRefusedWithHowToConvertIt) {
  // The text of a former .network file: TOML cannot read bare words, and yes/no are no TOML booleans.
  expect_error("# old\nname = test-net\ngpu_arch = sm80\n", "n.toml:2: 'name = test-net' is in the former key = value",
               "network files are TOML since December 2026; convert it: quote text values");
  expect_error("name = \"x\"\nnvswitch = yes\n", "n.toml:2: 'nvswitch = yes' is in the former", "true/false");
  // A file named .network is refused whatever it holds, pointing at the .toml beside it when there is one.
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "lins_network_spec_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string old = (dir / "cluster.network").string();
  std::ofstream(old) << kGood;
  auto refused = load_network_spec(old);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("'" + old + "' is a former .network file: network files are TOML since"),
            std::string::npos)
      << refused.error();
  EXPECT_EQ(refused.error().find("is there already"), std::string::npos) << refused.error();
  std::ofstream((dir / "cluster.toml").string()) << kGood;
  auto renamed = resolve_network_spec(old);
  ASSERT_FALSE(renamed);
  EXPECT_NE(renamed.error().find((dir / "cluster.toml").string() + " is there already: give that"), std::string::npos)
      << renamed.error();
  EXPECT_TRUE(resolve_network_spec((dir / "cluster.toml").string())) << "the same text as .toml is read";
  fs::remove_all(dir);
}

TEST(NetworkSpec, LoadAndResolveNameWhatIsWrong) {
  auto missing = load_network_spec("/nonexistent/cluster.toml");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().find("/nonexistent/cluster.toml"), std::string::npos);
  EXPECT_NE(missing.error().find("paper-a800"), std::string::npos);
  auto unknown = resolve_network_spec("infiniband");
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().find("unknown network 'infiniband'; valid networks: cpu-local, ethernet-100g, h100-ndr, "
                                 "paper-a800"),
            std::string::npos)
      << unknown.error();
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(NetworkSpec, ShippedPresetsAreTheFilesOfDataNetworks) {
  const auto presets = network_spec_presets();
  ASSERT_EQ(presets.size(), 4u);
  for (const auto& p : presets) {
    const std::string path = std::string(LINS_NETWORKS_DIR) + "/" + p.name + ".toml";
    auto file = parse_network_spec(read(path), path);
    ASSERT_TRUE(file) << file.error();
    EXPECT_EQ(file->name, p.name) << "the name inside " << path << " must be its file name";
    EXPECT_EQ(file->summary(), p.summary());
    EXPECT_DOUBLE_EQ(file->inter_node_gbps, p.inter_node_gbps);
    EXPECT_EQ(file->gpu.preset, p.gpu.preset);
    EXPECT_DOUBLE_EQ(file->gpu.peak_tflops, p.gpu.peak_tflops);
    EXPECT_EQ(p.source, "preset");
    // A shipped network with GPUs names its GPU, of its own generation; one without GPUs names none.
    EXPECT_EQ(p.gpu.described(), p.has_gpu()) << p.name;
    EXPECT_TRUE(p.warnings.empty()) << p.name << ": " << (p.warnings.empty() ? "" : p.warnings[0]);
    // A path resolves to the file itself.
    auto by_path = resolve_network_spec(path);
    ASSERT_TRUE(by_path) << by_path.error();
    EXPECT_EQ(by_path->source, path);
  }
}

TEST(NetworkSpec, PresetsGiveTheAlphaBetaTermsTheyAlwaysHad) {
  // The four networks lins shipped as built-in tables before network files; the files must give the same terms.
  struct Old {
    const char* name;
    double intra, inter_node, inter_gpu, intra_lat, inter_lat;
  } old[] = {{"paper-a800", 200.0, 100.0, 25.0, 2e-6, 6e-6},
             {"h100-ndr", 450.0, 400.0, 50.0, 2e-6, 5e-6},
             {"ethernet-100g", 300.0, 12.5, 12.5, 2e-6, 15e-6},
             {"cpu-local", 3.0, 3.0, 3.0, 20e-6, 20e-6}};
  for (const auto& o : old) {
    auto ab = network_preset(o.name);
    ASSERT_TRUE(ab) << ab.error();
    EXPECT_DOUBLE_EQ(ab->intra_gpu_gbps, o.intra) << o.name;
    EXPECT_DOUBLE_EQ(ab->inter_node_gbps, o.inter_node) << o.name;
    EXPECT_DOUBLE_EQ(ab->inter_gpu_gbps, o.inter_gpu) << o.name;
    EXPECT_NEAR(ab->intra_latency_s, o.intra_lat, 1e-18) << o.name;
    EXPECT_NEAR(ab->inter_latency_s, o.inter_lat, 1e-18) << o.name;
  }
}

TEST(NetworkSpec, PresetsCarryTheirClustersGpu) {
  struct Expected {
    const char* network;
    const char* gpu;
    double peak_tflops, hbm_gbps, mem_gib;
  } expected[] = {{"paper-a800", "a800-sxm", 312.0, 2039.0, 80.0},
                  {"h100-ndr", "h100-sxm", 989.4, 3350.0, 80.0},
                  {"ethernet-100g", "a100-sxm", 312.0, 2039.0, 80.0},
                  {"cpu-local", "", 0, 0, 0}};
  for (const auto& e : expected) {
    auto n = resolve_network_spec(e.network);
    ASSERT_TRUE(n) << n.error();
    EXPECT_EQ(n->gpu.preset, e.gpu) << e.network;
    EXPECT_DOUBLE_EQ(n->gpu.peak_tflops, e.peak_tflops) << e.network;
    EXPECT_DOUBLE_EQ(n->gpu.hbm_gbps, e.hbm_gbps) << e.network;
    EXPECT_DOUBLE_EQ(n->gpu.mem_gib, e.mem_gib) << e.network;
  }
}

TEST(NetworkSpec, AlphaBetaDegradesWithTheNodesAGroupSpans) {
  auto spec = parse_network_spec(kGood, "n.toml").value();
  const AlphaBeta slow = alpha_beta_of(spec);
  AlphaBeta flat = slow;
  flat.bw_factor_per_node_doubling = flat.latency_factor_per_node_doubling = 1.0;
  // Inside a node nothing changes.
  EXPECT_DOUBLE_EQ(alpha_beta_time_s(slow, CollKind::all_gather, 1 << 24, Mesh{4, 1}),
                   alpha_beta_time_s(flat, CollKind::all_gather, 1 << 24, Mesh{4, 1}));
  // One GPU per node over 4 nodes (2 doublings): the inter-node ring is the whole time,
  // (p1 - 1) alpha + v (p1 - 1) / p1 / bn with bn = min(25, 12.5) GB/s.
  // flat: 3 x 4 us + 2^24 x 3/4 / 12.5e9 s; slow: 3 x 4 x 1.44 us + the same bytes / (12.5e9 x 0.81).
  const double v = 1 << 24;
  EXPECT_NEAR(alpha_beta_time_s(flat, CollKind::all_gather, v, Mesh{1, 4}), 3 * 4e-6 + v * 0.75 / 12.5e9, 1e-15);
  EXPECT_NEAR(alpha_beta_time_s(slow, CollKind::all_gather, v, Mesh{1, 4}),
              3 * 4e-6 * 1.44 + v * 0.75 / (12.5e9 * 0.81), 1e-15);
}

TEST(NetworkSpec, AContentionTableIsReadWithItsSourceAndCheckedKeyByKey) {
  const std::string table =
      "\n[contention]\n"
      "source = \"prior: a test\"\n"
      "kappa_gemm_intra = 0.2\n"
      "kappa_gemm_inter = 0.02\n"
      "kappa_memory_intra = 1\n"
      "kappa_combine = \"max\"\n"
      "lambda_inter = 0.3\n"
      "links_shared = true\n"
      "eta = 0.85\n";
  auto s = parse_network_spec(std::string(kGood) + table, "n.toml");
  ASSERT_TRUE(s) << s.error();
  const Contention& c = s->contention;
  EXPECT_TRUE(c.any());
  EXPECT_EQ(c.source, "prior: a test");
  EXPECT_EQ(c.kappa[int(TaskClass::gemm)][0], 0.2);
  EXPECT_EQ(c.kappa[int(TaskClass::gemm)][1], 0.02);
  EXPECT_EQ(c.kappa[int(TaskClass::memory)][0], 1.0);
  EXPECT_EQ(c.kappa[int(TaskClass::memory)][1], 0.0);
  EXPECT_EQ(c.combine, KappaCombine::max);
  EXPECT_EQ(c.lambda[0], 0.0);
  EXPECT_EQ(c.lambda[1], 0.3);
  EXPECT_TRUE(c.links_shared);
  EXPECT_EQ(c.eta, 0.85);
  // Without a table: overlap is free.
  EXPECT_FALSE(parse_network_spec(kGood, "n.toml")->contention.any());
  const std::string g = std::string(kGood) + "\n[contention]\nsource = \"x\"\n";
  expect_error(g + "kappa_gemm = 0.1\n", "n.toml:19", "[contention] unknown key 'kappa_gemm'; valid keys: source,");
  expect_error(g + "eta = 1.5\n", "n.toml:19", "eta: 1.5 is not valid; valid: an efficiency in (0, 1]");
  expect_error(g + "lambda_intra = -0.1\n", "n.toml:19", "lambda_intra: -0.1 is not valid; valid: a slowdown from 0");
  expect_error(g + "lambda_inter = 100.5\n", "n.toml:19",
               "lambda_inter: 100.5 is not valid; valid: a slowdown from 0 (none) to 100");
  expect_error(g + "kappa_combine = \"mean\"\n", "n.toml:19", "kappa_combine: \"mean\" is not valid");
  expect_error(g + "links_shared = 1\n", "n.toml:19", "links_shared: 1 is a whole number; valid: true or false");
  expect_error(std::string(kGood) + "\n[contention]\neta = 0.9\n", "n.toml", "[contention] missing 'source'");
}

TEST(NetworkSpec, AContentionFileIsItsTableOrANetworkFilesTable) {
  const auto dir = std::filesystem::temp_directory_path() / "lins_contention_test";
  std::filesystem::create_directories(dir);
  Contention c;
  c.kappa[int(TaskClass::memory)][1] = 0.75;
  c.lambda[0] = 0.125;
  c.lambda[1] = kMaxSlowdown;  // the ceiling the fit clamps to loads
  c.links_shared = true;
  c.eta = 0.5;
  c.combine = KappaCombine::max;
  c.source = "measured: a \"quoted\" test";
  const auto written = dir / "c.toml";
  std::ofstream(written) << contention_toml(c, "line one\nline two");
  auto back = load_contention(written.string());
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(back->kappa[int(TaskClass::memory)][1], 0.75);
  EXPECT_EQ(back->lambda[0], 0.125);
  EXPECT_EQ(back->lambda[1], kMaxSlowdown);
  EXPECT_TRUE(back->links_shared);
  EXPECT_EQ(back->eta, 0.5);
  EXPECT_EQ(back->combine, KappaCombine::max);
  EXPECT_EQ(back->source, "measured: a 'quoted' test");
  const auto net = dir / "net.toml";
  std::ofstream(net) << kGood << "\n" << contention_toml(c);
  back = load_contention(net.string());
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(back->eta, 0.5);
  const auto none = dir / "none.toml";
  std::ofstream(none) << kGood;
  auto missing = load_contention(none.string());
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().find("no [contention] table"), std::string::npos) << missing.error();
  EXPECT_FALSE(load_contention((dir / "absent.toml").string()));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lins
