"""The few CUDA runtime calls the TensorRT adapter needs, through ctypes.

No pycuda or cuda-python: the Python 3.9 TensorRT environment has only numpy,
onnx and tensorrt. ``libcudart`` is found by soname (13, 12, 11.0) on the
loader path and in the usual CUDA folders; it uses the device's *primary
context*, the same one TensorRT uses, so pointers from :class:`DeviceBuffer`
can be handed to TensorRT directly.
"""

from __future__ import annotations

import ctypes
import glob
import os
from typing import Optional, Sequence, Tuple

import numpy as np

from ..core.common.errors import TensorRTUnavailable

_SONAMES = ("libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so")
_DIRS = ("/usr/local/cuda/targets/x86_64-linux/lib", "/usr/local/cuda/lib64", "/usr/local/cuda/lib",
         "/usr/lib/x86_64-linux-gnu")

_H2D, _D2H, _D2D = 1, 2, 3
_ATTR_CC_MAJOR, _ATTR_CC_MINOR = 75, 76
_NO_DEVICE, _INSUFFICIENT_DRIVER = 100, 35

_lib = None


class CudaError(RuntimeError):
    """A CUDA runtime call failed; ``code`` is the cudaError_t value."""

    def __init__(self, call: str, code: int, text: str):
        self.call, self.code, self.text = call, code, text
        super().__init__(f"{call} failed: CUDA error {code} ({text})")


def _candidates():
    env_dirs = [os.path.join(os.environ[v], sub) for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)
                for sub in ("targets/x86_64-linux/lib", "lib64", "lib")]
    for name in _SONAMES:
        yield name  # the loader path (LD_LIBRARY_PATH, ldconfig)
        for d in env_dirs + list(_DIRS):
            yield os.path.join(d, name)
    # pip's nvidia-cuda-runtime-cuXX wheels
    for pattern in ("nvidia/cuda_runtime/lib/libcudart.so*", "nvidia/cu13/lib/libcudart.so*"):
        import site

        for base in site.getsitepackages() if hasattr(site, "getsitepackages") else []:
            yield from sorted(glob.glob(os.path.join(base, pattern)), reverse=True)


def library():
    """The loaded ``libcudart`` (ctypes.CDLL).

    Raises
    ------
    TensorRTUnavailable
        No CUDA runtime library could be loaded.
    """
    global _lib
    if _lib is not None:
        return _lib
    tried = []
    for cand in _candidates():
        if os.path.sep in cand and not os.path.exists(cand):
            continue
        try:
            lib = ctypes.CDLL(cand)
        except OSError as exc:
            tried.append(f"{cand}: {exc}")
            continue
        _declare(lib)
        _lib = lib
        return lib
    raise TensorRTUnavailable(
        "The CUDA runtime library (libcudart) was not found.",
        "Looked for " + ", ".join(_SONAMES) + " on the loader path and in " + ", ".join(_DIRS) + ".",
        "Install the CUDA runtime (e.g. `pip install nvidia-cuda-runtime-cu12`) or add its lib folder to LD_LIBRARY_PATH.",
    )


def _declare(lib) -> None:
    vp, sz, i32 = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
    sig = {
        "cudaGetErrorString": ([i32], ctypes.c_char_p),
        "cudaGetDeviceCount": ([ctypes.POINTER(i32)], i32),
        "cudaGetDevice": ([ctypes.POINTER(i32)], i32),
        "cudaDeviceGetAttribute": ([ctypes.POINTER(i32), i32, i32], i32),
        "cudaMalloc": ([ctypes.POINTER(vp), sz], i32),
        "cudaFree": ([vp], i32),
        "cudaMemcpy": ([vp, vp, sz, i32], i32),
        "cudaMemcpyAsync": ([vp, vp, sz, i32, vp], i32),
        "cudaMemset": ([vp, i32, sz], i32),
        "cudaStreamCreate": ([ctypes.POINTER(vp)], i32),
        "cudaStreamDestroy": ([vp], i32),
        "cudaStreamSynchronize": ([vp], i32),
        "cudaEventCreate": ([ctypes.POINTER(vp)], i32),
        "cudaEventDestroy": ([vp], i32),
        "cudaEventRecord": ([vp, vp], i32),
        "cudaEventSynchronize": ([vp], i32),
        "cudaEventElapsedTime": ([ctypes.POINTER(ctypes.c_float), vp, vp], i32),
        "cudaDeviceSynchronize": ([], i32),
        "cudaRuntimeGetVersion": ([ctypes.POINTER(i32)], i32),
        "cudaDriverGetVersion": ([ctypes.POINTER(i32)], i32),
    }
    for name, (args, res) in sig.items():
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.argtypes, fn.restype = args, res


