"""Unit tests for grader/lectures/day5.py: column sums across programs, and sums in different orders."""
import numpy as np
import pytest
import torch

from conftest import DEVICE
from grader.lectures import day5 as L


@pytest.mark.parametrize("method", L.METHODS)
@pytest.mark.parametrize("shape, row_programs, block_n", [
    ((1, 1), 4, 16), ((37, 300), 4, 64), ((100, 33), 7, 16), ((257, 130), 64, 128), ((64, 64), 1, 64),
])
def test_every_method_adds_up_the_columns(method, shape, row_programs, block_n):
    gen = torch.Generator(device=DEVICE.torch_device).manual_seed(0)
    x = torch.randn(shape, generator=gen, device=DEVICE.torch_device)
    got = L.column_sums(x, method, row_programs=row_programs, block_n=block_n)
    assert got.dtype == torch.float32 and got.shape == (shape[1],)
    torch.testing.assert_close(got.double(), x.double().sum(0), atol=1e-4, rtol=1e-5)


def test_rows_with_a_stride_and_16_bit_values_are_summed_in_float32():
    x = torch.randn(64, 200, device=DEVICE.torch_device).half()[:, :150]   # rows 200 apart
    torch.testing.assert_close(L.column_sums(x, "two stages", row_programs=8, block_n=64).double(),
                               x.double().sum(0), atol=1e-3, rtol=1e-4)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="method"):
        L.column_sums(torch.zeros(2, 2), "magic")
    with pytest.raises(ValueError, match="contiguous"):
        L.column_sums(torch.zeros(4, 4).t(), "atomics")


def test_the_two_stage_sum_gives_the_same_bits_every_time():
    x = torch.randn(512, 64, device=DEVICE.torch_device)
    assert L.distinct_results(lambda: L.column_sums(x, "two stages", row_programs=32, block_n=64), runs=3) == 1


def test_the_last_program_adds_the_partial_rows_as_the_second_stage_does_bit_for_bit():
    # The same bands and the same order of additions: the same bits, on every run. A last program that
    # missed a band's row (read before it was written, or from a stale cache) or added in another order
    # would differ. On a GPU thousands of programs race to be last.
    rows, cols, bands = (16384, 4096, 512) if DEVICE.is_gpu else (300, 130, 16)
    x = torch.randn(rows, cols, device=DEVICE.torch_device)
    two_stages = L.column_sums(x, "two stages", row_programs=bands, block_n=128)
    for _ in range(20 if DEVICE.is_gpu else 2):
        assert torch.equal(L.column_sums(x, "last program", row_programs=bands, block_n=128), two_stages)


def test_the_same_float32_numbers_added_in_other_orders_round_differently():
    values = np.random.default_rng(1).standard_normal(10_000).astype(np.float32) * 1000
    sums = L.sums_in_random_orders(values, orders=20)
    assert sums.dtype == np.float32 and len(sums) == 20
    assert len(set(sums.tolist())) > 1                                    # not one answer
    exact = float(np.sum(values.astype(np.float64)))
    assert np.max(np.abs(sums.astype(np.float64) - exact)) < 1e-3 * np.sum(np.abs(values))   # all close


@pytest.mark.parametrize("per_call", sorted(L.DROPOUT_KERNELS))
def test_seeded_dropout_keeps_about_1_minus_p_and_scales_what_it_keeps(per_call):
    x = torch.rand(65_536 + 300, device=DEVICE.torch_device) + 1       # never 0: a 0 out means dropped
    for p in (0.1, 0.5):
        y = L.seeded_dropout(x, p, seed=7, numbers_per_call=per_call)
        kept = y != 0
        rate = kept.float().mean().item()
        assert abs(rate - (1 - p)) < 4 * (p * (1 - p) / x.numel()) ** 0.5 + 1e-3, (p, rate)
        torch.testing.assert_close(y[kept], x[kept] / (1 - p))


