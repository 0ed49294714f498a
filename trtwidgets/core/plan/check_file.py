"""``held_back.npz``: a plan's held-back samples and FP32's outputs on them, written and read back checked.

A reference judges every engine that ``plan measure`` builds, so it is checked before it judges:

* **whose it is.** The file carries its plan's key (:func:`check_key`): the model's SHA-256 and the
  held-back samples' names (their count and a digest). Another plan's file, even one whose tensor
  names match, is refused against this plan's plan.json (:func:`check_fits`);
* **what it holds.** Every array's npy header is read before its data
  (:func:`~..common.npz_files.open_npz`), and an array that declares more bytes than the file
  holds, or Python objects, is refused unread (a header claiming 10^11 floats was a MemoryError); a
  file over :data:`MAX_READ_BYTES` is refused before it is read. The sample count the file
  declares must be the samples it holds: every input of every sample, each output and the labels
  with one entry per sample along its batch axis (a file claiming 50 samples that held 3 gave 47
  empty feeds).

Whether FP32's outputs are finite is judged by the check itself
(:func:`~.plan_accuracy.reference_notes`). Problems are ``ValueError`` here; the reader of the file
words them as a :class:`~..common.errors.UserError`.
"""

from __future__ import annotations

import hashlib
import io
import json
import numbers
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Union

import numpy as np

__all__ = ["FORMAT", "MAX_READ_BYTES", "CheckData", "check_fits", "check_key", "read_check", "write_check"]

#: The file's format (the ``plan`` key was added within it: older files lack it and are read with a note).
FORMAT = 1
#: The largest check file read: the planner keeps its samples and outputs near 256 MiB.
MAX_READ_BYTES = 1 << 30

Feed = Dict[str, np.ndarray]


class CheckData(NamedTuple):
    """What a check file holds, checked (:func:`read_check`)."""

    feeds: List[Feed]
    reference: Dict[str, np.ndarray]
    labels: Optional[np.ndarray]
    axes: Dict[str, Dict[str, Optional[int]]]
    metric_reference: Optional[float]
    notes: List[str]
    key: Dict[str, Any]


def check_key(fingerprint=None, split=None) -> Dict[str, Any]:
    """The key of a plan's check: its model's SHA-256 and its held-back samples' names (count and digest).

    ``fingerprint`` is the plan's :class:`~..calibration.fingerprint.ModelFingerprint`, ``split`` its
    :class:`~..calibration.held_back.HeldBackSplit` (either may be None: that part is not recorded).
    """
    key: Dict[str, Any] = {}
    sha = "" if fingerprint is None else fingerprint.sha256
    if sha:
        key["model_sha256"] = str(sha)
    names = None if split is None else split.held_back
    if names:
        key["held_back"] = len(names)
        key["held_back_sha256"] = hashlib.sha256("\n".join(names).encode("utf-8", "surrogatepass")).hexdigest()
    return key


def check_fits(file_key: Mapping[str, Any], plan_key: Mapping[str, Any]) -> Optional[str]:
    """Why a check file with ``file_key`` is not the check of a plan with ``plan_key``, or None when it is.

    Only what both record is compared (an older plan.json or file records less).
    """
    if file_key.get("model_sha256") and plan_key.get("model_sha256") and \
            file_key["model_sha256"] != plan_key["model_sha256"]:
        return (f"it was written for the model {str(file_key['model_sha256'])[:12]}..., the plan is of "
                f"{str(plan_key['model_sha256'])[:12]}...")
    if "held_back" in file_key and "held_back" in plan_key and file_key["held_back"] != plan_key["held_back"]:
        return f"it was written for {file_key['held_back']} held-back samples, the plan holds {plan_key['held_back']}"
    if file_key.get("held_back_sha256") and plan_key.get("held_back_sha256") and \
            file_key["held_back_sha256"] != plan_key["held_back_sha256"]:
        return "it was written for other held-back samples than the plan's (their names differ)"
    return None


def write_check(feeds: Sequence[Feed], reference: Mapping[str, np.ndarray], labels, axes,
                metric_reference: Optional[float], notes: Sequence[str], key: Mapping[str, Any]) -> bytes:
    """The file's bytes: the samples, FP32's outputs and the labels as plain arrays, and a JSON member."""
    names = sorted({k for f in feeds for k in f})
    arrays: Dict[str, np.ndarray] = {}
    for i, feed in enumerate(feeds):
        for j, name in enumerate(names):
            if name in feed:
                arrays[f"in{i}_{j}"] = np.asarray(feed[name])
    outs = list(reference)
    for j, name in enumerate(outs):
        arrays[f"ref{j}"] = np.asarray(reference[name])
    if labels is not None:
        arrays["labels"] = np.asarray(labels).reshape(-1)[:len(feeds)]
    for a in arrays.values():
        if a.dtype == object:
            raise ValueError("a held-back sample or output is not a plain array")
    meta = {"format": FORMAT, "inputs": names, "outputs": outs, "samples": len(feeds),
            "axes": {"inputs": dict(axes.inputs), "outputs": dict(axes.outputs)},
            "metric_reference": metric_reference, "notes": list(notes), "plan": dict(key)}
    arrays["meta"] = np.array(json.dumps(meta))
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)  # type: ignore[arg-type]  # numpy's stub: a member could be allow_pickle
    return buf.getvalue()


