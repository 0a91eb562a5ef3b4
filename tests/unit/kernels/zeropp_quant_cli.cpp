// The ZeRO++ quantizers of kernels/quantize.h behind a line protocol, for zeropp_quant_peer_test.py, which holds them
// to the numpy transcription of DeepSpeed's kernels (python/lins_peers/zeropp_quant.py). One command a line on
// stdin; for each, one line on stdout: "ok", "error <text>" (a refused layout), or the command's printed result.
// Arrays travel in raw little-endian files: .f32 fp32, .bin bytes (int8 or packed int4), .u16 fp16 bits.
//   fp16 <n> <x.f32> <bits.u16>
//   quantize <bits> <n> <groups> <x.f32> <q.bin> <inv_scales.f32>
//   dequantize <bits> <n> <groups> <q.bin> <inv_scales.f32> <out.f32>
//   swizzle <n> <groups> <nodes> <gpus_per_node> <x.f32> <packed.bin> <inv_scales.f32>
//   reduce <elems_per_peer> <groups_per_peer> <peers> <in.bin> <in_scales.f32> <out.bin> <out_scales.f32>
//   dequant_reduce <elems_per_peer> <groups_per_peer> <peers> <divisor> <in.bin> <in_scales.f32> <out.f32>
//   qwz_groups <S>            -> prints the block count (0: refused)
//   qgz <nodes> <gpus_per_node> <d0,d1,...>  -> prints "<G> <deepspeed quantizes 0|1> <lins quantizes 0|1>"
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/quantize.h"

namespace {

namespace quant = lins::kernels::quant;

template <class T>
std::vector<T> read_array(const std::string& path, int64_t count) {
  std::vector<T> v(static_cast<size_t>(count));
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(count * sizeof(T)));
  if (!in || in.gcount() != static_cast<std::streamsize>(count * sizeof(T)))
    throw std::runtime_error("cannot read " + std::to_string(count) + " values from " + path);
  return v;
}

template <class T>
void write_array(const std::string& path, const std::vector<T>& v) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
  if (!out) throw std::runtime_error("cannot write " + path);
}

std::string run(const std::string& line) {
  std::istringstream in(line);
  std::string cmd;
  in >> cmd;
  if (cmd == "fp16") {
    int64_t n;
    std::string x_path, out_path;
    in >> n >> x_path >> out_path;
    const auto x = read_array<float>(x_path, n);
    std::vector<uint16_t> bits(x.size());
    for (size_t i = 0; i < x.size(); ++i) bits[i] = quant::fp16_bits(x[i]);
    write_array(out_path, bits);
    return "ok";
  }
  if (cmd == "quantize" || cmd == "dequantize") {
    int bits;
    int64_t n, groups;
    std::string a, b, c;
    in >> bits >> n >> groups >> a >> b >> c;
    const int64_t bytes = bits == 8 ? n : n / 2;
    if (cmd == "quantize") {
      const auto x = read_array<float>(a, n);
      std::vector<uint8_t> q(static_cast<size_t>(bytes));
      std::vector<float> inv(static_cast<size_t>(groups > 0 ? groups : 0));
      if (bits == 8)
        quant::quantize_int8(x.data(), n, groups, reinterpret_cast<int8_t*>(q.data()), inv.data());
      else
        quant::quantize_int4(x.data(), n, groups, q.data(), inv.data());
      write_array(b, q);
      write_array(c, inv);
    } else {
      const auto q = read_array<uint8_t>(a, bytes);
      const auto inv = read_array<float>(b, groups);
      std::vector<float> out(static_cast<size_t>(n));
      if (bits == 8)
        quant::dequantize_int8(reinterpret_cast<const int8_t*>(q.data()), inv.data(), n, groups, out.data());
      else
        quant::dequantize_int4(q.data(), inv.data(), n, groups, out.data());
      write_array(c, out);
    }
    return "ok";
  }
  if (cmd == "swizzle") {
    int64_t n, groups;
    int nodes, gpus;
    std::string x_path, q_path, s_path;
    in >> n >> groups >> nodes >> gpus >> x_path >> q_path >> s_path;
    const auto x = read_array<float>(x_path, n);
    std::vector<uint8_t> q(static_cast<size_t>(n / 2));
    std::vector<float> inv(static_cast<size_t>(groups));
    quant::swizzle_quantize_int4(x.data(), n, groups, nodes, gpus, q.data(), inv.data());
    write_array(q_path, q);
    write_array(s_path, inv);
    return "ok";
  }
  if (cmd == "reduce" || cmd == "dequant_reduce") {
    int64_t elems, groups;
    int peers;
    float divisor = 1.0f;
    in >> elems >> groups >> peers;
    if (cmd == "dequant_reduce") in >> divisor;
    std::string in_path, in_scales_path, out_path, out_scales_path;
    in >> in_path >> in_scales_path >> out_path;
    const auto packed = read_array<uint8_t>(in_path, peers * elems / 2);
    const auto scales = read_array<float>(in_scales_path, peers * groups);
    if (cmd == "reduce") {
      in >> out_scales_path;
      std::vector<uint8_t> out(static_cast<size_t>(elems / 2));
      std::vector<float> out_scales(static_cast<size_t>(groups));
      quant::quantized_reduction_int4(packed.data(), scales.data(), elems, groups, peers, out.data(),
                                      out_scales.data());
      write_array(out_path, out);
      write_array(out_scales_path, out_scales);
    } else {
      std::vector<float> out(static_cast<size_t>(elems));
      quant::dequantize_reduce_int4(packed.data(), scales.data(), elems, groups, peers, divisor, out.data());
      write_array(out_path, out);
    }
    return "ok";
  }
  if (cmd == "qwz_groups") {
    int64_t s;
    in >> s;
    return std::to_string(quant::qwz_group_count(s));
  }
  if (cmd == "qgz") {
    int nodes, gpus;
    std::string dims;
    in >> nodes >> gpus >> dims;
    std::vector<int64_t> shape;
    std::istringstream ds(dims);
    for (std::string d; std::getline(ds, d, ',');)
      if (!d.empty()) shape.push_back(std::stoll(d));
    const int64_t groups = shape.size() >= 2 ? quant::qgz_group_count(shape[0], shape[1], nodes * gpus) : 0;
    return std::to_string(groups) + " " + (quant::qgz_deepspeed_quantizes(shape, nodes, gpus) ? "1" : "0") + " " +
           (quant::qgz_refusal(shape, nodes, gpus).empty() ? "1" : "0");
  }
  throw std::runtime_error("unknown command '" + cmd + "'");
}

}  // namespace

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    try {
      std::cout << run(line) << "\n";
    } catch (const std::invalid_argument& e) {
      std::cout << "error " << e.what() << "\n";
    } catch (const std::exception& e) {
      std::cerr << "zeropp_quant_cli: " << e.what() << "\n";
      return 2;
    }
  }
  return 0;
}
