# A notebook cell a student could submit (GPU only). The grader's end event is recorded after the
# student's function returns; this function does all its launches on the caller's stream (so no
# launch is on a side stream), but makes a second stream wait for the first part of the work only
# and leaves that stream current: an end event recorded on the current stream would fire early,
# and time only part of the work.
import torch
import triton
import triton.language as tl

FRACTION_TIMED = 0.4


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, start, n, BLOCK: tl.constexpr):
    offs = start + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


streams = []


def add(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    home = torch.cuda.current_stream(x.device)
    if not streams:
        streams.append(torch.cuda.Stream(x.device))
    split = int(n * FRACTION_TIMED)
    add_kernel[(triton.cdiv(split, 1024),)](x, y, out, 0, split, BLOCK=1024)
    streams[0].wait_stream(home)             # the second stream waits for the first part only
    add_kernel[(triton.cdiv(n - split, 1024),)](x, y, out, split, n, BLOCK=1024)
    torch.cuda.set_stream(streams[0])        # and is left current
    return out