@pytest.mark.parametrize("per_call", sorted(L.DROPOUT_KERNELS))
def test_the_mask_is_a_function_of_the_seed(per_call):
    x = torch.ones(10_000, device=DEVICE.torch_device)
    a, b, c = (L.seeded_dropout(x, 0.5, seed=s, numbers_per_call=per_call) for s in (1, 1, 2))
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert torch.equal(L.seeded_dropout(x, 0.0, seed=3, numbers_per_call=per_call), x)   # p = 0: all, unscaled


def test_four_numbers_per_call_drop_independently_in_each_quarter():
    # The four numbers of one Philox call serve four elements a quarter block apart: their masks must not
    # agree more often than chance (an element and its neighbour a quarter away both kept: (1 - p)^2).
    y = L.seeded_dropout(torch.ones(1024 * 64, device=DEVICE.torch_device), 0.5, seed=5, block=1024)
    kept = (y != 0).reshape(64, 4, 256).float()
    for k in range(1, 4):
        both = (kept[:, 0] * kept[:, k]).mean().item()
        assert abs(both - 0.25) < 0.02, (k, both)


def test_the_backward_draws_the_forwards_mask_again():
    # Values that are never 0 (torch.randn can return an exact 0), so that 0 means dropped.
    x = (torch.rand(5000, device=DEVICE.torch_device) + 1).requires_grad_()
    y = L.SeededDropout.apply(x, 0.3, 11)
    dy = torch.rand_like(y) + 1
    (dx,) = torch.autograd.grad(y, x, dy)
    assert torch.equal(dx != 0, y != 0)
    torch.testing.assert_close(dx, torch.where(y != 0, dy / 0.7, 0.0))


def test_dropout_arguments_are_checked():
    with pytest.raises(ValueError, match="p must"):
        L.seeded_dropout(torch.ones(4), 1.0, 0)
    with pytest.raises(ValueError, match="contiguous"):
        L.seeded_dropout(torch.ones(4, 4).t(), 0.5, 0)
    with pytest.raises(ValueError, match="numbers_per_call"):
        L.seeded_dropout(torch.ones(4), 0.5, 0, numbers_per_call=2)


def _attention_and_grads_float64(q, k, v, do, causal):
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    o = torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=causal)
    return o, torch.autograd.grad(o, leaves, do.double())


# Ragged N (one key block, several, a last one cut short), causal and not, tiles of unequal sizes (the
# causal sweeps' start and end are computed from both), head dims 16 and 32.
@pytest.mark.parametrize("shape, causal, tiles", [
    ((1, 1, 1, 16), False, None), ((1, 2, 37, 16), True, None), ((2, 1, 50, 32), False, None),
    ((1, 1, 64, 16), True, None),
    ((1, 1, 70, 16), True, {"forward": (16, 32, 4, 1), "dkdv": (16, 32, 4, 1), "dq": (32, 16, 4, 1)}),
    ((1, 1, 45, 16), True, {"forward": (32, 16, 4, 1), "dkdv": (32, 16, 4, 1), "dq": (16, 32, 4, 1)}),
])
def test_flash_attention_forward_and_backward_match_float64(shape, causal, tiles):
    gen = torch.Generator(device=DEVICE.torch_device).manual_seed(1)
    q, k, v, do = (torch.randn(shape, generator=gen, device=DEVICE.torch_device) for _ in range(4))
    o, lse = L.attention_forward(q, k, v, causal, tiles)
    grads = L.attention_backward(q, k, v, o, lse, do, causal, tiles)
    want_o, want_grads = _attention_and_grads_float64(q, k, v, do, causal)
    torch.testing.assert_close(o.double(), want_o, atol=2e-5, rtol=1e-4)
    for name, got, want in zip("qkv", grads, want_grads):
        torch.testing.assert_close(got.double(), want, atol=2e-5, rtol=1e-4, msg=lambda m: f"d{name}: {m}")


def test_the_forward_stores_each_rows_log2_sum_of_exponentials():
    q, k, v = (torch.randn(1, 1, 20, 16, device=DEVICE.torch_device) for _ in range(3))
    _, lse = L.attention_forward(q, k, v, causal=True)
    scores = (q @ k.transpose(-1, -2))[0, 0].double() / 4 + torch.full((20, 20), float("-inf")).triu(1).double()
    torch.testing.assert_close(lse[0].double(), torch.logsumexp(scores, dim=-1) * L.LOG2E, atol=1e-5, rtol=1e-5)


