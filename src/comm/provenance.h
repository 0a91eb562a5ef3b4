// Provenance of a measurement: argv, lins version and commit, MPI/NCCL/CUDA versions, GPU, hosts, world size, date
// and the environment variables that change results, as a JSON file written atomically by rank 0 beside a CSV.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "core/util/json.h"
#include "core/util/result.h"

namespace lins {

// Host name of every rank of `comm`, in rank order, on every rank (collective).
std::vector<std::string> gather_host_names(MPI_Comm comm);
// MPI_Get_library_version's text on one line ("Open MPI v4.1.4, ...").
std::string mpi_library_version();
// OPENBLAS_NUM_THREADS, OMP_NUM_THREADS, CUDA_VISIBLE_DEVICES, SLURM_JOB_ID and the other SLURM_ job/step/node
// variables, every NCCL_*, UCX_* and OMPI_MCA_{btl,pml,mtl,coll}* variable that is set (name -> value, sorted).
Json relevant_environment();

// What carries this job's collectives, the same on every rank (collective): LINS_FABRIC where the launcher set it
// (scripts/cluster.sh run: "emulated:NxR:RATE,DELAY,LOSS"), else "shared-memory" when every rank is on one host, else
// "hosts:N".
std::string fabric_label(MPI_Comm comm);

// The provenance object (collective over `comm`: gathers host names). `extra` members are appended as "run".
Json gather_provenance(MPI_Comm comm, const std::vector<std::string>& argv, const Json& extra = {});

// Collective: gathers the provenance and rank 0 writes it to `path` (temporary file + rename). Every rank returns
// rank 0's outcome, so all ranks agree on failure.
Status write_provenance(MPI_Comm comm, const std::string& path, const std::vector<std::string>& argv,
                        const Json& extra = {});

// "<stem>.provenance.json" beside a CSV path ("out/ag.csv" -> "out/ag.provenance.json").
std::string provenance_path_for(const std::string& csv_path);

}  // namespace lins
