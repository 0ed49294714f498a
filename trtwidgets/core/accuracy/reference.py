"""Reference data for accuracy checks: held-back samples and FP32's outputs on them, computed once.

:class:`Reference` is what every check judges against (:func:`~.verdict.evaluate`): the held-back
samples (one feed each), FP32's outputs on them batch first, each tensor's batch axis, and the
samples' labels; :func:`run_samples` runs any model on the same samples the same way (the one way
held-back samples are run: each tensor along its own batch axis, outputs batch first).

The rest of this module is ``compare``'s file: inputs and FP32 outputs in one ``.npz``.

ONNX Runtime and TensorRT are often not in the same Python (TensorRT 8.6 wheels
stop at Python 3.10; the GPU machine's 3.9 has no onnxruntime), so the FP32
reference is computed once where ONNX Runtime is, saved with
:func:`save_reference`, and read where the engine runs. Keys are
``input/<name>`` and ``output/<name>``; every array holds all samples
concatenated along axis 0. No pickles.
"""

from __future__ import annotations

import json
import os
import zipfile
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ..common.atomic import atomic_write
from ..common.errors import UserError
from ..common.npz_files import open_npz

__all__ = ["Reference", "ReferenceData", "ZERO_ATOL", "load_reference", "input_ranks", "make_reference", "numeric_outputs",
           "reference_notes", "run_samples", "save_reference", "zero_outputs"]

Feed = Dict[str, np.ndarray]


#: An output that FP32 writes as zero throughout is matched when no candidate value is further from 0 than this.
ZERO_ATOL = 1e-5


def numeric_outputs(reference: Mapping[str, np.ndarray]) -> List[str]:
    """The outputs holding numbers (the ones every score compares)."""
    return [n for n in reference if np.issubdtype(np.asarray(reference[n]).dtype, np.number)]


def zero_outputs(reference: Mapping[str, np.ndarray]) -> List[str]:
    """Outputs FP32 writes as (finite) zero throughout: no direction to compare, judged by absolute error."""
    out = []
    for name in numeric_outputs(reference):
        ref = np.asarray(reference[name])
        if ref.size and np.isfinite(ref).all() and not np.any(ref):
            out.append(name)
    return out


def reference_notes(reference: Mapping[str, np.ndarray], where: str = "on the held-back samples") -> List[str]:
    """What FP32's own outputs leave out of every score: a note per output holding NaN or Inf.

    Raises
    ------
    UserError
        Every numeric output is NaN or Inf throughout: there is nothing to judge a candidate against.
    """
    from ..common.errors import UserError

    notes: List[str] = []
    empty: List[str] = []
    names = numeric_outputs(reference)
    for name in names:
        ref = np.asarray(reference[name])
        bad = int(ref.size - np.count_nonzero(np.isfinite(ref)))
        if not bad:
            continue
        if bad == ref.size:
            empty.append(name)
            notes.append(f"FP32's output {name!r} is NaN or Inf in every value {where}: it is not checked at all")
        else:
            notes.append(f"FP32's output {name!r} holds {bad} NaN or Inf of its {ref.size} values {where}: those "
                         "positions are left out of every score (a candidate must be finite wherever FP32 is)")
    for name in zero_outputs(reference):
        notes.append(f"FP32's output {name!r} is zero throughout {where}: it is judged by absolute error (every "
                     f"value within {ZERO_ATOL:g} of 0), not by a cosine")
    if names and len(empty) == len(names):
        raise UserError(f"FP32's outputs {where} are NaN or Inf in every value ({', '.join(map(repr, empty))}).",
                        "Every score compares finite values only: against these outputs any candidate, even one of "
                        "random numbers, would meet the target.",
                        "Check the model and the samples (an input out of its range, a division by zero in the "
                        "graph): FP32 must give finite outputs on the held-back samples.")
    return notes


def input_ranks(proto) -> Dict[str, int]:
    """Input name -> rank, for every input of ``proto`` (an ``onnx.ModelProto``) that declares its shape."""
    return {vi.name: len(vi.type.tensor_type.shape.dim) for vi in proto.graph.input
            if vi.type.tensor_type.HasField("shape")}