def _check(call: str, code: int) -> None:
    if code != 0:
        text = library().cudaGetErrorString(code)
        raise CudaError(call, code, text.decode(errors="replace") if text else "unknown")


def device_count() -> int:
    """Number of visible CUDA devices (0 when there is no device or no usable driver)."""
    n = ctypes.c_int(0)
    code = library().cudaGetDeviceCount(ctypes.byref(n))
    return int(n.value) if code == 0 else 0


def require_gpu() -> None:
    """Raise :class:`TensorRTUnavailable` unless a CUDA GPU is usable here."""
    lib = library()
    n = ctypes.c_int(0)
    code = lib.cudaGetDeviceCount(ctypes.byref(n))
    if code != 0 or n.value == 0:
        text = lib.cudaGetErrorString(code).decode(errors="replace") if code else "no device"
        raise TensorRTUnavailable(
            "No CUDA GPU is visible, so TensorRT cannot build engines here.",
            f"cudaGetDeviceCount returned {code} ({text}).",
            "Build on a machine with an NVIDIA GPU and driver (check `nvidia-smi` and CUDA_VISIBLE_DEVICES). "
            "Everything else (recipe, calibration, Q/DQ export, inspecting saved builds) works on this machine.",
        )


def current_device() -> int:
    """The index of the current CUDA device."""
    d = ctypes.c_int(0)
    _check("cudaGetDevice", library().cudaGetDevice(ctypes.byref(d)))
    return int(d.value)


def compute_capability(device: Optional[int] = None) -> Tuple[int, int]:
    """``(major, minor)`` of a device (default: the current one)."""
    lib = library()
    dev = current_device() if device is None else device
    major, minor = ctypes.c_int(0), ctypes.c_int(0)
    _check("cudaDeviceGetAttribute", lib.cudaDeviceGetAttribute(ctypes.byref(major), _ATTR_CC_MAJOR, dev))
    _check("cudaDeviceGetAttribute", lib.cudaDeviceGetAttribute(ctypes.byref(minor), _ATTR_CC_MINOR, dev))
    return int(major.value), int(minor.value)


def device_name(device: Optional[int] = None) -> str:
    """The device's marketing name, e.g. ``NVIDIA H200``.

    ``cudaDeviceProp.name`` is the struct's first field (char[256]) in every CUDA
    version, so a generous buffer is enough whatever the struct's size.
    """
    lib = library()
    dev = current_device() if device is None else device
    fn = getattr(lib, "cudaGetDeviceProperties_v2", None) or lib.cudaGetDeviceProperties
    buf = ctypes.create_string_buffer(16384)
    fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_int], ctypes.c_int
    _check("cudaGetDeviceProperties", fn(buf, dev))
    return buf.raw[:256].split(b"\0", 1)[0].decode(errors="replace")


def synchronize() -> None:
    """Wait until the current device has finished all its work."""
    _check("cudaDeviceSynchronize", library().cudaDeviceSynchronize())


def context_broken() -> bool:
    """True when this process's CUDA context is broken.

    A sticky error (an illegal memory access inside a kernel TensorRT timed while building, say)
    leaves the context unusable: every later CUDA call of the process fails with it, so the next
    build in the same process fails for no fault of its own ("CUDA initialization failure with
    error: 700"). Only a new process has a working context again. No GPU or no CUDA library is no
    broken context (a new process would fare no better).
    """
    try:
        lib = library()
    except Exception:
        return False
    return lib.cudaDeviceSynchronize() != 0 and device_count() > 0


class Stream:
    """A CUDA stream (``int(stream)`` / :attr:`handle` is what TensorRT takes)."""

    def __init__(self):
        h = ctypes.c_void_p()
        _check("cudaStreamCreate", library().cudaStreamCreate(ctypes.byref(h)))
        self._h: Optional[ctypes.c_void_p] = h

    @property
    def handle(self) -> int:
        """The stream's address as an int (0 once destroyed)."""
        return int(self._h.value or 0) if self._h is not None else 0


    def __int__(self) -> int:
        return self.handle

    def synchronize(self) -> None:
        """Wait until the work queued on this stream is done."""
        _check("cudaStreamSynchronize", library().cudaStreamSynchronize(self._h))

    def destroy(self) -> None:
        """Destroy the stream (again is a no-op)."""
        if self._h is not None and self._h.value:
            library().cudaStreamDestroy(self._h)
        self._h = None

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc) -> None:
        self.destroy()


