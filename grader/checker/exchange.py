"""The folder through which a student's kernel hands results to the checker, read with care.

The checker creates the folder and gives it to the kernel's user (under the grading sandbox, a user of
the kernel's own). The kernel writes a JSON summary and raw tensor bytes there (`grader.student.serve`); the
checker, which may run as root, opens only plain names, never follows a link, accepts only regular
files owned by the kernel's user (not a hard link to someone else's file) and never reads more bytes
than the answer can need. Tensors are rebuilt from raw bytes with a dtype from a fixed list: nothing
the kernel wrote is unpickled or executed.
"""
from __future__ import annotations

import math
import os
import secrets
import shutil
import stat
import tempfile

import torch

from grader.shared_tensors import DTYPES, json_object

JSON_LIMIT = 1 << 20


class ExchangeError(RuntimeError):
    """What the kernel handed over cannot be read (missing, oversized, or not its own file)."""


class Exchange:
    def __init__(self, kernel_uid: int | None = None):
        # The kernel's folder sits in one of the checker's own (entered, not listed or written by
        # others), so that the kernel cannot move it away and put a link in its place.
        shm = "/dev/shm"  # memory, where there is one: outputs of the GPU's shapes are hundreds of MB
        self._parent = tempfile.mkdtemp(prefix="grader-exchange-",
                                        dir=shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None)
        os.chmod(self._parent, 0o711)
        self.folder = os.path.join(self._parent, "kernel")
        os.mkdir(self.folder, 0o700)
        self.uid = os.getuid() if kernel_uid is None else kernel_uid
        if self.uid != os.getuid():
            os.chown(self.folder, self.uid, self.uid)
        self._count = 0

    def new_request(self) -> str:
        self._count += 1
        return f"r{self._count}-{secrets.token_hex(4)}"

    def _open(self, name: str, limit: int):
        """The named file, opened for reading, or None if absent; refused unless the kernel's own."""
        if "/" in name or name.startswith("."):
            raise ExchangeError(f"the result names a file outside the exchange folder ({name!r})")
        try:
            fd = os.open(os.path.join(self.folder, name), os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise ExchangeError(f"{name} cannot be opened ({e.strerror})") from None
        f = os.fdopen(fd, "rb")
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != self.uid or info.st_nlink != 1:
            f.close()
            raise ExchangeError(f"{name} is not a file the notebook's kernel wrote")
        if info.st_size > limit:
            f.close()
            raise ExchangeError(f"{name} holds {info.st_size} bytes, more than the {limit} expected")
        return f

    def _read(self, name: str, limit: int) -> bytes | None:
        f = self._open(name, limit)
        if f is None:
            return None
        with f:
            return f.read(limit + 1)[:limit]

    def result(self, request: str) -> dict | None:
        """The summary of a request, or None when the kernel wrote none."""
        data = self._read(f"{request}.json", JSON_LIMIT)
        if data is None:
            return None
        return json_object(data, "the result summary", ExchangeError)

    def tensor(self, described: dict, device: str, limit: int) -> torch.Tensor:
        """One output tensor, rebuilt from its bytes on `device` (or the CPU, if the kernel's was there)."""
        try:
            dtype = DTYPES[described["dtype"]]
            shape = [int(s) for s in described["shape"]]
            name = str(described["file"])
        except (KeyError, TypeError, ValueError):
            raise ExchangeError(f"an output is described as {str(described)[:200]}, with no dtype in "
                                f"{', '.join(DTYPES)}") from None
        if any(s < 0 for s in shape):
            raise ExchangeError(f"an output has the shape {shape}")
        size = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
        wrong = ExchangeError(f"an output of shape {tuple(shape)} and dtype {described['dtype']} is not "
                              f"{size} bytes long, or larger than {limit} bytes")
        f = self._open(name, min(size, limit))
        if f is None:
            raise wrong
        flat = torch.empty(size, dtype=torch.uint8)
        with f:
            if size and (f.readinto(flat.numpy()) != size or f.read(1)):
                raise wrong
        tensor = flat.view(dtype).reshape(shape)
        return tensor if described.get("device") == "cpu" else tensor.to(device)

    def forget(self, request: str) -> None:
        for path in os.listdir(self.folder):
            if path.startswith(f"{request}.") or path.startswith(f"{request}-"):
                try:
                    os.unlink(os.path.join(self.folder, path))
                except OSError:
                    pass

    def close(self) -> None:
        shutil.rmtree(self._parent, ignore_errors=True)
