// Serial reference for collective tests (MPI and NCCL backends): a deterministic fill from (world rank, index),
// the expected result of each collective computed locally, and a comparison with a rounding-derived tolerance.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "core/schedule/schedule.h"
#include "core/util/bf16.h"

namespace lins::test {

// Dyadic values k/16 with -31 <= k <= 223: exact in bf16 and fp32 (8 significant bits); mostly positive, so sums of
// a few of them need up to 11 bits: fp32 sums are exact in any order while bf16 sums must round.
inline double fill_value(int world_rank, int64_t i) {
  return double(int((world_rank * 131 + i * 71 + 7) % 255) - 31) / 16.0;
}

// A host buffer of `dtype` elements.
struct HostBuf {
  DType dtype = DType::fp32;
  std::vector<unsigned char> bytes;
  HostBuf(DType d, int64_t n) : dtype(d), bytes(size_t(n) * dtype_bytes(d)) {}
  int64_t size() const { return int64_t(bytes.size()) / dtype_bytes(dtype); }
  void* data() { return bytes.data(); }
  double get(int64_t i) const {
    if (dtype == DType::fp32) {
      float f;
      std::memcpy(&f, &bytes[size_t(i) * 4], 4);
      return f;
    }
    uint16_t b;
    std::memcpy(&b, &bytes[size_t(i) * 2], 2);
    return bf16_to_float(b);
  }
  void set(int64_t i, double v) {
    if (dtype == DType::fp32) {
      const float f = float(v);
      std::memcpy(&bytes[size_t(i) * 4], &f, 4);
    } else {
      const uint16_t b = float_to_bf16(float(v));
      std::memcpy(&bytes[size_t(i) * 2], &b, 2);
    }
  }
  void fill(int world_rank, int64_t offset = 0) {
    for (int64_t i = 0; i < size(); ++i) set(i, fill_value(world_rank, offset + i));
  }
};

// Sum over `members` of fill_value(member, i): exact value and the bound on a sum rounded at each of the
// n - 1 additions (unit roundoff u of the dtype): |error| <= (n - 1) * u * sum |x|.
struct Expected {
  double value = 0;
  double tolerance = 0;
};
inline Expected expected_sum(const std::vector<int>& members, int64_t i, DType dtype) {
  double s = 0, a = 0;
  for (int m : members) {
    const double x = fill_value(m, i);
    s += x;
    a += std::fabs(x);
  }
  const double u = dtype == DType::fp32 ? kFp32UnitRoundoff : kBf16UnitRoundoff;
  return {s, (members.size() - 1) * u * a};
}

// Counts elements outside the tolerance (and, for groups of at most two ranks, bf16 results that are not the exactly
// rounded sum); describes the first few.
struct Mismatch {
  int64_t count = 0;
  std::string first;
  void add(const std::string& what, int64_t i, double got, double want) {
    if (count++ < 3) {
      std::ostringstream os;
      os << what << "[" << i << "] = " << got << ", expected " << want << "; ";
      first += os.str();
    }
  }
};

inline double round_to(DType dtype, double v) {
  return dtype == DType::fp32 ? double(float(v)) : double(bf16_to_float(float_to_bf16(float(v))));
}

}  // namespace lins::test

#include <cstdlib>

#include "comm/communicator.h"

