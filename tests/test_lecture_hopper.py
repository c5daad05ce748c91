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


def _attention64(q, k, v, causal):
    """Attention in float64, the way a textbook writes it."""
    scores = q.double() @ k.double().transpose(-1, -2) / q.shape[-1] ** 0.5
    if causal:
        n = q.shape[-2]
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return (torch.softmax(scores, -1) @ v.double()).to(q.dtype)


@needs_descriptors
@pytest.mark.parametrize("shape", [(1, 1, 1, 16), (2, 3, 37, 16), (1, 2, 48, 32), (1, 1, 70, 64)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("warp_specialize", [False, True])
def test_the_tma_attention_matches_the_textbook_on_ragged_sizes(shape, causal, warp_specialize):
    # N of 1, 37 and 70 leave a ragged last block (rows past N: zeros in, nothing out); 48 is whole blocks,
    # so its non-causal loop runs unmasked only. Several heads: a block never reads the next head's rows.
    q, k, v = (_randn(*shape) for _ in range(3))
    got = H.attention_tma(q, k, v, causal, warp_specialize=warp_specialize)
    torch.testing.assert_close(got, _attention64(q, k, v, causal), **({"rtol": 2e-2, "atol": 2e-2} if DEVICE.is_gpu else {}))
    if shape[2] > 1:   # the check can fail: the other masking is another result
        assert not torch.allclose(got, _attention64(q, k, v, not causal), atol=1e-3)


@needs_descriptors
@pytest.mark.parametrize("shape", [(1, 1, 1, 16), (2, 3, 37, 16), (1, 2, 64, 32), (1, 1, 70, 64)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("layout", ["contiguous", "parts of one projection"])
@pytest.mark.parametrize("config", [None, (16, 32, 4, 1), (32, 16, 4, 1)])
def test_the_two_halves_attention_matches_the_textbook(shape, causal, layout, config):
    # N of 1, 37 and 70 end in a ragged block, and with 37 the second half starts past N; several heads
    # and batches: each half keeps its own running maximum and sum, and no block reads the next head's
    # rows. The projection's parts are views with a row stride of 3 heads x d (Day 4's block). Key blocks
    # twice a half (head dim 64 on the GPU) and half of one move the masked blocks' boundaries.
    b, h, n, d = shape
    if layout == "contiguous":
        q, k, v = (_randn(*shape) for _ in range(3))
    else:
        q, k, v = _randn(b, n, 3, h, d).permute(2, 0, 3, 1, 4)
    got = H.attention_halves(q, k, v, causal, config)
    torch.testing.assert_close(got, _attention64(q, k, v, causal), **({"rtol": 2e-2, "atol": 2e-2} if DEVICE.is_gpu else {}))
    if n > 1:   # the check can fail: the other masking is another result
        assert not torch.allclose(got, _attention64(q, k, v, not causal), atol=1e-3)
    out = torch.empty(b, n, h, d, device=q.device, dtype=q.dtype)     # heads side by side (merge_heads)
    H.attention_halves(q, k, v, causal, config, out=out.transpose(1, 2))
    torch.testing.assert_close(out.transpose(1, 2), got, rtol=0, atol=0)


def test_the_two_halves_attention_refuses_what_tma_cannot_move():
    q = torch.zeros(1, 1, 40, 16)
    with pytest.raises(ValueError, match="head dim"):
        H.attention_halves(torch.zeros(1, 1, 32, 24), q, q)
    rows_18_apart = torch.zeros(1, 1, 40, 18)[..., :16]         # 72 bytes between rows: not a multiple of 16
    with pytest.raises(ValueError, match="k: .* multiples of 16 bytes"):
        H.attention_halves(q, rows_18_apart, q)
    with pytest.raises(ValueError, match="v: .* contiguous head dim"):
        H.attention_halves(q, q, torch.zeros(1, 1, 16, 40).transpose(-1, -2))
    with pytest.raises(ValueError, match="out: "):
        H.attention_halves(q, q, q, out=torch.zeros(1, 1, 40, 32))
    starts_8_bytes_in = torch.zeros(700)[2:642].view(1, 1, 40, 16)
    with pytest.raises(ValueError, match="q: .* its start and strides multiples of 16 bytes"):
        H.attention_halves(starts_8_bytes_in, q, q)


@on_cpu_only
@needs_descriptors
def test_the_lectures_kernels_compile_for_the_grading_gpu(monkeypatch):
    # Twelve launches for two GPUs in one child: past a student check's 120 s on a busy 2-core machine (it
    # returned "nothing judged" at 122 s); the question here is whether they compile, not how fast.
    monkeypatch.setattr(gpu_compile, "TIMEOUT_S", 600)
    # Hopper's kernels are for Hopper: compiling them for Colab's T4 as well (where TMA and wgmma do not
    # exist) doubled the test's time and could not change its verdict.
    monkeypatch.setattr(gpu_compile, "TARGETS", gpu_compile.GRADING_TARGETS)
    a, b = torch.randn(64, 32).half(), torch.randn(32, 64).half()
    with guard.interpreted_launches() as launches, guard.watch():
        H.matmul_persistent(a.float(), b.float())
        for options in [{}, {"epilogue_split": 2}, {"warp_specialize": True, "epilogue_split": 2}]:
            H.matmul_tma(a.float(), b.float(), **options)
        x8, sx = H.to_fp8(torch.randn(64, 32))
        H.matmul_fp8(x8, x8, sx, sx)
        q = torch.randn(1, 1, 8, 64)
        for config, causal, ws in [((128, 64, 8, 3), False, False), ((128, 128, 8, 2), True, True)]:
            H.attention_tma(q, q, q, causal, config, ws)
        q = torch.randn(1, 1, 100, 64)
        for config, causal in [((64, 64, 4, 2), False), ((64, 128, 4, 2), True)]:
            H.attention_halves(q, q, q, causal, config)
    judged, failures, _ = gpu_compile.check(launches)
    assert judged > 0, "nothing could be compiled"
    assert [f for f in failures if f[1] in gpu_compile.GRADING_TARGETS] == [], failures