# -- reading ----------------------------------------------------------------------------------------------


def _is_whole(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _text_list(v) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _axis_map(v) -> bool:
    return isinstance(v, Mapping) and all(isinstance(k, str) and (a is None or (_is_whole(a) and a >= 0))
                                          for k, a in v.items())


def _meta(z: Callable[[str], np.ndarray]) -> dict:
    raw = z("meta")
    if raw.dtype.kind != "U" or raw.size != 1:
        raise ValueError("its meta member is not text")
    meta = json.loads(str(raw.reshape(())[()]))
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError(f"format {meta.get('format') if isinstance(meta, dict) else meta!r:.40}")
    axes = meta.get("axes")
    ok = (_text_list(meta.get("inputs")) and _text_list(meta.get("outputs")) and meta["inputs"] and meta["outputs"]
          and len(set(meta["inputs"])) == len(meta["inputs"]) and len(set(meta["outputs"])) == len(meta["outputs"])
          and _is_whole(meta.get("samples"))
          and meta["samples"] >= 1 and isinstance(axes, Mapping) and _axis_map(axes.get("inputs"))
          and _axis_map(axes.get("outputs")) and _text_list(meta.get("notes", []))
          and isinstance(meta.get("plan", {}), Mapping)
          and (meta.get("metric_reference") is None or isinstance(meta.get("metric_reference"), numbers.Real)))
    if not ok:
        raise ValueError("its meta member is not what plan writes (inputs, outputs, samples, axes, notes)")
    return meta


def _along(a: np.ndarray, axis: Optional[int]) -> Optional[int]:
    """How many samples ``a`` holds along its batch ``axis`` (None: no batch axis, or not that many dims)."""
    return int(a.shape[axis]) if axis is not None and a.ndim > axis else None


def read_check(source: Union[bytes, str]) -> CheckData:
    """A check file's contents, every part checked as the module says.

    Raises
    ------
    ValueError, KeyError, OSError, EOFError, zipfile.BadZipFile, zlib.error, RuntimeError
        The file is not a check this version writes, or holds other than it declares (or is damaged: zipfile
        raises a RuntimeError, NotImplementedError among them, for a version or compression it lacks and for
        an encrypted member).
    """
    from ..common.npz_files import open_npz

    with open_npz(source) as archive:  # every header checked before its data (core/common/npz_files)
        def z(key: str) -> np.ndarray:
            if key not in archive:
                raise ValueError(f"it has no member {key!r}")
            return archive[key]

        meta = _meta(z)
        n = int(meta["samples"])
        for i in range(n):  # before any read: a file claiming 50 samples that holds 3 stops here
            missing = [f"in{i}_{j}" for j in range(len(meta["inputs"])) if f"in{i}_{j}" not in archive]
            if missing:
                raise ValueError(f"it declares {n} samples but holds {i} (no {missing[0]})")
        feeds = [{name: z(f"in{i}_{j}") for j, name in enumerate(meta["inputs"])} for i in range(n)]
        reference = {name: z(f"ref{j}") for j, name in enumerate(meta["outputs"])}
        labels = z("labels") if "labels" in archive else None
    for name, a in [(k, v) for f in feeds for k, v in f.items()] + list(reference.items()):
        if not (np.issubdtype(a.dtype, np.number) or a.dtype == bool):
            raise ValueError(f"{name!r} holds {a.dtype}, not numbers")
    for name, a in reference.items():
        # FP32's outputs are stored batch first (run_in_batches gathers them so), whatever the model's own axis:
        # a state batched on axis 1 (Silero VAD's [2, N, 128]) holds its samples on axis 0 here.
        batched = meta["axes"]["outputs"].get(name) is not None
        held = _along(a, 0 if batched else None)
        if held is not None and held != n:
            raise ValueError(f"it declares {n} samples but FP32's output {name!r} holds {held}")
    if labels is not None:
        if labels.size < n:
            raise ValueError(f"it declares {n} samples but holds {labels.size} labels")
        labels = labels.reshape(-1)[:n]
    value = meta.get("metric_reference")
    return CheckData(feeds, reference, labels, {k: dict(meta["axes"][k]) for k in ("inputs", "outputs")},
                     None if value is None else float(value), list(meta.get("notes") or []),
                     dict(meta.get("plan") or {}))
