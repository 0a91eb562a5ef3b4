// Parsing and printing of sizes with suffixes (K, M, G, T and KiB, MiB, GiB, TiB are all powers of 1024,
// as nccl-tests and the paper's "4M tokens" = 4 x 2^20 use them) and of durations.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/util/result.h"

namespace lins {

// "64M" -> 67108864. Rejects empty, negative, fractional-without-suffix garbage, unknown suffixes and overflow.
// `what` names the flag or field in the error message.
Result<std::uint64_t> parse_size(std::string_view text, std::string_view what);
// Positive integer that fits in int (ranks, layers, GPUs per node). Accepts the same suffixes.
Result<int> parse_positive_int(std::string_view text, std::string_view what);
// Non-negative finite double ("0.5", "1e-3").
Result<double> parse_nonnegative_double(std::string_view text, std::string_view what);

std::string format_bytes(double bytes);      // "1.50 GiB"
std::string format_seconds(double seconds);  // "12.3 ms"

}  // namespace lins
