"""DeepSpeed ZeRO++'s quantizers (qwZ int8 weights, qgZ int4 gradients) in numpy: a second, independent
transcription of DeepSpeed's CUDA kernels and Python glue, to hold lins's C++/CUDA versions (kernels/quantize.h) to.

Read from DeepSpeed at commit edaa7221267243c7be7fb49c5d5f5c4fb97b4641 (paths and lines below are at that commit).
It follows the kernels' own indexing where lins's code is written differently: the swizzle through the launch grid
(blockIdx.x, blockIdx.z), the reduction through pt_binding.cpp's byte counts and dequant_reduce's 4-byte loads.
fp16 is numpy's float16: a float16 + float16 is computed in float32 and rounded once to float16, which equals the
GPU's correctly rounded fp16 add (24 >= 2 * 11 + 2 bits: the double rounding is innocuous); float32 products and
quotients are IEEE (no --use_fast_math: where DeepSpeed's approximate divisions differ, see docs/engines.md).

Functions take and return numpy arrays: inputs float32 (rounded to float16 first, as DeepSpeed quantizes fp16
tensors), int4 payloads uint8 (two values a byte), scales float32 (one inv_scale a block).
"""

import math

import numpy as np

# partition_parameters.py:848
TARGET_GROUP_SIZE = 8000


def qwz_group_count(numel):
    """CUDAQuantizer.quantize's block count for a buffer of numel elements (partition_parameters.py:856-878),
    0 where DeepSpeed fails: the asserts at :872-877, or numel == 0 (groups = 0, then numel % 0 raises)."""
    if numel <= 0:
        return 0
    groups = math.ceil(numel / TARGET_GROUP_SIZE)
    while groups < numel:
        if numel % (8 * groups) == 0:
            break
        groups += 1
    while True:
        if numel % (8 * groups * 2) == 0 and numel / groups > TARGET_GROUP_SIZE:
            groups *= 2
        else:
            break
    if numel % (8 * groups) != 0 or not numel / groups < 16000 or not numel > groups:
        return 0
    return groups


def to_fp16(x):
    """CUDAQuantizer.quantize: param.to(dtype=torch.half) (partition_parameters.py:882); a float32 array here."""
    with np.errstate(over="ignore"):
        return np.asarray(x, dtype=np.float32).astype(np.float16)


def _scale(amax, bits):
    """quantization_utils.h:56-63, Params<Symmetric>(max): (1 << numBits) / (2 * max), 1.0 when max == 0.
    amax float32; returns scale (float32)."""
    amax = np.asarray(amax, dtype=np.float32)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        scale = np.float32(1 << bits) / (np.float32(2.0) * amax)
    return np.where(amax == 0, np.float32(1.0), scale).astype(np.float32)


def _block_amax(h16):
    """GroupStats<Symmetric> (quantization_utils.h:170-203): cur_max starts at -inf (reduction_utils.h:412-421),
    updated with __hmax2 of __habs2 (reduction_utils.h:234-244; NaN-ignoring on sm_80+), then reduced as floats
    with fmaxf. h16 has shape (blocks, size); returns float32 (blocks,)."""
    return np.fmax.reduce(np.abs(h16), axis=1, initial=-np.inf).astype(np.float32)


