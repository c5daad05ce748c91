"""Tensors that two processes of one user see without a copy, and the messages that carry them.

The grader's clock (`grader.checker.timer`) writes the inputs of every timed call into memory that the
student's kernel maps, and reads what each call returned where the kernel's GPU wrote it. On a GPU that
is CUDA's interprocess memory (the handles PyTorch's own multiprocessing uses); on the CPU, where speed
is never graded but the protocol is tested, files mapped by both processes.

A description is plain JSON: bytes as hex, numbers, a dtype from a fixed list. Nothing here unpickles
or runs what the other process sent; a description that does not make sense raises `WireError`.
"""
from __future__ import annotations

import json
import math
import os
import secrets
import socket

import torch

DTYPES = {name: getattr(torch, name) for name in
          ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")}
MESSAGE_LIMIT = 1 << 20


class WireError(RuntimeError):
    """A message or a tensor's description from the other process cannot be used."""


def json_object(data: bytes, what: str, error: type = WireError) -> dict:
    """`data` read as one JSON object: what the student's process hands the grader is never unpickled
    or evaluated, only parsed, and anything else raises `error` saying that `what` is not one."""
    try:
        value = json.loads(data)
    except ValueError:
        raise error(f"{what} is not JSON") from None
    if not isinstance(value, dict):
        raise error(f"{what} is not a JSON object")
    return value


def _dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


_SHARED_POOLS = {}   # device -> the memory pool of the tensors this process shares on it


def new_shared(shape, dtype, device: str, folder: str) -> torch.Tensor:
    """An empty tensor that another process of this user can map: GPU memory, or on the CPU a file in
    `folder` mapped shared.

    On a GPU the other process maps the whole allocation segment the tensor lies in, not just the
    tensor: so shared tensors come from a memory pool of their own, and nothing else of this process
    (the clock's expected results) is ever placed in a segment another process can read."""
    if device != "cpu":
        pool_kind, use_pool = getattr(torch.cuda, "MemPool", None), getattr(torch.cuda, "use_mem_pool", None)
        if pool_kind is None or use_pool is None:   # torch before 2.7: the caching allocator's segments
            return torch.empty(shape, dtype=dtype, device=device)
        where = torch.device(device)
        index = where.index if where.index is not None else torch.cuda.current_device()
        pool = _SHARED_POOLS.setdefault(index, pool_kind())
        with use_pool(pool, device=index):
            return torch.empty(shape, dtype=dtype, device=device)
    numel = math.prod(shape)
    path = os.path.join(folder, f"shared-{secrets.token_hex(6)}.bin")
    size = max(1, numel * torch.empty((), dtype=dtype).element_size())
    with open(path, "wb") as f:
        f.truncate(size)
    flat = torch.from_file(path, shared=True, size=size, dtype=torch.uint8)
    tensor = flat[: numel * torch.empty((), dtype=dtype).element_size()].view(dtype).reshape(shape)
    tensor.shared_path = path   # for describe(); the file goes with the folder
    return tensor


def describe(t: torch.Tensor) -> dict:
    """What another process needs to map `t` (GPU memory, or a tensor made by new_shared)."""
    layout = {"dtype": _dtype_name(t.dtype), "shape": list(t.shape), "stride": list(t.stride()),
              "offset": t.storage_offset()}
    if t.device.type == "cuda":
        (device, handle, size, offset, counter, counter_offset, event, event_sync) = \
            t.untyped_storage()._share_cuda_()
        return dict(layout, kind="cuda", device=int(device), handle=handle.hex(), size=int(size),
                    storage_offset_bytes=int(offset), counter=counter.hex(), counter_offset=int(counter_offset),
                    event=None if event is None else event.hex(), event_sync=bool(event_sync))
    path = getattr(t, "shared_path", None)
    if path is None:
        raise WireError("only a tensor made by new_shared can be described on the CPU")
    return dict(layout, kind="file", path=path, size=t.untyped_storage().nbytes())


def _ints(values, what) -> list:
    if not isinstance(values, list) or not all(isinstance(v, int) and v >= 0 for v in values):
        raise WireError(f"the {what} {str(values)[:80]} is not a list of sizes")
    return values


def rebuild(d: dict, device: str) -> torch.Tensor:
    """The tensor another process described (describe): mapped, not copied."""
    try:
        dtype = DTYPES[d["dtype"]]
        shape, stride = _ints(d["shape"], "shape"), _ints(d["stride"], "stride")
        offset = int(d["offset"])
        kind = d["kind"]
    except (KeyError, TypeError, ValueError) as e:
        raise WireError(f"a tensor is described as {str(d)[:200]} ({e})") from None
    item = torch.empty((), dtype=dtype).element_size()
    reach = offset + (1 + sum((n - 1) * s for n, s in zip(shape, stride)) if math.prod(shape) else 0)
    try:
        if kind == "cuda" and device == "cuda":
            torch.cuda.init()   # mapping another process's memory needs this process's CUDA started
            storage = torch.UntypedStorage._new_shared_cuda(
                int(d["device"]), bytes.fromhex(d["handle"]), int(d["size"]), int(d["storage_offset_bytes"]),
                bytes.fromhex(d["counter"]), int(d["counter_offset"]),
                None if d["event"] is None else bytes.fromhex(d["event"]), bool(d["event_sync"]))
        elif kind == "file" and device == "cpu":
            size = int(d["size"])
            storage = torch.from_file(str(d["path"]), shared=True, size=size, dtype=torch.uint8).untyped_storage()
        else:
            raise WireError(f"a tensor of kind {kind!r} cannot be mapped on {device}")
    except WireError:
        raise
    except Exception as e:   # a handle the driver refuses, a missing file
        raise WireError(f"a tensor could not be mapped ({type(e).__name__}: {str(e)[:200]})") from None
    if reach * item > storage.nbytes():
        raise WireError(f"a tensor of shape {shape} reaches past the {storage.nbytes()} bytes it was given")
    return torch.empty(0, dtype=dtype, device=device).set_(storage, offset, shape, stride)


# -- messages: one JSON object per line, on a Unix socket ---------------------------------------------

def send(sock: socket.socket, message: dict) -> None:
    sock.sendall(json.dumps(message).encode() + b"\n")


class Reader:
    """Reads one JSON object per line from a socket, at most MESSAGE_LIMIT bytes each."""

    def __init__(self, sock: socket.socket):
        self.sock, self.buffer = sock, b""

    def receive(self) -> dict:
        while b"\n" not in self.buffer:
            if len(self.buffer) > MESSAGE_LIMIT:
                raise WireError("a message is longer than the grader reads")
            chunk = self.sock.recv(65536)
            if not chunk:
                raise WireError("the other process closed the connection")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json_object(line, "a message")