def test_flash_attention_is_an_autograd_function_of_q_k_and_v():
    q, k, v = (torch.randn(1, 2, 24, 16, device=DEVICE.torch_device).transpose(1, 2).requires_grad_()
               for _ in range(3))                  # not contiguous: the Function makes them so
    o = L.flash_attention(q, k, v, True)
    do = torch.randn_like(o)
    got = torch.autograd.grad(o, (q, k, v), do)
    want_o, want = _attention_and_grads_float64(q, k, v, do, True)
    torch.testing.assert_close(o.double(), want_o, atol=2e-5, rtol=1e-4)
    for g, w in zip(got, want):
        torch.testing.assert_close(g.double(), w, atol=2e-5, rtol=1e-4)
    with pytest.raises(ValueError, match="head dim"):
        L.attention_forward(*(torch.zeros(1, 1, 4, 24) for _ in range(3)), causal=False)


# -- linear + cross-entropy in chunks (lecture 04) --

from conftest import on_cpu_only  # noqa: E402  (this section's own import, kept with it)


def _cross_entropy_reference(logits, targets, count):
    """Per-row losses and the gradient of sum(losses) / count, in float64; ignored rows 0."""
    z = logits.double()
    keep = targets != L.IGNORE_INDEX
    safe = torch.where(keep, targets, 0)
    losses = torch.where(keep, torch.logsumexp(z, 1) - z.gather(1, safe[:, None])[:, 0], 0.0)
    grad = torch.softmax(z, 1) - torch.nn.functional.one_hot(safe, z.shape[1]).double()
    return losses, torch.where(keep[:, None], grad, 0.0) / max(count, 1)