def _quantize_values(h16, scale, bits):
    """Params<Symmetric>::quantize (quantization_utils.h:65-74): float(val) * scale in fp32, __float2int_rn
    (conversion_utils.h:498-501: nearest even; NaN converts to 0), clamped to [-2^(b-1), 2^(b-1) - 1]."""
    with np.errstate(invalid="ignore", over="ignore"):
        v = h16.astype(np.float32) * scale
    v = np.where(np.isnan(v), np.float32(0.0), v)
    q = np.clip(np.rint(v), -(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    return q.astype(np.int8)


def _dequantize_values(q, inv_scale):
    """Params<Symmetric>::dequantize (quantization_utils.h:76-81) with the stored 1/scale loaded as `scale`
    (:83-92): __float2half(float(q) * scale), conversion_utils.h:276-279."""
    with np.errstate(invalid="ignore", over="ignore"):
        return (q.astype(np.float32) * inv_scale).astype(np.float16)


def _pack_int4(q):
    """_chunk (quantization_utils.h:344-362) stores PackedInt4{data_i8_2, data_i8_1}: the struct (quantization.h:15-18)
    declares `high` first, and a first bit-field takes the low-order bits of its byte on the little-endian targets,
    so element i + 1 (stored as .high) sits in bits 0-3 and element i (.low) in bits 4-7."""
    q = q.astype(np.int16).reshape(-1, 2)
    return (((q[:, 0] & 0xF) << 4) | (q[:, 1] & 0xF)).astype(np.uint8)


def _unpack_int4(packed):
    """dequantize::chunk (dequantization_utils.h:67-83): output 2i is .low (bits 4-7), 2i + 1 is .high (bits 0-3),
    each a signed 4-bit field."""
    b = np.asarray(packed, dtype=np.uint8).astype(np.int16)
    out = np.empty(b.size * 2, dtype=np.int16)
    out[0::2] = b >> 4
    out[1::2] = b & 0xF
    return np.where(out >= 8, out - 16, out).astype(np.int8)


def quantize(x, groups, bits):
    """quantizer_module.quantize(t, groups, bits, Symmetric): pt_binding.cpp:68-104 (launch_quant, quantize.cu:92-150,
    contiguous blocks of numel / groups). Returns (payload, inv_scales): int8 values for 8 bits, packed bytes for 4."""
    h = to_fp16(x).reshape(groups, -1)
    scale = _scale(_block_amax(h), bits)[:, None]
    q = _quantize_values(h, scale, bits).reshape(-1)
    with np.errstate(divide="ignore"):
        inv = (np.float32(1.0) / scale[:, 0]).astype(np.float32)  # Params::store (quantization_utils.h:83-87)
    return (q if bits == 8 else _pack_int4(q)), inv


def dequantize(payload, inv_scales, groups, bits):
    """quantizer_module.dequantize(q, scales, groups, bits, Symmetric): pt_binding.cpp:106-137 -> fp16 output,
    dequantize.cu / dequantization_utils.h:92-157 (element e uses scale e // (total / groups)). Returns float16."""
    q = np.asarray(payload).view(np.int8) if bits == 8 else _unpack_int4(payload)
    per_group = q.size // groups
    inv = np.repeat(np.asarray(inv_scales, dtype=np.float32), per_group)
    return _dequantize_values(q, inv)


def swizzle_quant(x, groups, nodes, devices_per_node, bits=4, pipelining=1):
    """quantizer_module.swizzle_quant (pt_binding.cpp:226-267, swizzled_quantize.cu:21-83 and :107-159), following the
    launch grid (contiguous_groups, pipelining, partitions) and the kernel's block_rank / output_partition formulas."""
    h = to_fp16(x)
    elems_per_group = h.size // groups
    partitions = nodes * devices_per_node
    groups_per_partition = groups // partitions
    contiguous_groups = groups_per_partition // pipelining
    bytes_per_group = elems_per_group * bits // 8
    out = np.zeros(h.size * bits // 8, dtype=np.uint8)
    scales = np.zeros(groups, dtype=np.float32)
    for z in range(partitions):  # blockIdx.z
        for y in range(pipelining):  # blockIdx.y
            for xb in range(contiguous_groups):  # blockIdx.x
                block_rank = xb + y * contiguous_groups + z * contiguous_groups * pipelining
                block = h[block_rank * elems_per_group:(block_rank + 1) * elems_per_group]
                partition_offset = z // devices_per_node
                partition_base = (z % devices_per_node) * nodes
                pipelining_offset = y * (devices_per_node * nodes)
                output_partition = pipelining_offset + partition_base + partition_offset
                out_block_rank = output_partition * contiguous_groups + xb
                payload, inv = quantize(block.astype(np.float32), 1, bits)
                out[out_block_rank * bytes_per_group:(out_block_rank + 1) * bytes_per_group] = payload.view(np.uint8)
                scales[out_block_rank] = inv[0]
    return out, scales


def quantized_reduction(input_vals, input_scales, in_groups, out_groups, devices_per_node, bits=4):
    """quantizer_module.quantized_reduction (pt_binding.cpp:269-313) and dequant_reduce (quant_reduce.cu:20-127):
    the sizes are pt_binding's, in bytes of the int8 payload tensor; each thread block (one per out group) walks its
    bytes 4 at a time (8 int4 values), dequantizes them from every peer j with scale
    input_scales[j * groups_per_in_tensor + iter_offset // elems_per_in_group], sums the fp16 values from +0 in peer
    order (:56-57, :63-84), and requantizes the block's sums (:109-126). Returns (payload, scales)."""
    assert bits == 4
    data = np.asarray(input_vals, dtype=np.uint8)
    numel = data.size  # at::numel(input_vals): bytes
    elems_per_in_tensor = numel // devices_per_node
    groups_per_in_tensor = in_groups // devices_per_node
    elems_per_in_group = elems_per_in_tensor // groups_per_in_tensor
    elems_per_out_group = elems_per_in_tensor // out_groups
    mem_granularity = 4
    reduced = np.zeros(elems_per_in_tensor, dtype=np.uint8)
    reduced_scales = np.zeros(out_groups, dtype=np.float32)
    offsets = np.arange(0, elems_per_out_group, mem_granularity)
    for b in range(out_groups):  # blockIdx.x
        iter_offsets = b * elems_per_out_group + offsets
        sums = np.zeros((offsets.size, 2 * mem_granularity), dtype=np.float16)
        for j in range(devices_per_node):
            loads = data[j * elems_per_in_tensor + iter_offsets[:, None] + np.arange(mem_granularity)]
            scale = input_scales[j * groups_per_in_tensor + iter_offsets // elems_per_in_group].astype(np.float32)
            deq = _dequantize_values(_unpack_int4(loads.reshape(-1)).reshape(offsets.size, -1), scale[:, None])
            with np.errstate(over="ignore", invalid="ignore"):
                sums = sums + deq
        payload, inv = quantize(sums.reshape(-1).astype(np.float32), 1, bits)
        reduced[b * elems_per_out_group:(b + 1) * elems_per_out_group] = payload
        reduced_scales[b] = inv[0]
    return reduced, reduced_scales


def chunk_sum_divide(final_output, num_nodes, divisor=None):
    """coalesced_collectives.py:75: sum(list(final_output.chunk(num_nodes))) / num_nodes on an fp16 tensor (or divided
    by `divisor`, lins's option, instead of num_nodes). Python's
    sum starts from the int 0 (0 + chunk is an fp16 add: -0 becomes +0), adds the chunks in order in fp16, and
    PyTorch divides an fp16 CUDA tensor by a Python number as a multiply by the opmath (fp32) reciprocal
    (pytorch aten/src/ATen/native/cuda/BinaryDivTrueKernel.cu, div_true_kernel_cuda, is_cpu_scalar branch)."""
    chunks = np.split(np.asarray(final_output, dtype=np.float16), num_nodes)
    total = np.float16(0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        for c in chunks:
            total = total + c
        inv_b = np.float32(1.0) / np.float32(num_nodes if divisor is None else divisor)
        return (total.astype(np.float32) * inv_b).astype(np.float16)


def dequantize_reduce(global_output, global_scales, num_nodes, divisor=None):
    """coalesced_collectives.py:71-75: dequantize(global_output, scales, scales.numel(), 4) then the chunk sum over
    nodes divided by num_nodes (or by `divisor`, lins's option)."""
    final_output = dequantize(global_output, global_scales, np.asarray(global_scales).size, 4)
    return chunk_sum_divide(final_output, num_nodes, divisor)


def qgz_group_count(shape, world):
    """coalesced_collectives.py:54: intra_quant_group = max(shape[0], shape[1], global_world_size)."""
    return max(shape[0], shape[1], world)


def qgz_deepspeed_quantizes(shape, nodes, devices_per_node):
    """stage3.py:1804-1813 (num_nodes > 1) and coalesced_collectives.py:43-52 (dim() == 1 and numel % (2 W) != 0
    fall back to reduce_scatter_coalesced)."""
    world = nodes * devices_per_node
    numel = int(np.prod(shape, dtype=np.int64)) if len(shape) else 1
    if nodes <= 1 or len(shape) == 1 or numel % (2 * world) != 0:
        return False
    return True


def all_to_all_quant_reduce(grads, shape, nodes, devices_per_node, divisor=None):
    """coalesced_collectives.py:31-76 on W = nodes * devices_per_node emulated ranks: grads[r] is rank r's gradient
    (flat float32). The all-to-alls (:62-63 on the node's group, :69-70 on the ranks with the same local index;
    groups.py:672-698) are array slices. Returns each rank's output (float16, numel / W values)."""
    world = nodes * devices_per_node
    numel = grads[0].size
    intra_quant_group = qgz_group_count(shape, world)
    inter_quant_group = intra_quant_group // devices_per_node
    sent = [swizzle_quant(g, intra_quant_group, nodes, devices_per_node) for g in grads]
    chunk_bytes = numel // 2 // devices_per_node
    chunk_scales = intra_quant_group // devices_per_node
    reduced = [None] * world
    for node in range(nodes):
        for k in range(devices_per_node):
            peers = [node * devices_per_node + j for j in range(devices_per_node)]
            local_output = np.concatenate([sent[p][0][k * chunk_bytes:(k + 1) * chunk_bytes] for p in peers])
            scale_output = np.concatenate([sent[p][1][k * chunk_scales:(k + 1) * chunk_scales] for p in peers])
            reduced[node * devices_per_node + k] = quantized_reduction(local_output, scale_output, intra_quant_group,
                                                                       inter_quant_group, devices_per_node)
    out = [None] * world
    slice_bytes = chunk_bytes // nodes
    slice_scales = inter_quant_group // nodes
    for k in range(devices_per_node):
        for node in range(nodes):
            srcs = [m * devices_per_node + k for m in range(nodes)]
            global_output = np.concatenate([reduced[s][0][node * slice_bytes:(node + 1) * slice_bytes] for s in srcs])
            global_scales = np.concatenate(
                [reduced[s][1][node * slice_scales:(node + 1) * slice_scales] for s in srcs])
            out[node * devices_per_node + k] = dequantize_reduce(global_output, global_scales, nodes, divisor)
    return out
