"""Reference data for accuracy checks: inputs and FP32 outputs in one ``.npz``.

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
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Union

import numpy as np

from ..common.atomic import atomic_write
from ..common.errors import UserError
from ..common.npz_files import open_npz

__all__ = ["ReferenceData", "save_reference", "load_reference", "make_reference"]


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
    atomic_write(path, lambda f: np.savez_compressed(f, **arrays))
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
    from .intermediates import run_reference

    ins: Dict[str, List[np.ndarray]] = {}
    outs: Dict[str, List[np.ndarray]] = {}
    for feed in feeds:
        for k, v in feed.items():
            ins.setdefault(k, []).append(np.asarray(v))
        for k, v in run_reference(model, feed, providers=providers).items():
            outs.setdefault(k, []).append(v)
    if not ins:
        raise UserError("No data to compute a reference from.", "The data source yielded no samples.",
                        "Point --data at a folder with .npy/.npz files or images.")
    from ..common.ort import DEFAULT_PROVIDERS, ort_version

    return ReferenceData(inputs=_concat(ins), outputs=_concat(outs),
                         meta={"onnxruntime": ort_version(), "providers": list(providers or DEFAULT_PROVIDERS)})
