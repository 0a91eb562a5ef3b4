// Which inputs of a projection are assumed, which given and which measured, in one line: what `lins plan` and
// `lins simulate` print so that a reader knows how far to trust the numbers below it (docs/cost-model.md, "What a
// projection rests on").
#pragma once

#include <string>

#include "core/cost/compute_model.h"
#include "core/cost/cost_model.h"
#include "core/cost/cost_options.h"
#include "core/cost/host_model.h"
#include "core/util/cli.h"

namespace lins {

// "assumed: compute efficiency 0.6 x peak, ...; given: --gpu-mem; measured: -": every input of the projection under
// one of three words. assumed: a default lins chose from published numbers (compute efficiency, the network model's
// priors, contention priors, the memory reserve, the GPU's datasheet, the built-in host costs); given: a number an
// option set; measured: files of measurements (--calibrate, --profile, --nccl-tests, a measured --contention file,
// --host-costs). `args` says which options were given.
std::string inputs_line(const ParsedArgs& args, const CostModel& cost, const ComputeModel& compute,
                        const GpuAssumption& gpu, const HostModel* host);

}  // namespace lins