def run_samples(model, samples: Sequence[Mapping[str, np.ndarray]], axes, batch: int = 1,
                ranks: Optional[Mapping[str, int]] = None, purpose: str = "score a candidate",
                providers: Optional[Sequence] = None, optimization: str = "all") -> Dict[str, np.ndarray]:
    """Every sample through ``model`` in ONNX Runtime, ``batch`` at a time; outputs batch first.

    ``axes``: the :class:`~..model.batch_axis.BatchAxes` of every input and output. ``optimization``:
    ORT's graph optimization level ("disable" for a model whose Casts must run as written, e.g. a
    low-precision storage emulation, which ORT's cast propagation would undo).

    Raises
    ------
    UserError
        No samples, or ONNX Runtime refuses the model or a feed.
    """
    from ..common.ort import open_session
    from ..model.load import as_model_proto
    from ..model.sample_batches import run_in_batches

    if not samples:
        raise UserError("No data to run.", "The held-back data holds no sample.", "Give held-back samples.")
    proto = as_model_proto(model)
    if ranks is None:
        ranks = input_ranks(proto)
    sess = open_session(proto, providers=providers, optimization=optimization, purpose=purpose)
    names = list(sess.output_names)

    def run(feed: Feed) -> Dict[str, np.ndarray]:
        return dict(zip(names, sess.run(names, feed)))

    return run_in_batches(run, list(samples), axes, batch_size=batch, ranks=ranks)


@dataclass(frozen=True)
class Reference:
    """Held-back samples and FP32's outputs on them: what every candidate is judged against.

    Attributes
    ----------
    feeds : tuple of dict
        One feed per held-back sample (each input with its batch axis of 1 where it has one).
    outputs : dict
        FP32's outputs on ``feeds``, batch first.
    axes : BatchAxes
        The batch axis of every input and output.
    labels : array, optional
        The samples' classes (a ``top1`` metric).
    notes : tuple of str
        What FP32's own outputs leave out of every score (:func:`~.verdict.reference_notes`).
    batch : int
        Samples per run.
    """

    feeds: Tuple[Feed, ...]
    outputs: Dict[str, np.ndarray]
    axes: Any
    labels: Optional[np.ndarray] = field(default=None, compare=False)
    notes: Tuple[str, ...] = ()
    batch: int = 1

    @property
    def samples(self) -> int:
        return len(self.feeds)

    @classmethod
    def compute(cls, model, feeds: Sequence[Mapping[str, np.ndarray]], axes=None, labels=None,
                batch: int = 8) -> "Reference":
        """FP32's outputs of ``model`` on ``feeds`` (batch axes found from the model and the first sample).

        Raises
        ------
        UserError
            No samples, or FP32's outputs are NaN or Inf throughout (nothing to judge against).
        """
        from ..model.batch_axis import find_batch_axes

        from ..model.sample_batches import SampleCutter

        feeds = tuple(dict(f) for f in feeds)
        if not feeds:
            raise UserError("No held-back samples to check on.", "The data source yielded no sample.",
                            "Give held-back samples (not the calibration samples).")
        if axes is None:
            first = SampleCutter(find_batch_axes(model, run=False).inputs).split(feeds[0])[0]
            axes = find_batch_axes(model, sample=first)
        cutter = SampleCutter(axes.inputs, axes.fixed_batch)  # one feed per sample, whatever the files held
        samples = tuple(dict(one) for f in feeds for one in cutter.split(f))
        batch = batch if axes.batched and all(a is not None for a in axes.outputs.values()) else 1
        outputs = run_samples(model, samples, axes, batch, purpose="compute FP32's reference")
        return cls(samples, outputs, axes, None if labels is None else np.asarray(labels),
                   tuple(reference_notes(outputs)), batch)

    def run(self, model, optimization: str = "all") -> Dict[str, np.ndarray]:
        """``model``'s outputs on the same samples, the same way (batch first)."""
        return run_samples(model, self.feeds, self.axes, self.batch, optimization=optimization)