# Vocabularies that are not multiples of the block (and one shorter than it), a single column, rows with
# a stride, ignored rows; the scale is a count of the whole batch, not of this chunk.
@pytest.mark.parametrize("rows, vocab, block, row_stride", [
    (5, 1000, 64, 1000), (9, 1, 16, 1), (7, 100, 128, 100), (12, 333, 32, 400), (3, 4096, 1024, 4096),
])
def test_the_kernel_stores_each_rows_loss_and_overwrites_it_with_the_gradient(rows, vocab, block, row_stride):
    gen = torch.Generator(device=DEVICE.torch_device).manual_seed(2)
    storage = 4 * torch.randn(rows, row_stride, generator=gen, device=DEVICE.torch_device)
    logits = storage[:, :vocab]
    targets = torch.randint(0, vocab, (rows,), generator=gen, device=DEVICE.torch_device)
    targets[1::3] = L.IGNORE_INDEX
    targets[0] = vocab - 1                                 # the last column, in the last (short) block
    count = 11                                             # rows counted in the whole batch
    scale = torch.tensor([1 / count], device=DEVICE.torch_device)
    want_losses, want_grad = _cross_entropy_reference(logits, targets, count)
    losses = L.cross_entropy_and_grad_(logits, targets, scale, block=block)
    assert losses.dtype == torch.float32
    torch.testing.assert_close(losses.double(), want_losses, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(logits.double(), want_grad, atol=1e-6, rtol=1e-5)
    if row_stride > vocab:                                 # the columns beyond the row are left alone
        assert not torch.equal(storage[:, vocab:], torch.zeros_like(storage[:, vocab:]))


def test_the_kernel_writes_the_gradient_in_the_logits_dtype_and_zeros_ignored_rows():
    logits = (3 * torch.randn(6, 300, device=DEVICE.torch_device)).to(torch.float16)
    targets = torch.tensor([5, -100, 0, 299, -100, 7], device=DEVICE.torch_device)
    want_losses, want_grad = _cross_entropy_reference(logits, targets, 4)
    losses = L.cross_entropy_and_grad_(logits, targets, torch.tensor([0.25], device=DEVICE.torch_device),
                                       block=64)
    assert logits.dtype == torch.float16
    assert torch.equal(logits[[1, 4]], torch.zeros_like(logits[[1, 4]])) and losses[[1, 4]].tolist() == [0, 0]
    torch.testing.assert_close(losses.double(), want_losses, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(logits.double(), want_grad, atol=1e-4, rtol=1e-3)


def _loss_and_grads_float64(h, w, targets, grad_loss):
    hd, wd = (t.detach().double().requires_grad_() for t in (h, w))
    loss = torch.nn.functional.cross_entropy(hd @ wd.T, targets, ignore_index=L.IGNORE_INDEX)
    return loss, torch.autograd.grad(loss, (hd, wd), torch.tensor(grad_loss, dtype=torch.float64))


# Chunks that divide N, that do not (the last chunk short), of one row, and larger than N; the ignored
# rows all in the first chunk, so that a mean per chunk, or over all N rows, comes out wrong.
@pytest.mark.parametrize("n, d, vocab, chunk", [(37, 32, 1000, 16), (32, 16, 77, 8), (10, 8, 50, 1),
                                                (37, 32, 1000, 100), (5, 4, 3, 2)])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_the_chunked_loss_and_its_gradients_match_float64_autograd(n, d, vocab, chunk, dtype):
    gen = torch.Generator(device=DEVICE.torch_device).manual_seed(3)
    h = torch.randn(n, d, generator=gen, device=DEVICE.torch_device, dtype=dtype).requires_grad_()
    w = (torch.randn(vocab, d, generator=gen, device=DEVICE.torch_device, dtype=dtype) / d ** 0.5).requires_grad_()
    targets = torch.randint(0, vocab, (n,), generator=gen, device=DEVICE.torch_device)
    targets[: max(1, min(chunk, n) // 2)] = L.IGNORE_INDEX
    loss = L.linear_cross_entropy(h, w, targets, chunk)
    assert loss.dtype == dtype and loss.shape == ()
    gh, gw = torch.autograd.grad(loss * 2.5, (h, w))       # the backward scales by the incoming gradient
    assert gh.dtype == dtype and gw.dtype == dtype
    want_loss, (want_gh, want_gw) = _loss_and_grads_float64(h, w, targets, 2.5)
    tol = dict(atol=1e-6, rtol=1e-5) if dtype == torch.float64 else dict(atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(loss.double(), want_loss, **tol)
    torch.testing.assert_close(gh.double(), want_gh, **tol)
    torch.testing.assert_close(gw.double(), want_gw, **tol)


def test_the_weights_gradient_can_be_accumulated_in_another_dtype_and_inputs_need_not_be_contiguous():
    gen = torch.Generator(device=DEVICE.torch_device).manual_seed(4)
    h = torch.randn(40, 24, generator=gen, device=DEVICE.torch_device).T.requires_grad_()      # strided
    w = torch.randn(129, 40, generator=gen, device=DEVICE.torch_device).requires_grad_()
    targets = torch.randint(0, 129, (24,), generator=gen, device=DEVICE.torch_device)
    targets[5] = L.IGNORE_INDEX
    want_loss, want = _loss_and_grads_float64(h, w, targets, 1.0)
    for acc in (torch.float64, torch.float32):             # add_ of a product, or addmm_ in place
        loss = L.linear_cross_entropy(h, w, targets, 7, grad_weight_dtype=acc)
        got = torch.autograd.grad(loss, (h, w))
        torch.testing.assert_close(loss.double(), want_loss, atol=1e-5, rtol=1e-5)
        for g, r in zip(got, want):
            assert g.dtype == torch.float32
            torch.testing.assert_close(g.double(), r, atol=1e-5, rtol=1e-4)


def test_a_weight_without_requires_grad_gets_no_gradient_and_a_second_backward_is_refused():
    h = torch.randn(9, 8, device=DEVICE.torch_device, requires_grad=True)
    w = torch.randn(30, 8, device=DEVICE.torch_device)
    targets = torch.randint(0, 30, (9,), device=DEVICE.torch_device)
    loss = L.linear_cross_entropy(h, w, targets, 4)
    (gh,) = torch.autograd.grad(loss, h, retain_graph=True)
    torch.testing.assert_close(gh.double(), _loss_and_grads_float64(h, w, targets, 1.0)[1][0], atol=1e-5, rtol=1e-4)
    with pytest.raises(RuntimeError, match="one backward pass"):
        torch.autograd.grad(loss, h)


def test_when_every_row_is_ignored_the_loss_and_the_gradients_are_zero():
    # F.cross_entropy returns 0/0 = NaN here; the chunked loss defines it as 0, with zero gradients.
    h = torch.randn(11, 8, device=DEVICE.torch_device, requires_grad=True)
    w = torch.randn(50, 8, device=DEVICE.torch_device, requires_grad=True)
    targets = torch.full((11,), L.IGNORE_INDEX, device=DEVICE.torch_device)
    loss = L.linear_cross_entropy(h, w, targets, 4)
    gh, gw = torch.autograd.grad(loss, (h, w))
    assert loss.item() == 0.0
    assert torch.equal(gh, torch.zeros_like(gh)) and torch.equal(gw, torch.zeros_like(gw))
    assert torch.isnan(L.linear_cross_entropy_eager(h, w, targets))


def test_the_eager_reference_is_pytorchs_cross_entropy_of_the_logits():
    h, w = torch.randn(6, 4, dtype=torch.float64), torch.randn(9, 4, dtype=torch.float64)
    targets = torch.tensor([0, 8, -100, 3, 3, 1])
    want = -torch.log_softmax(h @ w.T, 1)[[0, 1, 3, 4, 5], [0, 8, 3, 3, 1]].mean()
    torch.testing.assert_close(L.linear_cross_entropy_eager(h, w, targets), want)


@on_cpu_only
def test_peak_memory_without_a_gpu_returns_the_result_and_no_bytes():
    result, extra = L.peak_memory(lambda: torch.ones(1000) * 2)
    assert extra is None and torch.equal(result, torch.full((1000,), 2.0))


@pytest.mark.parametrize("shape", [(1, 1, 1, 2), (2, 3, 37, 16), (1, 2, 100, 64), (3, 50, 32)])
def test_rope_rotates_pairs_as_the_eager_formula_does(shape):
    gen = torch.Generator(device=DEVICE.torch_device).manual_seed(2)
    x = torch.randn(shape, generator=gen, device=DEVICE.torch_device)
    torch.testing.assert_close(L.rope(x).double(), L.rope_eager(x.double()), atol=2e-6, rtol=1e-5)


def test_rope_keeps_each_pairs_length_and_its_inverse_undoes_it():
    x = torch.randn(2, 2, 70, 32, device=DEVICE.torch_device)
    y = L.rope(x, base=500.0)
    pairs = lambda t: t[..., :16] ** 2 + t[..., 16:] ** 2
    torch.testing.assert_close(pairs(y), pairs(x), atol=1e-5, rtol=1e-5)       # a rotation, pair by pair
    torch.testing.assert_close(L.rope(y, base=500.0, inverse=True), x, atol=1e-5, rtol=1e-5)
    assert torch.equal(L.rope(x)[..., 0, :], x[..., 0, :])                        # position 0: angle 0


def test_rope_scores_depend_on_the_distance_between_positions_only():
    # The point of RoPE: q_m . k_n after rotation depends on m - n, not on m and n.
    d = 16
    q, k = torch.randn(d, device=DEVICE.torch_device), torch.randn(d, device=DEVICE.torch_device)
    seq = lambda v: v.expand(1, 1, 40, d).contiguous()
    rq, rk = L.rope(seq(q))[0, 0], L.rope(seq(k))[0, 0]
    torch.testing.assert_close(rq[10] @ rk[7], rq[33] @ rk[30], atol=1e-4, rtol=1e-4)
    assert abs(float(rq[10] @ rk[7] - rq[10] @ rk[8])) > 1e-3


def test_rope_as_an_autograd_function_rotates_the_gradient_back():
    x = torch.randn(2, 3, 37, 16, device=DEVICE.torch_device, requires_grad=True)
    y = L.RoPE.apply(x)
    dy = torch.randn_like(y)
    (dx,) = torch.autograd.grad(y, x, dy)
    xd = x.detach().double().requires_grad_()
    (want,) = torch.autograd.grad(L.rope_eager(xd), xd, dy.double())
    torch.testing.assert_close(dx.double(), want, atol=2e-6, rtol=1e-5)
    with pytest.raises(ValueError, match="power of two"):
        L.rope(torch.zeros(1, 4, 12))


# -- lecture 06: saved tensors and recomputation ---------------------------------------------------------

def test_saved_tensors_lists_each_storage_once_and_leaves_out_the_excluded():
    a = torch.randn(10, dtype=torch.float64, requires_grad=True)
    b = torch.randn(10, dtype=torch.float64, requires_grad=True)
    out, saved = L.saved_tensors(lambda: (a * b).exp())
    assert [s[2] for s in saved] == [80, 80, 80]          # a and b by the product, exp's output by exp
    torch.testing.assert_close(out, (a * b).exp())
    _, saved = L.saved_tensors(lambda: (a * b).exp(), exclude=[a])
    assert [s[2] for s in saved] == [80, 80]
    _, saved = L.saved_tensors(lambda: a.view(2, 5)[0] * a.view(2, 5)[1])   # two views of one storage
    assert [s[2] for s in saved] == [80]


def test_recomputation_keeps_the_gradients_and_saves_less():
    gen = torch.Generator(device=DEVICE.torch_device).manual_seed(0)
    b, n, d, f = 1, 16, 128, 192
    layers = [tuple(w.double().requires_grad_() for w in layer)
              for layer in L.block_layers(3, d, f, torch.float32, DEVICE.torch_device, gen)]
    weights = [w for layer in layers for w in layer]
    x = torch.randn(b, n, d, generator=gen, device=DEVICE.torch_device, dtype=torch.float64, requires_grad=True)
    dy = torch.randn(b, n, d, generator=gen, device=DEVICE.torch_device, dtype=torch.float64)
    counts, grads = {}, {}
    for how in L.RECOMPUTE:
        out, saved = L.saved_tensors(lambda: L.block_stack(x, layers, how), exclude=[x, *weights])
        counts[how] = sum(s[2] for s in saved) // 8 // n         # float64 numbers per token, all blocks
        grads[how] = torch.autograd.grad(out, [x, *weights], dy)
    heads = d // 64
    if not DEVICE.is_gpu:   # (on a GPU, fused RMSNorm and SDPA kernels save other things)
        # three blocks: every block's input but the first, and per block 9d + 4f + 2 + heads (lecture 06)
        assert counts["none"] == 2 * d + 3 * (9 * d + 4 * f + 2 + heads)
    assert counts["swiglu"] == counts["none"] - 3 * 2 * f
    assert counts["block"] == 2 * d
    for how in ("swiglu", "block"):
        for g, r in zip(grads[how], grads["none"]):
            torch.testing.assert_close(g, r, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="recompute"):
        L.block_stack(x, layers, "some")


def test_the_last_program_pattern_compiles_to_a_barrier_an_acq_rel_atomic_and_l2_loads():
    # What the GPU is told, read in the PTX for an H100 or H200 (compiled here without a GPU): the partial
    # row stored, then the kernel's barrier (every thread's stores done) beside the one Triton 3.x puts
    # before a scalar atomic, then the count with release and acquire semantics, then the partial rows read
    # from L2 (.cg) by the last program.
    from grader.lectures.day2 import compile_for_gpu
    x = torch.zeros(64, 64)
    partial, sums, arrived = torch.zeros(4, 64), torch.zeros(64), torch.zeros(1, dtype=torch.int32)
    result = compile_for_gpu(L.column_sums_kernel, x, partial, 64, 64, 64, 16, sums, arrived,
                             BLOCK_N=64, ATOMIC=False, LAST_ADDS=True)
    assert result["ok"], result["error"]
    lines = result["ptx"].splitlines()
    atomic = next(i for i, line in enumerate(lines) if "atom." in line)
    assert "acq_rel" in lines[atomic] and ".gpu" in lines[atomic]
    stores = [i for i, line in enumerate(lines[:atomic]) if "st.global" in line]
    assert stores and sum("bar.sync" in line for line in lines[stores[-1]:atomic]) >= 2
    assert any("ld.global.cg" in line for line in lines[atomic:])
