// JSON for provenance files, the schema and nccl-tests' -J output, through nlohmann-json: `Json` keeps members in the
// order they were set (a key set again keeps its place), and json_dump prints it as lins writes files. Plus
// write_file_atomic, so a reader never sees half a file.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/util/result.h"

namespace lins {

using Json = nlohmann::ordered_json;

// `indent` spaces per level (0: one line without spaces), no final newline. Non-finite numbers are written as null
// and bytes that are not UTF-8 as U+FFFD, so any value prints as valid JSON and nothing throws.
std::string json_dump(const Json& j, int indent = 2);

// Writes `content` to `path` through a temporary file in the same folder and a rename, so `path` is either the old
// file or the whole new one.
Status write_file_atomic(const std::string& path, std::string_view content);

}  // namespace lins