@dataclass(frozen=True)
class ReferenceData:
    """Inputs and reference outputs, samples along axis 0."""

    inputs: Dict[str, np.ndarray]
    outputs: Dict[str, np.ndarray]
    meta: Dict[str, object] = field(default_factory=dict)

    @property
    def samples(self) -> int:
        return int(next(iter(self.inputs.values())).shape[0]) if self.inputs else 0


def save_reference(path: Union[str, os.PathLike], inputs: Mapping[str, np.ndarray], outputs: Mapping[str, np.ndarray],
                   meta: Optional[Mapping[str, object]] = None) -> str:
    """Write inputs and outputs to ``path`` (.npz, atomically); returns the path."""
    path = os.fspath(path)
    arrays = {f"input/{k}": np.asarray(v) for k, v in inputs.items()}
    arrays.update({f"output/{k}": np.asarray(v) for k, v in outputs.items()})
    arrays["meta.json"] = np.frombuffer(json.dumps(dict(meta or {}), sort_keys=True).encode("utf-8"), dtype=np.uint8)
    atomic_write(path, lambda f: np.savez_compressed(f, **arrays))  # type: ignore[arg-type]  # numpy's stub: a member could be allow_pickle
    return path


def load_reference(path: Union[str, os.PathLike]) -> ReferenceData:
    """Read a file written by :func:`save_reference`.

    Raises
    ------
    UserError
        Missing, not an npz, or without ``input/`` / ``output/`` arrays.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise UserError(f"Reference file {path} does not exist.", None,
                        "Write one with `trtwidgets compare ... --save-reference FILE` where ONNX Runtime is installed.")
    try:
        with open_npz(path) as f:  # headers checked first: a size no file holds is refused unread
            data = {k: f[k] for k in f.files}
    except (ValueError, OSError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        raise UserError(f"Reference file {path} could not be read.", str(exc),
                        "Pass an .npz written by save_reference / --save-reference.") from None
    inputs = {k[len("input/"):]: v for k, v in data.items() if k.startswith("input/")}
    outputs = {k[len("output/"):]: v for k, v in data.items() if k.startswith("output/")}
    if not inputs or not outputs:
        raise UserError(f"Reference file {path} has no input/ and output/ arrays.",
                        f"It holds: {', '.join(sorted(data)) or 'nothing'}.",
                        "Pass an .npz written by save_reference / --save-reference.")
    meta = {}
    if "meta.json" in data:
        try:
            meta = json.loads(data["meta.json"].tobytes().decode("utf-8"))
        except (ValueError, RecursionError):  # damaged or absurdly nested: the arrays are what matter
            meta = {}
    return ReferenceData(inputs=inputs, outputs=outputs, meta=meta)


def _concat(parts: Dict[str, List[np.ndarray]]) -> Dict[str, np.ndarray]:
    return {k: np.concatenate(v) if v[0].ndim else np.stack(v) for k, v in parts.items()}


def make_reference(model, feeds: Iterable[Mapping[str, np.ndarray]], providers: Optional[Sequence[str]] = None) -> ReferenceData:
    """Run ``feeds`` through ONNX Runtime (CPU by default) and gather inputs and outputs."""
    from ..common.ort import open_session
    from ..model.load import as_model_proto

    # No graph fusions: the reference computes each output as written.
    sess = open_session(as_model_proto(model), providers=providers, optimization="disable",
                        purpose="compute the FP32 reference")
    names = sess.output_names
    ins: Dict[str, List[np.ndarray]] = {}
    outs: Dict[str, List[np.ndarray]] = {}
    for feed in feeds:
        for k, v in feed.items():
            ins.setdefault(k, []).append(np.asarray(v))
        for k, v in zip(names, sess.run(names, feed)):
            outs.setdefault(k, []).append(v)
    if not ins:
        raise UserError("No data to compute a reference from.", "The data source yielded no samples.",
                        "Point --data at a folder with .npy/.npz files or images.")
    from ..common.ort import DEFAULT_PROVIDERS, ort_version

    return ReferenceData(inputs=_concat(ins), outputs=_concat(outs),
                         meta={"onnxruntime": ort_version(), "providers": list(providers or DEFAULT_PROVIDERS)})
