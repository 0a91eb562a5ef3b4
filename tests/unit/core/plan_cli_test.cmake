# `lins plan` end to end (run by ctest with -DLINS=<binary> -DWORK=<folder> -DDATA=<nccl-tests samples>
# -DNETWORKS=<data/networks> -DPROFILES=<data/cluster/profile>): --help, --version, a bad flag's exit code 2 and message, the CSV it writes (header and
# one row per plan, finished file only), a network file and nccl-tests output as inputs.
function(run expect_rc)
  execute_process(COMMAND ${LINS} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
  if(NOT rc EQUAL expect_rc)
    message(FATAL_ERROR "lins ${ARGN}: exit ${rc}, expected ${expect_rc}\nstdout:\n${out}\nstderr:\n${err}")
  endif()
  set(OUT "${out}" PARENT_SCOPE)
  set(ERR "${err}" PARENT_SCOPE)
endfunction()

function(expect_in text needle what)
  string(FIND "${text}" "${needle}" pos)
  if(pos EQUAL -1)
    message(FATAL_ERROR "${what}: '${needle}' not found in:\n${text}")
  endif()
endfunction()

function(expect_not_in text needle what)
  string(FIND "${text}" "${needle}" pos)
  if(NOT pos EQUAL -1)
    message(FATAL_ERROR "${what}: '${needle}' found in:\n${text}")
  endif()
endfunction()

run(0 --version)
expect_in("${OUT}" "lins " "--version")
run(0 plan --help)
foreach(opt --model --gpus-per-node --nodes --global-batch-tokens --gpu-mem --network --network-model --profile
            --nccl-tests --pricing --plan --explain --csv --top --tie --host-model --bucket --reserve-context --reserve-cublas
            --reserve-nccl --reserve-fragmentation docs/cost-model.md)
  expect_in("${OUT}" "${opt}" "plan --help")
endforeach()
run(2 plan --frobnicate)
expect_in("${ERR}" "unknown option '--frobnicate'" "bad flag")
expect_in("${ERR}" "valid options" "bad flag")
run(2 plan --plan p=3,g=3,os=8)
expect_in("${ERR}" "nearest legal plan" "illegal plan")

# A network given as a file, nccl-tests output first: the 8 x 2 all-reduce prices the all-reduces of that mesh (the
# nccl model by name, whose --explain names its choice or the profile per row).
run(0 plan --nodes 2 --network ${NETWORKS}/paper-a800.toml --nccl-tests ${DATA}/all_reduce_perf_h100_8x2.txt
    --network-model nccl --plan ddp --gpu-mem 1TiB --explain)
expect_in("${OUT}" "network: paper-a800" "network file")
expect_in("${OUT}" "measured first: ${DATA}/all_reduce_perf_h100_8x2.txt (all_reduce 8x2)" "nccl-tests import")
expect_in("${OUT}" "profile" "--explain names the measured rows")
# Measurements fit the alpha-beta model's link terms, which price every mesh not measured: the emulated cluster's
# profile on 2 nodes priced at 4 (meshes never measured), the terms beside the file's and each series' error.
run(0 plan --model small --gpus-per-node 2 --nodes 4 --seq 128 --micro-batch 1 --micro-batches 2 --gpu-mem 1GiB
    --network cpu-local --profile ${PROFILES}/cluster-2x2.csv --plan zero3 --objective comm --reserve-context 0B)
expect_in("${OUT}" "priced by the alpha-beta hierarchical ring, its link terms fitted to the measurements" "fit prices")
expect_in("${OUT}" "alpha-beta link terms fitted to 156 measured points" "fit header")
expect_in("${OUT}" "inter-node bandwidth   3 GB/s" "the file's term beside the fitted one")
expect_in("${OUT}" "all_gather      2x2" "a series' fit error")
expect_in("${OUT}" "16 of 16 collectives priced by the network model, its link terms fitted to the measurements"
          "the fallback line says the terms are fitted")
# nccl-tests inside one node only: the inter-node terms stay the file's, and the fit says so; the nccl model asked for
# by name keeps its prices and shows the fit beside them.
run(0 plan --nodes 2 --nccl-tests ${DATA}/all_gather_perf_a100_8x1.log,${DATA}/reduce_scatter_perf_a100_8x1.log
    --plan zero3 --gpu-mem 1TiB)
expect_in("${OUT}" "no measured collective spans nodes: the inter-node terms are the network file's" "no inter point")
expect_in("${OUT}" "(kept: no point constrains it)" "kept terms marked")
run(0 plan --nodes 2 --nccl-tests ${DATA}/all_gather_perf_a100_8x1.log --network-model nccl --plan zero3 --gpu-mem 1TiB)
expect_in("${OUT}" "priced by the NCCL 2.21.5 model" "nccl by name")
expect_in("${OUT}" "shown for comparison" "the fit beside the nccl model")
# The alpha-beta model, and no reserve, on request.
run(0 plan --nodes 2 --network-model alpha-beta --reserve-context 0B --reserve-cublas 0B --reserve-nccl 0B
    --reserve-fragmentation 0 --plan zero3)
expect_in("${OUT}" "priced by the alpha-beta hierarchical ring" "--network-model alpha-beta")
expect_in("${OUT}" "reserve: 0 B" "no reserve")

# The GPU comes with the network: h100-ndr projects an H100 SXM (its datasheet peak, HBM rate and memory), each number
# saying where it came from; the default network, the paper's A800.
set(h100 plan --model llama-13b --nodes 16 --network h100-ndr --global-batch-tokens 2M --top 1)
run(0 ${h100})
set(from "(network h100-ndr's gpu preset h100-sxm)")
expect_in("${OUT}" "peak 989.4 TFLOP/s for MFU ${from}" "h100-ndr: the H100's peak")
expect_in("${OUT}" "AdamW at 0.74 of the HBM's 3350 GB/s, network h100-ndr's gpu preset h100-sxm" "h100-ndr: the H100's HBM bandwidth")
expect_in("${OUT}" "memory limit 80.00 GiB per GPU ${from}" "h100-ndr: the H100's memory")
# Compute is predicted by default: a roofline at Hopper's measured kernel rates (GEMMs at 0.776 x 989.4 where their
# tiles fill the SMs), said measured.
expect_in("${OUT}" "compute: predicted per task by a roofline of its kernels" "h100-ndr: roofline by default")
expect_in("${OUT}" "GEMMs at 767.8 TFLOP/s at full tiles, times each one's tile fill" "h100-ndr: 0.776 x the H100's peak")
expect_in("${OUT}" "measured: compute by roofline" "the inputs line: the roofline's rates measured")
# An efficiency given is the one sustained rate, labelled as given.
run(0 ${h100} --compute-efficiency 0.6)
expect_in("${OUT}" "593.6 TFLOP/s sustained per GPU" "--compute-efficiency: 0.6 x the H100's peak")
expect_in("${OUT}" "given: compute efficiency 0.6 x peak (--compute-efficiency)" "--compute-efficiency labelled given")
expect_not_in("${ERR}" "warning" "h100-ndr alone")
run(0 plan --nodes 2 --plan zero3)
expect_in("${OUT}" "peak 312 TFLOP/s for MFU (network paper-a800's gpu preset a800-sxm)" "paper-a800: the A800's peak")
# An option replaces its number; a peak of another generation than the network's (312: an A800's or A100's, sm80) is
# taken as given with a warning, one of the same generation without.
run(0 ${h100} --peak-tflops 312 --gpu-mem 64GiB)
expect_in("${OUT}" "peak 312 TFLOP/s for MFU (--peak-tflops)" "--peak-tflops replaces the network's")
expect_in("${OUT}" "GEMMs at 242.1 TFLOP/s at full tiles" "--peak-tflops scaled by the GEMM rate")
expect_in("${OUT}" "memory limit 64.00 GiB per GPU (--gpu-mem)" "--gpu-mem replaces the network's")
expect_in("${ERR}" "lins plan: warning: --peak-tflops 312 is the dense bf16 peak of a800-sxm and a100-sxm (sm80), but network h100-ndr has gpu_arch = \"sm90\"" "a peak of another generation")
run(0 ${h100} --peak-tflops 989)
expect_not_in("${ERR}" "warning" "a peak of the network's generation")
# lins simulate says the same in its first line.
run(0 simulate --network h100-ndr --model llama-7b --gpus 64 --strategies zero3 --hbm-gbps 3000 --out ${WORK}/sim-h100.csv)
expect_in("${OUT}" "lins simulate: GPU peak 989.4 TFLOP/s for MFU ${from}, HBM 3000 GB/s (--hbm-gbps), 80.00 GiB per GPU ${from}" "simulate: the network's GPU")

# NVLS: the alpha-beta model does not price it and says so; the nccl model refuses it, naming --network-model only
# when it was given.
file(MAKE_DIRECTORY ${WORK})
file(WRITE ${WORK}/nvls.toml "name = \"nvls-h100\"\ngpus_per_node = 8\ngpu_arch = \"sm90\"\ngpu = \"h100-sxm\"\n"
     "nvlink_links = 18\nnvlink_gbps = 25\nnvswitch = true\nnvls = true\npcie_gen = 5\nnics_per_node = 8\n"
     "nic_gbit_per_s = 400\nintra_latency_us = 2\ninter_latency_us = 5\n")
run(0 plan --nodes 2 --plan zero3 --network ${WORK}/nvls.toml --network-model alpha-beta)
expect_in("${ERR}" "lins plan: warning: network nvls-h100 (${WORK}/nvls.toml) has nvls = true, which the alpha-beta model does not price" "nvls under alpha-beta")
run(2 plan --nodes 2 --plan zero3 --network ${WORK}/nvls.toml)
expect_in("${ERR}" "the nccl model (chosen for a network with GPUs): network nvls-h100" "nvls refused under auto")
expect_not_in("${ERR}" "--network-model nccl" "nvls refused under auto")
run(2 plan --nodes 2 --plan zero3 --network ${WORK}/nvls.toml --network-model nccl)
expect_in("${ERR}" "--network-model nccl: network nvls-h100" "nvls refused under --network-model nccl")

# The default run (LLaMA-7B on 8 x 128) and its CSV: 121 legal plans + 8 baselines + the header.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
run(0 plan --csv ${WORK}/plans.csv --pricing both)
expect_in("${OUT}" "chosen plan:" "default run")
expect_in("${OUT}" "priced by the NCCL 2.21.5 model" "default run: the nccl model on paper-a800")
expect_in("${OUT}" "reserve:" "default run: the memory reserve")
expect_in("${OUT}" "comm_shared" "default run with both pricings")
if(EXISTS ${WORK}/plans.csv.partial OR NOT EXISTS ${WORK}/plans.csv)
  message(FATAL_ERROR "plan --csv left no finished file or a .partial")
endif()
file(STRINGS ${WORK}/plans.csv lines)
list(LENGTH lines n)
if(NOT n EQUAL 130)
  message(FATAL_ERROR "plans.csv has ${n} lines, expected 130 (header + 121 legal plans + 8 baselines)")
endif()
list(GET lines 0 header)
foreach(col name plan s0_p s1_p s0_g s1_g s0_os s1_os state_bytes activation_bytes buffer_bytes total_bytes
            comm_param_s comm_grad_s comm_os_sync_s comm_os_bcast_s comm_s shared_comm_s feasible why network_model
            reserve_bytes)
  expect_in(",${header}," ",${col}," "CSV header")
endforeach()

# The objectives: the step table (projected step, exposed time per kind and axis, the paper's rank), the paper's table
# (with each plan's projected step and its rank by it), and --explain's breakdown beside the runner-up.
run(0 plan --nodes 8 --top 3 --explain)
expect_in("${OUT}" "ranked by projected step time" "default objective")
expect_in("${OUT}" "comm rank" "step table: rank under the paper's objective")
expect_in("${OUT}" "AG x" "step table: exposed inter-node all-gathers")
expect_in("${OUT}" "where the projected step goes" "--explain breakdown")
expect_in("${OUT}" "runner-up " "--explain beside the runner-up")
expect_in("${OUT}" "exposed reduce-scatters" "--explain per kind")
expect_in("${OUT}" "host (fixed per step)" "--explain host")
run(0 plan --nodes 8 --top 3 --objective comm)
expect_in("${OUT}" "summed communication time" "--objective comm")
expect_in("${OUT}" "step rank" "comm table: rank by projected step")
# A step too long to project is still ranked by the paper's objective, which prices the compressed schedule.
run(0 plan --micro-batches 20000 --objective comm --top 1)
expect_in("${OUT}" "chosen plan:" "--objective comm without projections")

# One plan, explained.
run(0 plan --model llama-13b --nodes 4 --plan zero3 --explain --csv ${WORK}/one.csv)
expect_in("${OUT}" "schedule of p=8x4,g=8x4,os=8x4" "--explain")
file(STRINGS ${WORK}/one.csv lines)
list(LENGTH lines n)
if(NOT n EQUAL 2)
  message(FATAL_ERROR "one.csv has ${n} lines, expected 2")
endif()

# The micro-batch size and recomputation: searched when not given (the chosen plan says what it runs), kept in every
# plan's row when given.
run(0 plan --model llama-13b --nodes 16 --global-batch-tokens 2M --top 1)
expect_in("${OUT}" "micro-batch searched" "plan: micro-batch searched")
expect_in("${OUT}" "recomputation searched" "plan: recomputation searched")
expect_in("${OUT}" "  runs micro-batch " "plan: the chosen micro-batch")
run(0 plan --model llama-13b --nodes 16 --global-batch-tokens 2M --micro-batch 2 --recompute-mode selective --top 1
    --csv ${WORK}/fixed.csv)
expect_in("${OUT}" "runs micro-batch 2 x M = 2 micro-batches, recomputation selective" "plan: a fixed micro-batch")
# Read as text: a reason column may hold ';', which would split a CMake list (file(STRINGS) makes one).
file(READ ${WORK}/fixed.csv text)
string(REPLACE ";" "," text "${text}")
string(REPLACE "\n" ";" lines "${text}")
list(POP_FRONT lines header)
expect_in("${header}" "seq,micro_batch_size,micro_batches,recompute," "plan CSV: workload columns")
foreach(line IN LISTS lines)
  if(line STREQUAL "")
    continue()
  endif()
  expect_in("${line}" ",4096,2,2,selective," "plan CSV: every plan at the fixed micro-batch and recomputation")
endforeach()
run(2 plan --recompute --recompute-mode none)
expect_in("${ERR}" "--recompute-mode none" "plan: --recompute against --recompute-mode")
file(REMOVE_RECURSE ${WORK})

# lins simulate's table: the memory a GPU needs is shown with the reserve (what the oom verdict compares), and a
# verdict within 5% of --gpu-mem says it depends on the reserve's assumptions.
run(0 simulate --model llama-13b --gpus 64 --strategies zero1,zero3 --out ${WORK}/sim-need.csv)
expect_in("${OUT}" "need" "simulate: the need column")
string(REGEX MATCH "zero1 +all +[0-9.]+ +[0-9.]+ +[0-9]+ +[0-9.]+% +([0-9.]+) GiB oom" zero1_row "${OUT}")
if(NOT zero1_row OR CMAKE_MATCH_1 LESS_EQUAL 80)
  message(FATAL_ERROR "simulate: zero1 at 64 GPUs should need more than 80 GiB, reserve included, and be oom:\n${OUT}")
endif()
run(0 simulate --model llama-13b --gpus 64 --strategies zero3 --gpu-mem 41GiB --out ${WORK}/sim-near.csv)
expect_in("${OUT}" "fits within 5% of --gpu-mem: depends on the reserve's assumptions" "simulate: near the limit")
# lins plan says it of its chosen plan (30B on 16 x 8 by the paper's objective needs 79.5 GiB of 80), and not of one
# far below the limit.
run(0 plan --model llama-30b --nodes 16 --objective comm --host-model off --recompute-mode full --micro-batch 1
    --global-batch-tokens 4M --top 1)
expect_in("${OUT}" "fits within 5% of the 80.00 GiB limit: the verdict depends on the reserve's assumptions"
          "plan: near the limit")
run(0 plan --model llama-13b --nodes 4 --plan zero3 --gpu-mem 1TiB)
expect_not_in("${OUT}" "within 5%" "plan: far below the limit")