namespace lins::test {

// Where collective buffers live: host memory here; the GPU tests pass a device policy with the same members.
struct HostMemory {
  void* alloc(size_t bytes) { return std::malloc(bytes ? bytes : 1); }
  void upload(void* dst, const void* src, size_t bytes) {
    if (bytes) std::memcpy(dst, src, bytes);  // empty vectors may hand out null
  }
  void download(void* dst, const void* src, size_t bytes) {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  void release(void* p) { std::free(p); }
};

// Runs every collective (out of place and in place; broadcast from the first and the last rank; all_to_all out of
// place, it has no in-place form) on `c`, whose
// members in group order are the world ranks `members`, with `n` elements per rank, and compares each result with
// the serial reference. Collective over the group.
template <class Memory>
Mismatch check_collectives(Communicator& c, const std::vector<int>& members, int world_rank, DType dt, int64_t n,
                           Memory mem = {}) {
  Mismatch mm;
  const int size = c.size(), me = c.rank();
  const size_t eb = dtype_bytes(dt);
  const int64_t big = n * size;
  void* d_send = mem.alloc(big * eb);
  void* d_recv = mem.alloc(big * eb);
  HostBuf h(dt, big), out(dt, big);
  auto check_sum = [&](const char* what, int64_t i, double got, int64_t ref_index) {
    const Expected e = expected_sum(members, ref_index, dt);
    const bool exact_needed = size <= 2;  // one rounding at most: must equal the rounded exact sum
    const bool ok = exact_needed ? got == round_to(dt, e.value) : std::fabs(got - e.value) <= e.tolerance;
    if (!ok) mm.add(what, i, got, e.value);
  };

  // all_gather: recv[j * n + i] = fill(members[j], i).
  for (bool in_place : {false, true}) {
    HostBuf mine(dt, n);
    mine.fill(world_rank);
    HostBuf init(dt, big);
    for (int64_t i = 0; i < big; ++i) init.set(i, -1000);  // outside the fill's range
    mem.upload(d_recv, init.data(), big * eb);
    void* send = in_place ? static_cast<char*>(d_recv) + me * n * eb : d_send;
    mem.upload(send, mine.data(), n * eb);
    c.all_gather(send, d_recv, n, dt).wait();
    mem.download(out.data(), d_recv, big * eb);
    for (int j = 0; j < size; ++j)
      for (int64_t i = 0; i < n; ++i)
        if (out.get(j * n + i) != round_to(dt, fill_value(members[j], i)))
          mm.add(in_place ? "all_gather in place" : "all_gather", j * n + i, out.get(j * n + i),
                 fill_value(members[j], i));
  }
  // reduce_scatter: recv[i] = sum_j fill(members[j], me * n + i).
  for (bool in_place : {false, true}) {
    h.fill(world_rank);
    mem.upload(d_send, h.data(), big * eb);
    void* recv = in_place ? static_cast<char*>(d_send) + me * n * eb : d_recv;
    c.reduce_scatter(d_send, recv, n, dt).wait();
    mem.download(out.data(), recv, n * eb);
    for (int64_t i = 0; i < n; ++i)
      check_sum(in_place ? "reduce_scatter in place" : "reduce_scatter", i, out.get(i), me * n + i);
  }
  // all_reduce over the whole buffer: recv[i] = sum_j fill(members[j], i).
  for (bool in_place : {false, true}) {
    h.fill(world_rank);
    mem.upload(d_send, h.data(), big * eb);
    void* recv = in_place ? d_send : d_recv;
    c.all_reduce(d_send, recv, big, dt).wait();
    mem.download(out.data(), recv, big * eb);
    for (int64_t i = 0; i < big; ++i) check_sum(in_place ? "all_reduce in place" : "all_reduce", i, out.get(i), i);
  }
  // broadcast from the first and the last rank of the group.
  for (int root : {0, size - 1}) {
    h.fill(world_rank);
    if (me != root)
      for (int64_t i = 0; i < big; ++i) h.set(i, 1000);
    mem.upload(d_send, h.data(), big * eb);
    c.broadcast(d_send, big, dt, root).wait();
    mem.download(out.data(), d_send, big * eb);
    for (int64_t i = 0; i < big; ++i)
      if (out.get(i) != round_to(dt, fill_value(members[root], i)))
        mm.add("broadcast from " + std::to_string(root), i, out.get(i), fill_value(members[root], i));
  }
  // all_to_all with n elements per peer: recv[j * n + i] = fill(members[j], me * n + i).
  {
    h.fill(world_rank);
    mem.upload(d_send, h.data(), big * eb);
    for (int64_t i = 0; i < big; ++i) out.set(i, -1000);
    mem.upload(d_recv, out.data(), big * eb);
    c.all_to_all(d_send, d_recv, n, dt).wait();
    mem.download(out.data(), d_recv, big * eb);
    for (int j = 0; j < size; ++j)
      for (int64_t i = 0; i < n; ++i)
        if (out.get(j * n + i) != round_to(dt, fill_value(members[j], me * n + i)))
          mm.add("all_to_all", j * n + i, out.get(j * n + i), fill_value(members[j], me * n + i));
  }
  mem.release(d_send);
  mem.release(d_recv);
  return mm;
}

}  // namespace lins::test
