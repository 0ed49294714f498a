"""Run a TensorRT engine on numpy feeds: ``EngineRunner(engine).infer({name: array})``.

Works with the name-based tensor API (``num_io_tensors``, ``set_input_shape``,
``set_tensor_address``, ``execute_async_v3``) of TensorRT 8.5+, 10 and 11, and
falls back to the bindings API (``set_binding_shape``, ``execute_async_v2``) of
older releases. Device memory, copies and streams go through
:mod:`trtwidgets.trt.cuda` (ctypes to libcudart), so nothing beyond numpy and
tensorrt is needed.
"""

from __future__ import annotations

import os
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ..core.common.errors import UserError
from . import cuda, version_of
from .dtypes import numpy_dtype  # re-exported: it was defined here

__all__ = ["EngineRunner", "TensorSpec", "load_engine", "numpy_dtype", "run_samples"]


class TensorSpec:
    """Name, direction, dtype and engine-declared shape (``-1`` = dynamic) of one I/O tensor."""

    __slots__ = ("name", "is_input", "dtype", "shape", "index")

    def __init__(self, name: str, is_input: bool, dtype, shape: Tuple[int, ...], index: int):
        self.name, self.is_input, self.dtype, self.shape, self.index = name, is_input, dtype, shape, index

    def __repr__(self) -> str:
        return f"TensorSpec({self.name!r}, {'input' if self.is_input else 'output'}, {self.dtype}, {self.shape})"


def _read_engine_bytes(engine) -> bytes:
    if isinstance(engine, (bytes, bytearray, memoryview)):
        return bytes(engine)
    path = os.fspath(engine)
    if os.path.isdir(path):
        cands = sorted(f for f in os.listdir(path) if f.endswith((".engine", ".plan", ".trt")))
        if not cands:
            raise UserError(f"No engine file in {path}.", "Looked for *.engine, *.plan, *.trt.",
                            "Pass the engine file itself, or a build directory written by trtwidgets' build.")
        path = os.path.join(path, cands[0])
    if not os.path.isfile(path):
        raise UserError(f"Engine file {path} does not exist.", None, "Check the path, or build the engine first.")
    with open(path, "rb") as f:
        return f.read()


def load_engine(engine, trt_module=None, logger=None):
    """Deserialize an engine from a path, a build directory or bytes.

    Returns
    -------
    (engine, runtime, logger)
        The runtime and logger must outlive the engine; :class:`EngineRunner` keeps them.

    Raises
    ------
    UserError
        The file is missing, or TensorRT cannot deserialize it (another TensorRT
        version or GPU built it).
    """
    if trt_module is None:
        from . import tensorrt

        trt_module = tensorrt()
    trt = trt_module
    if hasattr(engine, "create_execution_context"):
        return engine, None, logger
    data = _read_engine_bytes(engine)
    if logger is None:
        from .logger import LogCollector, trt_logger

        collector = LogCollector()
        logger = trt_logger(collector, trt)
    runtime = trt.Runtime(logger)
    eng = runtime.deserialize_cuda_engine(data)
    if eng is None:
        lines = []
        logged = getattr(logger, "collector", None)
        if logged is not None:
            lines = [ln.message for ln in logged.errors()][-5:]
        raise UserError(
            "TensorRT could not deserialize the engine.",
            "An engine only loads in the TensorRT version (and usually on the GPU model) that built it"
            + (": " + " | ".join(lines) if lines else "."),
            f"Rebuild the engine here with TensorRT {version_of(trt)}.",
        )
    return eng, runtime, logger


