// The fuzz targets' reading of their input as NUL-separated words (an argument vector, or a list of values): one
// word more than there are NUL bytes, empty words kept.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

inline std::vector<std::string> nul_separated_words(const uint8_t* data, size_t size) {
  std::vector<std::string> words(1);
  for (size_t k = 0; k < size; ++k) {
    if (data[k] == 0)
      words.emplace_back();
    else
      words.back() += static_cast<char>(data[k]);
  }
  return words;
}
