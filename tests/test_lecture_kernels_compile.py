"""The lectures' Triton kernels compile for the grading GPU (sm_90), checked on a machine without one.

Triton's CPU interpreter accepts code its compiler refuses (a plain float global read in a kernel, an
int loop-carried value that becomes a float): a lecture tested only in the interpreter can fail on
every GPU. Each case runs lecture code in the interpreter, gathers its launches, and compiles them with
Triton's real compiler for sm_90 (grader.student.gpu_compile), as the students' visible checks do.
"""
import pytest
import torch

from conftest import on_cpu_only
from grader.lectures import day5
from grader.student import gpu_compile, guard

pytestmark = on_cpu_only   # on a GPU the course run compiles and runs every lecture for real


def _targets():
    ones = torch.ones
    q = torch.randn(1, 2, 40, 16)
    h, w, t = torch.randn(9, 8), torch.randn(50, 8), torch.tensor([1, 2, -100, 4, 5, 6, 7, 8, 9])

    def attention():
        o, lse = day5.attention_forward(q, q, q, True)
        return [day5.attention_forward(q, q, q, c) for c in (False, True)] \
            + [day5.attention_backward(q, q, q, o, lse, q, c) for c in (False, True)]
    # Built lazily: collection runs on a GPU machine too, where these CPU tensors must not reach a kernel.
    return {
        "day5 column sums": lambda: [day5.column_sums(torch.randn(40, 30), m, row_programs=4, block_n=16)
                                     for m in day5.METHODS],
        "day5 dropout": lambda: [day5.seeded_dropout(ones(5000), 0.5, 1, numbers_per_call=k)
                                 for k in sorted(day5.DROPOUT_KERNELS)],
        "day5 attention": attention,
        "day5 linear cross-entropy": lambda: day5.linear_cross_entropy(h, w, t, chunk_rows=4),
        "day5 rope": lambda: [day5.rope(q), day5.rope(q, inverse=True)],
    }


@pytest.mark.parametrize("name", list(_targets()))
def test_a_lectures_kernels_compile_for_the_grading_gpu(name):
    with guard.interpreted_launches() as launches, guard.watch():
        _targets()[name]()
    judged, failures, _ = gpu_compile.check(launches)
    assert judged > 0, f"{name}: nothing could be compiled"
    assert [f for f in failures if f[1] in gpu_compile.GRADING_TARGETS] == [], failures
