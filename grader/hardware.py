"""Datasheet peaks that cannot be measured cheaply: dense 16-bit tensor-core throughput.

Memory bandwidth is measured on the spot (timing.copy_bandwidth_gbs); peak arithmetic is taken from the
vendor's datasheets (dense, without sparsity; fp16/bf16 inputs with fp32 accumulation):
- H100 SXM5: 989.4 TFLOP/s; H100 PCIe: 756 TFLOP/s; H100 NVL: 835 TFLOP/s ("NVIDIA H100 Tensor Core GPU" datasheet)
- H200 SXM: 989 TFLOP/s ("NVIDIA H200 Tensor Core GPU" datasheet)
- A100: 312 TFLOP/s ("NVIDIA A100 Tensor Core GPU" datasheet)
- L40S: 362 TFLOP/s; L40: 181 TFLOP/s ("NVIDIA L40S" and "NVIDIA L40" datasheets)
- L4: 121 TFLOP/s ("NVIDIA L4 Tensor Core GPU" datasheet)
- T4: 65 TFLOP/s, fp16 with mixed precision ("NVIDIA T4 Tensor Core GPU" datasheet)

What one streaming multiprocessor (SM) holds at once, by compute capability, from the CUDA C++
Programming Guide's table "Technical Specifications per Compute Capability": resident warps and
programs (thread blocks), 32-bit registers and shared memory per SM. Registers are handed out per warp
in units of 256, and the driver keeps 1 KB of shared memory per program for itself (the same guide,
"Shared Memory" of compute capabilities 8.x and 9.0; NVIDIA's occupancy calculator uses both).
"""
from __future__ import annotations

from dataclasses import dataclass

# (substring of torch.cuda.get_device_name(), TFLOP/s); the first match wins, so specific names first.
DENSE_16BIT_TFLOPS = (
    ("H100 PCIe", 756.0),
    ("H100 NVL", 835.0),
    ("H100", 989.4),
    ("H200", 989.4),
    ("A100", 312.0),
    ("L40S", 362.0),   # before "L40" and "L4", which its name also contains
    ("L40", 181.0),
    ("L4", 121.0),
    ("T4", 65.0),
)


def peak_tflops(device_name: str) -> float | None:
    """Dense fp16/bf16 tensor-core peak of a GPU by name, or None when the table does not know it."""
    for part, tflops in DENSE_16BIT_TFLOPS:
        if part in device_name:
            return tflops
    return None


@dataclass(frozen=True)
class SMLimits:
    warps: int            # resident warps per SM
    programs: int         # resident programs (thread blocks) per SM
    registers: int        # 32-bit registers per SM
    shared_bytes: int     # shared memory per SM
    register_unit: int = 256          # registers are allocated per warp in units of this many
    reserved_shared_bytes: int = 1024  # per program, the driver's own


SM_LIMITS = {
    (9, 0): SMLimits(warps=64, programs=32, registers=65536, shared_bytes=228 * 1024),   # H100, H200
    (8, 0): SMLimits(warps=64, programs=32, registers=65536, shared_bytes=164 * 1024),   # A100
    (7, 5): SMLimits(warps=32, programs=16, registers=65536, shared_bytes=64 * 1024, reserved_shared_bytes=0),  # T4
}


@dataclass(frozen=True)
class Occupancy:
    programs: int         # programs of this kernel that fit on one SM at once
    warps: int            # their warps
    fraction: float       # of the SM's resident warps
    limited_by: str       # "registers", "shared memory", "warps" or "programs"


def occupancy(registers: int, shared_bytes: int, num_warps: int, capability=(9, 0)) -> Occupancy | None:
    """How many programs of a kernel (registers per thread, shared memory per program, warps per
    program) one SM holds at once, and which of its resources runs out first; None for an unknown GPU."""
    sm = SM_LIMITS.get(tuple(capability))
    if sm is None or num_warps <= 0:
        return None
    per_warp = -(-max(registers, 1) * 32 // sm.register_unit) * sm.register_unit
    shared = shared_bytes + sm.reserved_shared_bytes
    fits = {"registers": sm.registers // (per_warp * num_warps),
            "shared memory": sm.shared_bytes // shared if shared else sm.programs,
            "warps": sm.warps // num_warps,
            "programs": sm.programs}
    limited_by = min(fits, key=fits.get)
    programs = fits[limited_by]
    return Occupancy(programs, programs * num_warps, programs * num_warps / sm.warps, limited_by)
