"""Custom kernels from PyTorch: torch_trn.kernel(path_or_bytes) loads a trn kernel binary (what
trn-as or the kernel builder makes) and returns a callable that launches it on trn tensors and
scalars on the current stream, its arguments checked against the kernel's own table."""
import collections
import os

import torch

_ops = torch.ops.torch_trn

KernelArg = collections.namedtuple("KernelArg", "name dtype direction kind shape")
_DIRECTIONS = {1: "in", 2: "out", 3: "inout"}
_KINDS = {1: "tensor", 2: "scalar"}
_TORCH_DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16,
                 "i32": torch.int32, "i16": torch.int16, "i8": torch.int8, "u8": torch.uint8,
                 "fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}


class Kernel:
    """A loaded kernel. Call it with its arguments in launch order or by name; tensor arguments
    are contiguous trn tensors of the argument's dtype and element count, scalars Python numbers.
    Outputs (direction "out") not given are allocated. Returns the outputs and in-outs (one
    tensor, or a tuple), queued on the current stream: they are ready when the stream gets there.
    """

    def __init__(self, source, device=None):
        from . import _index
        if isinstance(source, (bytes, bytearray, memoryview)):
            image = torch.frombuffer(bytearray(source), dtype=torch.uint8)
            self._handle = _ops.kernel_load(_index(device), "", image)
        elif isinstance(source, (str, os.PathLike)):
            self._handle = _ops.kernel_load(_index(device), os.fspath(source),
                                            torch.empty(0, dtype=torch.uint8))
        else:
            raise TypeError("torch_trn.kernel takes a kernel file's path or its bytes, not "
                            f"{type(source).__name__}")
        name, names, dtypes, directions, kinds, ranks, dims = _ops.kernel_info(self._handle)
        self.name = name
        self.args = []
        at = 0
        for n, dt, direction, kind, rank in zip(names, dtypes, directions, kinds, ranks):
            self.args.append(KernelArg(n, dt, _DIRECTIONS.get(direction, "?"),
                                       _KINDS.get(kind, "?"), tuple(dims[at:at + rank])))
            at += rank

    def __repr__(self):
        listed = ", ".join(f"{a.name}: {a.direction} {a.dtype}{list(a.shape)}"
                           if a.kind == "tensor" else f"{a.name}: scalar {a.dtype}"
                           for a in self.args)
        return f"<torch_trn.Kernel {self.name}({listed})>"

    def __del__(self):
        handle = getattr(self, "_handle", None)
        if handle is not None:
            try:
                _ops.kernel_destroy(handle)
            except Exception:  # interpreter teardown: the process's exit frees it
                pass

    def __call__(self, *args, **kwargs):
        names = [a.name for a in self.args]
        if len(args) > len(self.args):
            raise TypeError(f"kernel '{self.name}' takes {len(self.args)} arguments "
                            f"({', '.join(names)}), not {len(args)}")
        given = dict(zip(names, args))
        for key, value in kwargs.items():
            if key not in names:
                raise TypeError(f"kernel '{self.name}' has no argument '{key}' (its arguments: "
                                f"{', '.join(names)})")
            if key in given:
                raise TypeError(f"kernel '{self.name}': argument '{key}' given twice")
            given[key] = value
        device = next((v.device for v in given.values() if isinstance(v, torch.Tensor)), None)
        tensors, scalars, results = [], [], []
        for a in self.args:
            value = given.get(a.name)
            if a.kind == "scalar":
                if not isinstance(value, (int, float)) or isinstance(value, bool):
                    raise TypeError(f"kernel '{self.name}': scalar argument '{a.name}' "
                                    f"({a.dtype}) takes a number, not {type(value).__name__}")
                tensors.append(None)
                scalars.append(float(value))
                continue
            if value is None:
                if a.direction != "out":
                    raise TypeError(f"kernel '{self.name}': {a.direction} argument '{a.name}' "
                                    "is missing")
                dtype = _TORCH_DTYPES.get(a.dtype)
                if dtype is None:
                    raise TypeError(f"kernel '{self.name}': output '{a.name}' is {a.dtype}, a "
                                    "dtype torch has none for: pass it")
                value = torch.empty(a.shape, dtype=dtype,
                                    device=device if device is not None else "trn")
            elif not isinstance(value, torch.Tensor):
                raise TypeError(f"kernel '{self.name}': argument '{a.name}' takes a trn tensor, "
                                f"not {type(value).__name__}")
            tensors.append(value)
            scalars.append(0.0)
            if a.direction in ("out", "inout"):
                results.append(value)
        _ops.kernel_launch(self._handle, tensors, scalars)
        if not results:
            return None
        return results[0] if len(results) == 1 else tuple(results)


def kernel(source, device=None):
    """Loads a trn kernel (a file's path, or its bytes) for `device` (the current one by
    default) and returns it as a callable :class:`Kernel`."""
    return Kernel(source, device)
