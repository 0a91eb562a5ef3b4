// The contention rates and their TOML table; see contention.h.
#include "core/cost/contention.h"

#include <algorithm>
#include <sstream>

namespace lins {

bool Contention::any() const {
  for (const auto& row : kappa)
    for (double k : row)
      if (k != 0) return true;
  return lambda[0] != 0 || lambda[1] != 0 || links_shared;
}

double Contention::compute_rate(TaskClass c, const int active[2]) const {
  const auto& k = kappa[int(c)];
  double slow = 0;
  for (int f = 0; f < 2; ++f) {
    if (active[f] <= 0 || k[f] == 0) continue;
    slow = combine == KappaCombine::sum ? slow + active[f] * k[f] : std::max(slow, k[f]);
  }
  return 1.0 / (1.0 + slow);
}

double Contention::transfer_rate(int fabric, int sharing, bool compute_running) const {
  const double share = links_shared && sharing > 1 ? eta / sharing : 1.0;
  return compute_running ? share / (1.0 + lambda[fabric]) : share;
}

std::string Contention::summary() const {
  if (!any()) return "none (overlap is free)";
  std::ostringstream o;
  o << "kappa gemm " << kappa[0][0] << "/" << kappa[0][1] << ", memory " << kappa[1][0] << "/" << kappa[1][1] << " ("
    << kKappaCombineNames.name(combine) << "), lambda " << lambda[0] << "/" << lambda[1] << " (intra/inter), links "
    << (links_shared ? "shared at eta " : "not shared");
  if (links_shared) o << eta;
  o << "; " << source;
  return o.str();
}

TimelineRates timeline_rates(const Contention& c, const Schedule& s, std::function<TaskClass(int task)> task_class,
                             std::function<double(int op)> latency_s) {
  TimelineRates r;
  if (!c.any()) return r;
  r.compute = [c, task_class = std::move(task_class)](int task, const int active[2]) {
    return c.compute_rate(task_class ? task_class(task) : TaskClass::gemm, active);
  };
  r.transfer = [c, &s](int op, int sharing, bool compute_running) {
    return c.transfer_rate(int(s.ops[static_cast<std::size_t>(op)].axis()), sharing, compute_running);
  };
  r.latency_s = std::move(latency_s);
  return r;
}

std::string contention_toml(const Contention& c, const std::string& comment) {
  std::ostringstream o;
  o.precision(4);
  std::istringstream lines(comment);
  for (std::string line; std::getline(lines, line);) o << "# " << line << "\n";
  o << "[contention]\n";
  std::string source = c.source;
  std::replace(source.begin(), source.end(), '"', '\'');
  o << "source = \"" << source << "\"\n";
  o << "kappa_gemm_intra = " << c.kappa[0][0] << "\n";
  o << "kappa_gemm_inter = " << c.kappa[0][1] << "\n";
  o << "kappa_memory_intra = " << c.kappa[1][0] << "\n";
  o << "kappa_memory_inter = " << c.kappa[1][1] << "\n";
  o << "kappa_combine = \"" << kKappaCombineNames.name(c.combine) << "\"\n";
  o << "lambda_intra = " << c.lambda[0] << "\n";
  o << "lambda_inter = " << c.lambda[1] << "\n";
  o << "links_shared = " << (c.links_shared ? "true" : "false") << "\n";
  o << "eta = " << c.eta << "\n";
  return o.str();
}

}  // namespace lins
