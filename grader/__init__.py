"""The course's grader: device set-up, correctness, speed and honesty checks for Triton exercises.

Notebooks use it as:

    import grader
    dev = grader.setup()                        # first: picks the GPU or Triton's CPU interpreter
    grader.check("day1.vector_add", add)        # correctness (raises with a teaching message)
    grader.check_speed("day1.vector_add", add)  # speed vs PyTorch on the GPU (returns the points)
"""
from .checks import (GPURequired, check, check_prediction, check_prediction_on_gpu, check_speed,
                     credit, grading, report_speed)
from .compare import CheckFailed
from .device import Device, current, setup
from .timing import bench

__all__ = ["setup", "current", "Device", "check", "check_speed", "check_prediction",
           "check_prediction_on_gpu", "report_speed", "credit", "grading", "bench", "CheckFailed", "GPURequired"]
