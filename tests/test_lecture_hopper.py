"""Day 3 lecture 07's Hopper kernels: right in the interpreter on ragged sizes, and compiled for sm_90
by Triton's real compiler (on a machine without a GPU; on one, the course run executes the lecture)."""
import pytest
import torch

from conftest import DEVICE, on_cpu_only
from grader.lectures import hopper as H
from grader.student import gpu_compile, guard

needs_descriptors = pytest.mark.skipif(not H.has_descriptors(), reason="tl.make_tensor_descriptor is Triton 3.4+")
# float32 in the interpreter; on a GPU fp16, as the lecture times it (tl.dot of float32 would round to tf32)
DTYPE = torch.float16 if DEVICE.is_gpu else torch.float32
TOL = {"rtol": 2e-3, "atol": 2e-3} if DEVICE.is_gpu else {}
SHAPES = [(1, 8, 8), (100, 72, 40), (129, 264, 72)]   # M, N, K: edges in every dimension, K and N multiples of 8


def _randn(*shape):
    return torch.randn(*shape, device=DEVICE.torch_device).to(DTYPE)


@pytest.fixture(autouse=True)
def scratch():
    H.use_scratch_memory()


@pytest.mark.parametrize("shape", SHAPES)
def test_the_persistent_kernel_multiplies(shape):
    M, N, K = shape
    a, b = _randn(M, K), _randn(K, N)
    torch.testing.assert_close(H.matmul_persistent(a, b), a @ b, **TOL)


@needs_descriptors
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("options", [{}, {"epilogue_split": 2}, {"warp_specialize": True},
                                     {"warp_specialize": True, "epilogue_split": 2}])
def test_every_tma_variant_multiplies(shape, options):
    M, N, K = shape
    a, b = _randn(M, K), _randn(K, N)
    torch.testing.assert_close(H.matmul_tma(a, b, **options), a @ b, **TOL)
    torch.testing.assert_close(H.matmul_tma(a, b.t().contiguous(), b_transposed=True, **options), a @ b, **TOL)


@needs_descriptors
def test_a_wrong_tile_order_would_be_caught():
    """The checks above can fail: a B read as if it were not transposed gives another product."""
    a, b = _randn(64, 64), _randn(64, 64)
    assert not torch.allclose(H.matmul_tma(a, b, b_transposed=True), a @ b, atol=1e-3)


@needs_descriptors
def test_the_fp8_product_is_its_inputs_product_up_to_bfloat16_rounding():
    x, w = torch.randn(96, 64, device=DEVICE.torch_device), torch.randn(80, 64, device=DEVICE.torch_device)
    x8, sx = H.to_fp8(x)
    w8, sw = H.to_fp8(w)
    assert x8.dtype == torch.float8_e4m3fn and float(x8.float().abs().max()) == 448.0
    exact = (x8.float() * sx) @ (w8.float() * sw).t()
    got = H.matmul_fp8(x8, w8, sx, sw)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), exact, rtol=1e-2, atol=1e-2 * float(exact.abs().max()))
    # ... and FP8's own rounding is what separates it from the product of x and w (a few per cent)
    error = float((got.float() - x @ w.t()).abs().max() / (x @ w.t()).abs().max())
    assert 1e-3 < error < 0.15, error


@on_cpu_only
@needs_descriptors
def test_the_lectures_kernels_compile_for_the_grading_gpu():
    a, b = torch.randn(64, 32).half(), torch.randn(32, 64).half()
    with guard.interpreted_launches() as launches, guard.watch():
        H.matmul_persistent(a.float(), b.float())
        for options in [{}, {"epilogue_split": 2}, {"warp_specialize": True, "epilogue_split": 2}]:
            H.matmul_tma(a.float(), b.float(), **options)
        x8, sx = H.to_fp8(torch.randn(64, 32))
        H.matmul_fp8(x8, x8, sx, sx)
    judged, failures, _ = gpu_compile.check(launches)
    assert judged > 0, "nothing could be compiled"
    assert [f for f in failures if f[1] in gpu_compile.GRADING_TARGETS] == [], failures
