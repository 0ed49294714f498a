"""Lint rules on types and shape constants: what the float part keeps FP32, and Reshapes that pin the batch.

* ``SCHEMA_KEEPS_TYPE`` (info, when some input is FP32 only): ops whose inputs the ONNX schemas type as FP32 only or as
  integers only (Range, Resize scales, TopK's K, Reshape / Expand / Tile / Slice parameters),
  and what the Q/DQ export does with them: an FP16/BF16 float part keeps those inputs and the
  arithmetic computing them in FP32 (:mod:`..type_constraints`), integers are never converted.
* ``BATCH_PINNED_SHAPE``: a Reshape / Expand target constant whose first entry is a literal
  batch: TensorRT fails at any other batch ("reshape changes volume"). A warning where the
  input's batch is dynamic or a profile asks for another batch; info on a static-batch model
  (a re-batched copy, ``plan --batch N``, would fail).
"""

from __future__ import annotations

from collections import Counter
from typing import Dict, List, Mapping, Optional, Set, Tuple

import numpy as np
import onnx

from .context import STD_DOMAINS, LintContext, node_name
from ..type_constraints import allowed_input_types, low_precision_blockers

__all__ = ["check_schema_types", "check_batch_pinned_shapes"]

_INTEGER = {f"tensor({t})" for t in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")}
_FLOAT = {"tensor(float)", "tensor(float16)", "tensor(bfloat16)", "tensor(double)"}


def _integer_only_inputs(proto: onnx.ModelProto) -> Counter:
    opsets = {("" if o.domain == "ai.onnx" else o.domain): int(o.version) for o in proto.opset_import}
    found: Counter = Counter()
    for n in proto.graph.node:
        if n.domain not in STD_DOMAINS:
            continue
        for k, x in enumerate(n.input):
            allowed = allowed_input_types(n, k, opsets) if x else None
            if allowed and allowed <= _INTEGER:
                found[f"{n.op_type} input {k}"] += 1
    return found


def check_schema_types(ctx: LintContext) -> None:
    """SCHEMA_KEEPS_TYPE: inputs that must stay integer or FP32, and what the export does with them."""
    blockers = low_precision_blockers(ctx.proto, onnx.TensorProto.FLOAT16)
    graph = ctx.proto.graph
    fp32_only = Counter(f"{graph.node[i].op_type} input {k}" for i, k in blockers.reads)
    if not fp32_only:
        return  # integer-only inputs alone (every Reshape's shape) are business as usual, not worth a finding
    integers = _integer_only_inputs(ctx.proto)
    parts = []
    if fp32_only:
        parts.append("FP32 only: " + ", ".join(f"{name} (x{c})" for name, c in sorted(fp32_only.items())))
    if integers:
        parts.append("integer only: " + ", ".join(f"{name} (x{c})" for name, c in sorted(integers.items())))
    kept = [node_name(graph.node[i]) for i in sorted(blockers.kept_nodes)]
    computed = (f" and the {len(kept)} node(s) computing them in FP32, with Casts at the border" if kept else
                " (constants) in FP32")
    does = f"an FP16/BF16 float part (the Q/DQ export for TensorRT 10/11) keeps these inputs{computed}"
    ctx.add("SCHEMA_KEEPS_TYPE", f"Inputs the ONNX schemas type narrowly: {'; '.join(parts)}. What the export "
            f"does: {does}; integer inputs are never converted.",
            "An op's type constraints say which types each input takes (Range's T has no float16, Resize's "
            "scales are float32, Reshape's shape is int64); writing such an input in FP16 makes an invalid "
            "model that ONNX Runtime and TensorRT refuse.",
            "Nothing to do: the export handles it. To see each kept node and why, read the export report's "
            "float part (kept_fp32).", kept[:50])


def _batch_dims(ctx: LintContext) -> Dict[str, object]:
    """Input name -> its batch dim: an int (static) or the dim_param name (dynamic)."""
    out: Dict[str, object] = {}
    for vi in ctx.proto.graph.input:
        dims = vi.type.tensor_type.shape.dim
        if vi.type.tensor_type.elem_type and len(dims) >= 2:
            d = dims[0]
            out[vi.name] = d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else (d.dim_param or "?")
    return out


def _requested_batches(ctx: LintContext) -> Set[int]:
    batches: Set[int] = set()
    for profile in ctx.profiles or ():
        shapes = getattr(profile, "shapes", profile)
        if not isinstance(shapes, Mapping):
            continue
        for rng in shapes.values():
            for which in ("min", "opt", "max"):
                shape = rng.get(which) if isinstance(rng, Mapping) else getattr(rng, which, None)
                if shape is not None and len(shape):
                    batches.add(int(shape[0]))
    return batches


def _first_dims(proto: onnx.ModelProto) -> Dict[str, object]:
    try:
        inferred = onnx.shape_inference.infer_shapes(proto)
    except Exception:
        return {}
    out: Dict[str, object] = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.input):
        dims = vi.type.tensor_type.shape.dim
        if len(dims):
            d = dims[0]
            out[vi.name] = d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else (d.dim_param or None)
    return out


