// Parsing and printing of sizes with suffixes and of durations. K, M, G, T and KiB, MiB, GiB, TiB are powers of 1024,
// as nccl-tests (-e 8G) and the paper's "4M tokens" = 4 x 2^20 use them; KB, MB, GB, TB are powers of 1000, as
// datasheets write memory ("80GB" is 80 x 10^9 bytes, 74.5 GiB).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/util/result.h"

namespace lins {

// "64M" -> 67108864. Rejects empty, negative, fractional-without-suffix garbage, unknown suffixes and overflow.
// `what` names the flag or field in the error message.
Result<std::uint64_t> parse_size(std::string_view text, std::string_view what);
// A memory capacity in bytes (--gpu-mem, --memory-limit, the reserves): the same, but a bare number is refused, since
// "80" is far more often meant as 80 GiB than as 80 bytes; "80B" says bytes.
Result<std::uint64_t> parse_memory_size(std::string_view text, std::string_view what);
// Positive integer that fits in int (ranks, layers, GPUs per node). Accepts the same suffixes.
Result<int> parse_positive_int(std::string_view text, std::string_view what);
// Non-negative finite double ("0.5", "1e-3").
Result<double> parse_nonnegative_double(std::string_view text, std::string_view what);

std::string format_bytes(double bytes);      // "1.50 GiB"
std::string format_seconds(double seconds);  // "12.3 ms"

}  // namespace lins
