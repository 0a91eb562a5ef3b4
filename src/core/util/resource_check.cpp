// Memory needs against a node's budget; see resource_check.h.
#include "core/util/resource_check.h"

#include "core/util/units.h"

namespace lins {

Status check_node_memory(const NodeBudget& budget, const std::vector<NodeDemand>& demands,
                         const std::vector<std::string>& would_fit, const std::string& override_hint) {
  std::string over;
  for (const auto& d : demands) {
    if (d.node_bytes <= budget.available_bytes) continue;
    over += std::string(over.empty() ? "" : "; ") + d.what + " needs " + format_bytes(d.node_bytes);
    if (d.ranks > 1)
      over += " (" + std::to_string(d.ranks) + " ranks, the largest " + format_bytes(d.rank_max_bytes) +
              (d.detail.empty() ? "" : ": " + d.detail) + ")";
    else if (!d.detail.empty())
      over += " (" + d.detail + ")";
  }
  if (over.empty()) return Status::ok_status();
  std::string msg = "not enough memory on " + budget.where + ": " + over + "; " + budget.where + " has " +
                    budget.source + ". Nothing was allocated.";
  if (!would_fit.empty()) {
    msg += " Would fit:";
    for (std::size_t i = 0; i < would_fit.size(); ++i) msg += (i ? "; " : " ") + would_fit[i];
    msg += ".";
  }
  if (!override_hint.empty()) msg += " " + override_hint;
  return make_error(msg);
}

CommBufferBytes comm_buffer_bytes(std::uint64_t max_bytes, bool on_device) {
  const double b = double(max_bytes ? max_bytes : 1);
  return on_device ? CommBufferBytes{b, 2 * b} : CommBufferBytes{3 * b, 0};
}

}  // namespace lins