def _pinned(ctx: LintContext) -> List[Tuple[onnx.NodeProto, int, str]]:
    """``(node, literal batch, severity)`` of each Reshape / Expand target that pins the batch."""
    batches = _batch_dims(ctx)
    static = {b for b in batches.values() if isinstance(b, int)}
    dynamic = {b for b in batches.values() if isinstance(b, str)}
    asked = _requested_batches(ctx)
    first = _first_dims(ctx.proto)
    found = []
    for n in ctx.proto.graph.node:
        if n.op_type not in ("Reshape", "Expand") or n.domain not in STD_DOMAINS or len(n.input) < 2:
            continue
        target: Optional[np.ndarray] = ctx.index.constant(n.input[1])
        if target is None or target.ndim != 1 or target.size < 2 or int(target[0]) <= 0:
            continue
        literal = int(target[0])
        data_batch = first.get(n.input[0])
        if isinstance(data_batch, str) and data_batch in dynamic:
            found.append((n, literal, "warning"))  # the input's dynamic batch reaches a fixed target
        elif literal in static and data_batch == literal:
            other = asked - {literal}
            found.append((n, literal, "warning" if other else "info"))
    return found


def check_batch_pinned_shapes(ctx: LintContext) -> None:
    """BATCH_PINNED_SHAPE: a Reshape / Expand target with a literal batch."""
    found = _pinned(ctx)
    if not found:
        return
    for severity in ("warning", "info"):
        rows = [(n, b) for n, b, s in found if s == severity]
        if not rows:
            continue
        names = [node_name(n) for n, _ in rows]
        batches = sorted({b for _, b in rows})
        when = ("the input's batch is dynamic or a profile asks for another batch" if severity == "warning" else
                "a copy of this static model at another batch (plan --batch N, a re-exported static shape) does")
        shown = ", ".join(f"{node_name(n)} {list(map(int, ctx.index.constant_value(n.input[1])))}" for n, _ in rows[:5])
        ctx.add("BATCH_PINNED_SHAPE", f"{len(rows)} Reshape/Expand target(s) hold a literal batch of "
                f"{', '.join(map(str, batches))} ({shown}{' ...' if len(rows) > 5 else ''}): TensorRT fails at any "
                "other batch (\"reshape changes volume\"), and " + when + ".",
                "The exporter traced the model at one batch and wrote that batch into the shape constant instead "
                "of reading it from the input.",
                "Re-export with a dynamic batch (torch.onnx.export(..., dynamic_axes={input: {0: 'batch'}}); "
                "Ultralytics: model.export(format='onnx', dynamic=True)), or write 0 (copy the input's dim) or -1 "
                "for the batch in these Reshape targets.", names, severity=severity)