class EngineRunner:
    """An execution context with device buffers, for repeated runs of one engine.

    Parameters
    ----------
    engine : str, path, bytes or tensorrt.ICudaEngine
        Engine file, a build directory holding one, serialized bytes, or an engine.
    profile : int
        Optimization profile to run with.
    trt_module : module, optional
        The :mod:`tensorrt` module (default: :func:`trtwidgets.trt.tensorrt`).

    Notes
    -----
    Use as a context manager, or call :meth:`close`, to free device memory early.
    """

    def __init__(self, engine, profile: int = 0, trt_module=None):
        if trt_module is None:
            from . import tensorrt

            trt_module = tensorrt()
        self.trt = trt_module
        cuda.require_gpu()
        self.engine, self._runtime, self._logger = load_engine(engine, trt_module)
        self.tensor_api = hasattr(self.engine, "num_io_tensors")
        self.context = self.engine.create_execution_context()
        if self.context is None:
            raise UserError("TensorRT could not create an execution context.",
                            "The GPU may be out of memory.", "Free GPU memory (other engines, processes) and retry.")
        self.stream: Optional[cuda.Stream] = cuda.Stream()

        self.profile = int(profile)
        nprof = int(self.engine.num_optimization_profiles)
        if not 0 <= self.profile < nprof:
            raise UserError(f"Optimization profile {profile} does not exist.", f"The engine has {nprof} profile(s).",
                            f"Pick 0..{nprof - 1}.")
        if self.profile:
            if hasattr(self.context, "set_optimization_profile_async"):
                self.context.set_optimization_profile_async(self.profile, self.stream.handle)
            else:
                self.context.active_optimization_profile = self.profile
        self.specs: List[TensorSpec] = self._specs()
        self._buffers: Dict[str, cuda.DeviceBuffer] = {}
        self._host_inputs: Dict[str, np.ndarray] = {}
        self._shapes: Dict[str, Tuple[int, ...]] = {}

    # -- description ---------------------------------------------------------------------------

    def _specs(self) -> List[TensorSpec]:
        trt = self.trt
        specs = []
        if self.tensor_api:
            for i in range(self.engine.num_io_tensors):
                name = self.engine.get_tensor_name(i)
                is_in = self.engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT
                specs.append(TensorSpec(name, is_in, self.engine.get_tensor_dtype(name),
                                        tuple(self.engine.get_tensor_shape(name)), i))
        else:
            per = self.engine.num_bindings // max(1, self.engine.num_optimization_profiles)
            for i in range(per):
                idx = i + self.profile * per
                specs.append(TensorSpec(self.engine.get_binding_name(i), bool(self.engine.binding_is_input(i)),
                                        self.engine.get_binding_dtype(i), tuple(self.engine.get_binding_shape(i)), idx))
        return specs

    @property
    def input_names(self) -> List[str]:
        """The engine's input names, in binding order."""
        return [s.name for s in self.specs if s.is_input]

    @property
    def output_names(self) -> List[str]:
        """The engine's output names, in binding order."""
        return [s.name for s in self.specs if not s.is_input]

    def np_dtype(self, spec: TensorSpec):
        """The numpy dtype of an I/O tensor.

        Raises
        ------
        UserError
            A type numpy cannot hold, naming the tensor.
        """
        try:
            return numpy_dtype(self.trt, spec.dtype)
        except UserError as err:
            raise UserError(f"Tensor {spec.name!r}: {err.what}", err.why, err.fix) from None

    def profile_shapes(self, name: str) -> Optional[Tuple[Tuple[int, ...], Tuple[int, ...], Tuple[int, ...]]]:
        """``(min, opt, max)`` of an input in the active profile; None if static or unknown."""
        spec = next((s for s in self.specs if s.name == name), None)
        if spec is None or not any(d < 0 for d in spec.shape):
            return None
        try:
            if hasattr(self.engine, "get_tensor_profile_shape"):
                mn, opt, mx = self.engine.get_tensor_profile_shape(name, self.profile)
            else:
                mn, opt, mx = self.engine.get_profile_shape(self.profile, spec.index)
            return tuple(mn), tuple(opt), tuple(mx)
        except Exception:
            return None

    def opt_shapes(self) -> Dict[str, Tuple[int, ...]]:
        """Each input's opt shape in the active profile (its static shape when not dynamic)."""
        out = {}
        for s in self.specs:
            if s.is_input:
                ps = self.profile_shapes(s.name)
                out[s.name] = ps[1] if ps else tuple(s.shape)
        return out

    # -- running -------------------------------------------------------------------------------

    def set_shapes(self, shapes: Mapping[str, Sequence[int]]) -> Dict[str, Tuple[int, ...]]:
        """Set input shapes; returns the resulting output shapes.

        Raises
        ------
        UserError
            An unknown input, or a shape outside the active profile.
        """
        for name, shape in shapes.items():
            spec = next((s for s in self.specs if s.is_input and s.name == name), None)
            if spec is None:
                raise UserError(f"The engine has no input named {name!r}.",
                                f"Its inputs are: {', '.join(self.input_names)}.", "Use one of those names.")
            shape = tuple(int(d) for d in shape)
            if self.tensor_api:
                ok = self.context.set_input_shape(name, shape)
            else:
                ok = self.context.set_binding_shape(spec.index, shape)
            if ok is False:
                rng = self.profile_shapes(name)
                why = (f"Profile {self.profile} allows min {list(rng[0])}, max {list(rng[2])}." if rng
                       else f"The engine's shape is {list(spec.shape)}.")
                raise UserError(f"Input {name!r} cannot take shape {list(shape)}.", why,
                                "Feed a shape inside the profile, or rebuild with a profile that covers it.")
            self._shapes[name] = shape
        return {s.name: self._current_shape(s) for s in self.specs if not s.is_input}

    def _current_shape(self, spec: TensorSpec) -> Tuple[int, ...]:
        if self.tensor_api:
            return tuple(self.context.get_tensor_shape(spec.name))
        return tuple(self.context.get_binding_shape(spec.index))

    def _buffer(self, name: str, nbytes: int) -> cuda.DeviceBuffer:
        buf = self._buffers.get(name)
        if buf is None or buf.nbytes < nbytes:
            if buf is not None:
                buf.free()
            buf = cuda.DeviceBuffer(nbytes)
            self._buffers[name] = buf
        return buf

    def prepare(self, feeds: Mapping[str, np.ndarray]) -> Dict[str, Tuple[int, ...]]:
        """Set shapes, copy inputs to the device and bind all addresses (once per feed).

        After this, :meth:`execute` runs the engine on the same inputs as often as
        wanted (the benchmark does that). Returns the output shapes.
        """
        missing = [n for n in self.input_names if n not in feeds]
        if missing:
            raise UserError(f"No data for engine input(s) {', '.join(repr(n) for n in missing)}.",
                            f"The engine's inputs are: {', '.join(self.input_names)}.", "Feed every input.")
        arrays = {}
        for s in self.specs:
            if not s.is_input:
                continue
            want = self.np_dtype(s)
            a = np.asarray(feeds[s.name])
            if a.dtype != want:
                same_kind = (np.issubdtype(a.dtype, np.floating) and np.issubdtype(want, np.floating)) or \
                            (np.issubdtype(a.dtype, np.integer) and np.issubdtype(want, np.integer))
                if not same_kind:
                    raise UserError(f"Input {s.name!r} is {a.dtype}; the engine takes {want}.", None,
                                    f"Convert the data to {want}.")
                a = a.astype(want)
            arrays[s.name] = np.ascontiguousarray(a)
        out_shapes = self.set_shapes({n: a.shape for n, a in arrays.items()})
        bad = {n: sh for n, sh in out_shapes.items() if any(d < 0 for d in sh)}
        if bad:
            raise UserError(f"Output shape(s) of {', '.join(bad)} are not known before running.",
                            "Data-dependent output shapes need an output allocator, which this runner does not implement.",
                            "Give the model static output shapes (e.g. pad NonZero/TopK outputs).")
        for name, a in arrays.items():
            self._buffer(name, a.nbytes).copy_from(a)
            self._host_inputs[name] = a
        for s in self.specs:
            if not s.is_input:
                nbytes = int(np.prod(out_shapes[s.name], dtype=np.int64)) * self.np_dtype(s).itemsize
                self._buffer(s.name, nbytes)
        if self.tensor_api:
            for s in self.specs:
                self.context.set_tensor_address(s.name, self._buffers[s.name].ptr)
        return out_shapes

    def _open_stream(self) -> cuda.Stream:
        if self.stream is None:
            raise RuntimeError("the engine runner is closed")
        return self.stream

    def execute(self) -> None:
        """Enqueue one run on :attr:`stream` (inputs as last :meth:`prepare`-d); does not wait."""
        if self.tensor_api:
            ok = self.context.execute_async_v3(self._open_stream().handle)
        else:
            bindings = [0] * self.engine.num_bindings
            for s in self.specs:
                bindings[s.index] = self._buffers[s.name].ptr
            ok = self.context.execute_async_v2(bindings, self._open_stream().handle)
        if ok is False:
            errs = []
            collector = getattr(self._logger, "collector", None)
            if collector is not None:
                errs = [ln.message for ln in collector.errors()][-5:]
            raise UserError("TensorRT failed to run the engine.", " | ".join(errs) or "enqueue returned false.",
                            "Check the input shapes against the engine's profile and the log above.")

    def fetch(self, names: Optional[Sequence[str]] = None) -> Dict[str, np.ndarray]:
        """Wait for the stream and copy outputs (default: all) to host arrays."""
        self._open_stream().synchronize()
        out = {}

        for s in self.specs:
            if s.is_input or (names is not None and s.name not in names):
                continue
            shape = self._current_shape(s)
            out[s.name] = self._buffers[s.name].to_numpy(shape, self.np_dtype(s))
        return out

    def infer(self, feeds: Mapping[str, np.ndarray], names: Optional[Sequence[str]] = None) -> Dict[str, np.ndarray]:
        """Run once on ``feeds`` and return the outputs ``{name: array}``."""
        self.prepare(feeds)
        self.execute()
        return self.fetch(names)

    def close(self) -> None:
        """Free the device buffers, the stream, the context, engine and runtime, in that order."""
        for buf in self._buffers.values():
            buf.free()
        self._buffers.clear()
        self._host_inputs.clear()
        if self.stream is not None:
            self.stream.destroy()
            self.stream = None
        # Drop the context before the engine and the engine before the runtime.
        self.context = None
        self.engine = None
        self._runtime = None

    def __enter__(self) -> "EngineRunner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def run_samples(runner: EngineRunner, inputs: Mapping[str, np.ndarray], batch: Optional[int] = None
                ) -> Tuple[Dict[str, np.ndarray], int]:
    """Run all samples (axis 0 of ``inputs``) through the engine, ``batch`` at a time.

    The batch is the engine's static batch, or for a dynamic batch ``batch``
    (default: the profile's largest). With a static batch, samples that do not
    fill a last batch are left out.

    Returns
    -------
    (outputs, used) : dict, int
        Outputs concatenated along axis 0, and how many samples they cover.

    Raises
    ------
    UserError
        Fewer samples than one static batch.
    """
    first = runner.input_names[0]
    spec = next(s for s in runner.specs if s.name == first)
    n = int(np.shape(inputs[first])[0])
    if spec.shape and spec.shape[0] > 0:
        b, static = int(spec.shape[0]), True
    else:
        rng = runner.profile_shapes(first)
        top = int(rng[2][0]) if rng else n
        b, static = (min(top, batch) if batch else top), False
    used = (n // b) * b if static else n
    if used == 0:
        raise UserError(f"The engine runs batches of {b} but only {n} sample(s) were given.", None,
                        "Give more samples, or build the engine with a smaller or dynamic batch.")
    parts: Dict[str, List[np.ndarray]] = {}
    for i in range(0, used, b):
        feed = {k: np.asarray(v)[i:i + b] for k, v in inputs.items()}
        for k, v in runner.infer(feed).items():
            parts.setdefault(k, []).append(v)
    return {k: np.concatenate(v) for k, v in parts.items()}, used


# Re-exported for callers that type-annotate engine arguments.
EngineLike = Union[str, os.PathLike, bytes]
