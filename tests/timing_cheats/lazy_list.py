# A notebook cell a student could submit (it passes the submission rules).
# The graded function launches a token Triton kernel and returns a list subclass whose __iter__
# computes the result with PyTorch: a grader that iterated it would get the work done only when it
# looks, outside its watch and its timer.
import torch
import triton
import triton.language as tl


@triton.jit
def token_kernel(out_ptr, n, BLOCK: tl.constexpr):
    # a cheap kernel: writes one block of zeros (a real attacker calibrates its cost to the time wanted)
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros((BLOCK,), dtype=tl.float32), mask=offs < n)


class Later(list):
    """Looks like a one-element list of the output; fills it in when someone looks."""

    def __init__(self, x, y, out):
        self.x = x
        self.y = y
        self.out = out

    def __iter__(self):
        torch.add(self.x, self.y, out=self.out)   # outside the watch: PyTorch computes it
        yield self.out


def add(x, y):
    out = torch.empty_like(x)
    token_kernel[(1,)](out, x.numel(), BLOCK=16)
    return Later(x, y, out)
