"""Time a function as grading does: the grader's clock (grader.checker.timer) in its own process, the
kernel's side (grader.student.serve.timed_batches) in this one. On the CPU at a small shape (the protocol
is tested there; speed is never graded there), on a GPU at the exercise's timed shape."""
import json
import os

from conftest import DEVICE
from grader import exercises
from grader.checker.timer import Timer
from grader.student import serve

KEY = "day1.vector_add"


def time_with_the_clock(fn, folder, uid=None, key=KEY, before_kernel=None, cpu_shape=None):
    """(what the clock measured or why it refused, what the kernel's side handed over). On the CPU at
    `cpu_shape`, by default the exercise's last visible CPU shape."""
    folder = str(folder)
    os.makedirs(folder, exist_ok=True)
    if uid is not None:
        os.chown(folder, uid, uid)
    spec = exercises.get(key)
    shape = spec.speed_shape if DEVICE.is_gpu else cpu_shape or spec.cpu_shapes[-1]
    clock = Timer(folder, uid, DEVICE.torch_device)
    try:
        clock.request(key, str(spec.timed_dtype(DEVICE)).replace("torch.", ""), shape)
        if before_kernel is not None:
            before_kernel(clock)
        serve.timed_batches(fn, key, clock.socket_path, folder, "timed")
        with open(os.path.join(folder, "timed.json")) as f:
            handed = json.load(f)
        return clock.result(), handed
    finally:
        clock.close()
