"""What Triton asks of its GPU driver, answered for a machine without a GPU.

In Triton's CPU interpreter no driver is active, so the parts of Triton's Python API that ask the driver
fail with "0 active drivers": `triton.runtime.driver.active.get_active_torch_device()` (Triton's own
tutorials start with it), `@triton.autotune` with more than one config (it benchmarks them), and
`triton.testing.do_bench`. Honest code written for a GPU would then fail only for want of one. This
driver answers those calls on the CPU: the device is `cpu`, and timings are wall-clock times of the
interpreted kernels (slow, and meaningless as GPU speed; the autotuner just needs an order). Anything
else (the GPU's target, its properties) is still refused, with a message that says why.
"""
from __future__ import annotations

import statistics
import time

import torch


class _WallClockEvent:
    """torch.cuda.Event's timing interface, from the host's clock (the interpreter runs synchronously)."""

    def __init__(self, enable_timing: bool = True):
        self.at = None

    def record(self, stream=None) -> None:
        self.at = time.perf_counter()

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: "_WallClockEvent") -> float:
        return (end.at - self.at) * 1e3


class _HostDevice:
    """The device interface triton.testing.do_bench uses: events and synchronize."""
    Event = _WallClockEvent

    @staticmethod
    def synchronize(device=None) -> None:
        pass


def _bench(kernel_call, quantiles=None, return_mode="mean", **_options):
    """Time one interpreted call after one warm-up, in ms: enough for an autotuner to pick a config."""
    kernel_call()
    times = []
    for _ in range(2):
        start = time.perf_counter()
        kernel_call()
        times.append((time.perf_counter() - start) * 1e3)
    if quantiles:
        return [statistics.median(times)] * len(quantiles)
    return statistics.median(times)


class InterpreterDriver:
    """Triton's active driver while kernels run in the interpreter."""

    @staticmethod
    def is_active() -> bool:
        return True

    def get_active_torch_device(self):
        return torch.device("cpu")

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device=None) -> int:
        return 0

    def get_device_interface(self):
        return _HostDevice

    def get_benchmarker(self):
        return _bench

    def get_empty_cache_for_benchmark(self):
        return torch.empty(0)

    def clear_cache(self, cache) -> None:
        pass

    def __getattr__(self, name):
        raise AttributeError(f"Triton's CPU interpreter has no GPU driver, so `driver.active.{name}` is not "
                             "available here; it works on a machine with a GPU.")


def install() -> None:
    """Make the interpreter driver Triton's active one, where no GPU driver is active."""
    from triton.runtime import driver
    if not hasattr(driver, "set_active"):    # pragma: no cover - Triton before 3.0
        return
    try:
        # Any attribute: before Triton 3.4 `active` is a lazy proxy that looks for a GPU driver only then.
        driver.active.get_current_device
    except RuntimeError:
        driver.set_active(InterpreterDriver())