class Event:
    """A CUDA event, for timing work on a stream."""

    def __init__(self):
        h = ctypes.c_void_p()
        _check("cudaEventCreate", library().cudaEventCreate(ctypes.byref(h)))
        self._h: Optional[ctypes.c_void_p] = h

    def record(self, stream: Optional[Stream] = None) -> None:
        """Record the event on ``stream`` (default: the legacy default stream)."""
        _check("cudaEventRecord", library().cudaEventRecord(self._h, ctypes.c_void_p(stream.handle if stream else 0)))

    def synchronize(self) -> None:
        """Wait until the event has completed."""
        _check("cudaEventSynchronize", library().cudaEventSynchronize(self._h))

    def elapsed_ms(self, end: "Event") -> float:
        """Milliseconds from this event to ``end`` (both recorded and complete)."""
        ms = ctypes.c_float(0.0)
        _check("cudaEventElapsedTime", library().cudaEventElapsedTime(ctypes.byref(ms), self._h, end._h))
        return float(ms.value)

    def destroy(self) -> None:
        """Destroy the event (again is a no-op)."""
        if self._h is not None and self._h.value:
            library().cudaEventDestroy(self._h)
        self._h = None


class DeviceBuffer:
    """``nbytes`` of device memory, freed by :meth:`free` or on leaving a ``with`` block."""

    def __init__(self, nbytes: int):
        if nbytes < 0:
            raise ValueError(f"nbytes must be >= 0, got {nbytes}")
        self.nbytes = int(nbytes)
        p = ctypes.c_void_p()
        # cudaMalloc(0) returns a null pointer; TensorRT wants a real address even for empty tensors.
        _check("cudaMalloc", library().cudaMalloc(ctypes.byref(p), max(self.nbytes, 1)))
        self._p: Optional[ctypes.c_void_p] = p


    @classmethod
    def from_array(cls, array: np.ndarray, stream: Optional[Stream] = None) -> "DeviceBuffer":
        """A new buffer the size of ``array``, holding a copy of it."""
        buf = cls(np.ascontiguousarray(array).nbytes)
        buf.copy_from(array, stream)
        return buf

    @property
    def ptr(self) -> int:
        """The device address as an int.

        Raises
        ------
        ValueError
            The buffer has been freed.
        """
        if self._p is None:
            raise ValueError("the device buffer has been freed")
        return int(self._p.value or 0)

    def __int__(self) -> int:
        return self.ptr

    def copy_from(self, array: np.ndarray, stream: Optional[Stream] = None) -> None:
        """Copy a host array in (synchronously unless ``stream`` is given: then keep ``array`` alive until it syncs)."""
        a = np.ascontiguousarray(array)
        if a.nbytes > self.nbytes:
            raise ValueError(f"array of {a.nbytes} bytes does not fit a {self.nbytes}-byte device buffer")
        if stream is None:
            _check("cudaMemcpy", library().cudaMemcpy(ctypes.c_void_p(self.ptr), a.ctypes.data_as(ctypes.c_void_p), a.nbytes, _H2D))
        else:
            _check("cudaMemcpyAsync", library().cudaMemcpyAsync(
                ctypes.c_void_p(self.ptr), a.ctypes.data_as(ctypes.c_void_p), a.nbytes, _H2D, ctypes.c_void_p(stream.handle)))

    def copy_to(self, out: np.ndarray, stream: Optional[Stream] = None) -> np.ndarray:
        """Copy into a C-contiguous host array ``out`` and return it."""
        if not out.flags.c_contiguous:
            raise ValueError("out must be C-contiguous")
        if out.nbytes > self.nbytes:
            raise ValueError(f"asked for {out.nbytes} bytes from a {self.nbytes}-byte device buffer")
        if stream is None:
            _check("cudaMemcpy", library().cudaMemcpy(out.ctypes.data_as(ctypes.c_void_p), ctypes.c_void_p(self.ptr), out.nbytes, _D2H))
        else:
            _check("cudaMemcpyAsync", library().cudaMemcpyAsync(
                out.ctypes.data_as(ctypes.c_void_p), ctypes.c_void_p(self.ptr), out.nbytes, _D2H, ctypes.c_void_p(stream.handle)))
        return out

    def to_numpy(self, shape: Sequence[int], dtype) -> np.ndarray:
        """A new host array of ``shape`` and ``dtype`` copied from the buffer."""
        return self.copy_to(np.empty(tuple(shape), dtype=dtype))

    def free(self) -> None:
        """Free the device memory (again is a no-op)."""
        if self._p is not None and self._p.value:
            library().cudaFree(self._p)
        self._p = None

    def __enter__(self) -> "DeviceBuffer":
        return self

    def __exit__(self, *exc) -> None:
        self.free()

    def __del__(self):
        try:
            self.free()
        except Exception:
            pass
