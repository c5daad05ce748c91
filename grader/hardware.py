"""Datasheet peaks that cannot be measured cheaply: dense 16-bit tensor-core throughput.

Memory bandwidth is measured on the spot (timing.copy_bandwidth_gbs); peak arithmetic is taken from the
vendor's datasheets (dense, without sparsity; fp16/bf16 inputs with fp32 accumulation):
- H100 SXM5: 989.4 TFLOP/s; H100 PCIe: 756 TFLOP/s; H100 NVL: 835 TFLOP/s ("NVIDIA H100 Tensor Core GPU" datasheet)
- H200 SXM: 989 TFLOP/s ("NVIDIA H200 Tensor Core GPU" datasheet)
- A100: 312 TFLOP/s ("NVIDIA A100 Tensor Core GPU" datasheet)
- L40S: 362 TFLOP/s; L40: 181 TFLOP/s ("NVIDIA L40S" and "NVIDIA L40" datasheets)
- L4: 121 TFLOP/s ("NVIDIA L4 Tensor Core GPU" datasheet)
- T4: 65 TFLOP/s, fp16 with mixed precision ("NVIDIA T4 Tensor Core GPU" datasheet)
"""
from __future__ import annotations

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
