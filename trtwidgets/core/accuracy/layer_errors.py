"""Where accuracy is lost: per-layer error and its growth, and the sensitivity sweep.

Both sides expose the same intermediate tensors: ONNX Runtime runs the model with
every float intermediate added as a graph output (:func:`with_intermediate_outputs`,
:func:`run_reference`), and TensorRT builds a debug engine with the same names
marked as network outputs (``trtwidgets.trt.debug_build``). :func:`layer_errors`
compares them tensor by tensor and ranks the layers by error *growth*: a layer
that only passes on the error of its inputs is not where accuracy is lost; the
one whose output is much worse than its inputs is.

Error is the noise-to-signal power ratio ``NSR = sum((x - ref)^2) / sum(ref^2)``
of a tensor, shown in dB (``error_db = -SNR``, floored at :data:`NSR_FLOOR_DB`
so that bit-exact tensors stay finite). A node's *growth* is the noise it adds:
``NSR(output) - max NSR(nearest compared tensors upstream of its inputs)`` in
linear power, shown in dB (the floor when it adds none). Graph inputs and
constants are exact. Growth is a difference of powers, not of decibels, so that
the first lossy layer of a network does not outrank a much worse layer after it
merely because its inputs were exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import onnx

from ..common.errors import UserError
from .metrics import ComparisonError, OutputMetrics, compare_tensor
from ..model.load import as_model_proto
from ..model.onnx_graph import GraphIndex

__all__ = [
    "NSR_FLOOR_DB",
    "GROWTH_MODES",
    "LayerError",
    "ErrorReport",
    "SweepStep",
    "SweepStepResult",
    "SweepResult",
    "float_intermediates",
    "with_intermediate_outputs",
    "run_reference",
    "layer_errors",
    "plan_sweep",
    "run_sweep",
]

#: Error floor in dB: float32 rounding of an exact computation sits near -140 dB.
NSR_FLOOR_DB = -160.0

_FLOAT_TYPES = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE, onnx.TensorProto.BFLOAT16)


def _node_label(node: onnx.NodeProto) -> str:
    # TensorRT's ONNX parser names a layer after its node, or after its first output.
    return node.name or (node.output[0] if node.output else node.op_type)


def float_intermediates(proto: onnx.ModelProto) -> List[str]:
    """Names of the float tensors produced by nodes, in topological (node) order.

    Graph outputs are included; constants, shape arithmetic (anything computed
    from ``Shape``/``Size`` and constants only) and tensors whose type shape
    inference cannot tell are float are left out.
    """
    try:
        inferred = onnx.shape_inference.infer_shapes(proto)
    except Exception:  # noqa: BLE001 - an uninferable model still has its declared types
        inferred = proto
    types: Dict[str, int] = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.output) + list(inferred.graph.input):
        if vi.type.HasField("tensor_type"):
            types[vi.name] = vi.type.tensor_type.elem_type
    # Only tensors that carry data derived from the inputs: shape arithmetic (Shape ->
    # Cast -> Div ...) is float in ONNX but a shape tensor in TensorRT, which cannot
    # be marked as an output and says nothing about accuracy.
    data = {i.name for i in proto.graph.input}
    names: List[str] = []
    seen = set()
    for node in proto.graph.node:
        if node.op_type in ("Constant", "Shape", "Size"):
            continue
        if not any(i in data for i in node.input if i):
            continue
        for out in node.output:
            if not out:
                continue
            data.add(out)
            if out not in seen and types.get(out) in _FLOAT_TYPES:
                seen.add(out)
                names.append(out)
    return names


def with_intermediate_outputs(proto: onnx.ModelProto, names: Optional[Sequence[str]] = None) -> onnx.ModelProto:
    """A copy of ``proto`` whose graph outputs also include ``names``.

    Parameters
    ----------
    proto : onnx.ModelProto
        Not modified.
    names : sequence of str, optional
        Tensors to expose; default :func:`float_intermediates`.

    Raises
    ------
    UserError
        A name is not produced by any node.
    """
    names = float_intermediates(proto) if names is None else list(names)
    index = GraphIndex(proto.graph)
    unknown = [n for n in names if n not in index.producer]
    if unknown:
        raise UserError(
            f"No node produces {', '.join(repr(n) for n in unknown[:5])}" + (" ..." if len(unknown) > 5 else "") + ".",
            "Only node outputs can be exposed as intermediate outputs.",
            "Pick names from float_intermediates(model).",
        )
    from ..calibration.collect import instrumented_model

    return instrumented_model(proto, names)


def run_reference(
    model,
    feeds: Mapping[str, np.ndarray],
    names: Optional[Sequence[str]] = None,
    providers: Optional[Sequence[str]] = None,
) -> Dict[str, np.ndarray]:
    """Run a model in ONNX Runtime (CPU by default) and return the named tensors.

    Parameters
    ----------
    model : str, path, onnx.ModelProto or LoadedModel
    feeds : mapping
        Input name -> array.
    names : sequence of str, optional
        Intermediate tensors to return besides the graph outputs; ``"all"`` is not
        accepted, pass ``float_intermediates(proto)``.
    providers : sequence of str, optional
        ORT execution providers; default CPU only (the FP32 reference).
    """
    import onnxruntime as ort

    proto = as_model_proto(model)
    if names:
        proto = with_intermediate_outputs(proto, names)
    opts = ort.SessionOptions()
    # No graph fusions: the reference must compute each exposed tensor as written.
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.log_severity_level = 3
    sess = ort.InferenceSession(proto.SerializeToString(), opts, providers=list(providers or ["CPUExecutionProvider"]))
    out_names = [o.name for o in sess.get_outputs()]
    values = sess.run(out_names, {k: np.asarray(v) for k, v in feeds.items()})
    return dict(zip(out_names, values))


GROWTH_MODES = ("added", "ratio", "local")


def _ratio_growth_db(error_db: float, input_error_db: float) -> float:
    """Output error minus input error, in dB (0 when both are infinite)."""
    if math.isinf(error_db) and math.isinf(input_error_db):
        return 0.0 if error_db == input_error_db else error_db
    return error_db - input_error_db


def _growth_db(error_db: float, input_error_db: float) -> float:
    """Noise power a node adds, relative to its output's signal, in dB (floored)."""
    if math.isinf(error_db) and error_db > 0:
        # A NaN/inf mismatch: new if the inputs had none, else passed on.
        return math.inf if not (math.isinf(input_error_db) and input_error_db > 0) else NSR_FLOOR_DB
    added = 10.0 ** (error_db / 10.0) - 10.0 ** (input_error_db / 10.0)
    if added <= 0.0:
        return NSR_FLOOR_DB
    return max(NSR_FLOOR_DB, 10.0 * math.log10(added))


def _nsr_db(m: OutputMetrics) -> float:
    if not m.ok:
        return math.inf
    if m.snr_db == math.inf:
        return NSR_FLOOR_DB
    return max(NSR_FLOOR_DB, -m.snr_db)


@dataclass(frozen=True)
class LayerError:
    """Error of one node output against the reference.

    Attributes
    ----------
    layer : str
        Node name (TensorRT's layer name for it), or its first output if unnamed.
    op_type : str
    tensor : str
        The compared output tensor.
    order : int
        Position of the node in topological order.
    metrics : OutputMetrics
    error_db : float
        Noise-to-signal ratio in dB (``-SNR``, floored); ``inf`` for a NaN/inf mismatch.
    input_error_db : float
        Largest error among the nearest compared tensors upstream.
    growth_db : float
        Noise power added by this node, ``NSR(out) - NSR(inputs)`` in dB; the floor
        when it adds none; ``inf`` for a new NaN/inf mismatch.
    """

    layer: str
    op_type: str
    tensor: str
    order: int
    metrics: OutputMetrics
    error_db: float
    input_error_db: float
    growth_db: float

    def to_dict(self) -> dict:
        return {
            "layer": self.layer, "op_type": self.op_type, "tensor": self.tensor, "order": self.order,
            "metrics": self.metrics.to_dict(), "error_db": _jf(self.error_db),
            "input_error_db": _jf(self.input_error_db), "growth_db": _jf(self.growth_db),
        }


def _jf(v: float):
    if math.isfinite(v):
        return float(v)
    return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")


@dataclass(frozen=True)
class ErrorReport:
    """Per-layer errors in topological order, with a ranking by growth.

    Attributes
    ----------
    layers : tuple of LayerError
        Topological order.
    missing : tuple of str
        Tensors asked for that a side did not provide (not compared).
    incomparable : tuple of str
        Tensors both sides provided with different sizes (not compared).
    """

    layers: Tuple[LayerError, ...]
    missing: Tuple[str, ...] = ()
    incomparable: Tuple[str, ...] = ()

    def ranked(self) -> Tuple[LayerError, ...]:
        """Tensors by error growth, largest first (ties: earlier layer first)."""
        return tuple(sorted(self.layers, key=lambda e: (-_finite_key(e.growth_db), e.order)))

    def ranked_layers(self, n: Optional[int] = None) -> Tuple[str, ...]:
        """Distinct layer names by their largest output growth, most sensitive first."""
        names: List[str] = []
        for e in self.ranked():
            if e.layer not in names:
                names.append(e.layer)
        return tuple(names if n is None else names[:n])

    def growth_by_layer(self) -> Dict[str, float]:
        """Layer name -> its largest output growth in dB (for tables and plots)."""
        out: Dict[str, float] = {}
        for e in self.layers:
            out[e.layer] = max(out.get(e.layer, -math.inf), e.growth_db)
        return out

    def to_rows(self) -> List[dict]:
        """One flat dict per compared tensor, ranked (for pandas / HTML tables)."""
        rows = []
        for rank, e in enumerate(self.ranked(), 1):
            m = e.metrics
            rows.append({
                "rank": rank, "layer": e.layer, "op_type": e.op_type, "tensor": e.tensor,
                "growth_db": e.growth_db, "error_db": e.error_db, "input_error_db": e.input_error_db,
                "cosine": m.cosine, "snr_db": m.snr_db, "max_abs": m.max_abs, "mean_abs": m.mean_abs,
                "nonfinite_mismatch": m.nonfinite_mismatch,
            })
        return rows

    def to_dict(self) -> dict:
        return {"layers": [e.to_dict() for e in self.layers], "missing": list(self.missing),
                "incomparable": list(self.incomparable),
                "ranked_layers": list(self.ranked_layers())}


def _finite_key(v: float) -> float:
    if math.isnan(v):
        return -math.inf
    return v


def layer_errors(
    model,
    reference: Mapping[str, np.ndarray],
    candidate: Mapping[str, np.ndarray],
    names: Optional[Sequence[str]] = None,
    growth: str = "added",
) -> ErrorReport:
    """Compare intermediate tensors of two runs of the same model and rank by growth.

    Parameters
    ----------
    model : path, onnx.ModelProto or LoadedModel
        The model whose graph defines producers and topological order.
    reference, candidate : mapping
        Tensor name -> array, e.g. :func:`run_reference` and an engine debug build.
        Several runs can be concatenated along the batch axis first.
    names : sequence of str, optional
        Tensors to compare; default all float intermediates present on both sides.
    growth : {"added", "ratio"}
        ``"added"`` (default): noise power a node adds (see the module docstring);
        ranks the layers that contribute most to the final error, the right view
        when every layer is quantized (INT8 engines). ``"ratio"``: output error minus
        input error in dB; ranks the layer where error *first appears* highest (an
        exact input makes any loss a huge ratio), the right view when a single
        layer is suspect. ``"local"``: the error of each node's output against the
        *model's own* computation of that node on the candidate's inputs (one-node
        ONNX models run in ONNX Runtime, or ``onnx.reference`` without it): the noise
        the node itself adds, free of what it inherits or amplifies; the best guide
        for which layers to keep out of INT8. Nodes that cannot be evaluated alone
        (an input neither compared nor constant) fall back to ``"added"``.

    Returns
    -------
    ErrorReport
    """
    if growth not in GROWTH_MODES:
        raise UserError(f"Unknown growth measure {growth!r}.", f"Choose one of {', '.join(GROWTH_MODES)}.", None)
    grow = _ratio_growth_db if growth == "ratio" else _growth_db
    proto = as_model_proto(model)
    graph = proto.graph
    wanted = float_intermediates(proto) if names is None else list(names)
    missing = tuple(n for n in wanted if n not in reference or n not in candidate)
    compared = [n for n in wanted if n in reference and n in candidate]
    metrics: Dict[str, OutputMetrics] = {}
    incomparable: List[str] = []
    for n in compared:
        try:
            metrics[n] = compare_tensor(reference[n], candidate[n], topk=(), name=n)
        except ComparisonError:
            # e.g. a tensor TensorRT computes at another size (padded channels): not comparable, not fatal.
            incomparable.append(n)
    err = {n: _nsr_db(m) for n, m in metrics.items()}

    upstream: Dict[str, float] = {}
    local_db: Dict[str, float] = {}
    if growth == "local":
        local_db = _local_errors(proto, reference, candidate, metrics)

    def up_error(t: str) -> float:
        # Nodes are in topological order, so an uncompared tensor's upstream error
        # was filled in when its producer was visited; graph inputs, constants and
        # anything else unknown are exact (both sides get the same values).
        if t in err:
            return err[t]
        return upstream.get(t, NSR_FLOOR_DB)

    layers: List[LayerError] = []
    for position, node in enumerate(graph.node):
        ins = [up_error(t) for t in node.input if t]
        in_err = max(ins) if ins else NSR_FLOOR_DB
        for out in node.output:
            if not out:
                continue
            if out in err:
                e = err[out]
                g = grow(e, in_err)
                if growth == "local":
                    local = local_db.get(out)
                    if local is not None:
                        g = local
                layers.append(LayerError(
                    layer=_node_label(node), op_type=node.op_type, tensor=out, order=position,
                    metrics=metrics[out], error_db=e, input_error_db=in_err, growth_db=g,
                ))
            else:
                upstream[out] = in_err
    return ErrorReport(layers=tuple(layers), missing=missing, incomparable=tuple(incomparable))


def _node_model(proto: onnx.ModelProto, index: GraphIndex, node: onnx.NodeProto,
                feeds: Mapping[str, np.ndarray]) -> onnx.ModelProto:
    inputs, inits = [], []
    for name in node.input:
        if not name or name in [i.name for i in inputs] or name in [t.name for t in inits]:
            continue
        if name in feeds:
            a = feeds[name]
            inputs.append(onnx.helper.make_tensor_value_info(
                name, onnx.helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape)))
        else:
            inits.append(onnx.numpy_helper.from_array(index.constant(name), name))
    outputs = [onnx.ValueInfoProto(name=o) for o in node.output if o]
    graph = onnx.helper.make_graph([node], "node", inputs, outputs, inits)
    m = onnx.helper.make_model(graph, opset_imports=list(proto.opset_import))
    m.ir_version = proto.ir_version
    return m


def _evaluate_node(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> Optional[List[np.ndarray]]:
    try:
        import onnxruntime as ort
    except ImportError:
        ort = None
    try:
        if ort is not None:
            so = ort.SessionOptions()
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            so.log_severity_level = 4
            sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
            return sess.run(None, dict(feeds))
        from onnx.reference import ReferenceEvaluator

        return ReferenceEvaluator(model).run(None, dict(feeds))
    except Exception:  # noqa: BLE001 - an op the evaluator cannot run alone: no local error for it
        return None


def _folded_constant(proto: onnx.ModelProto, index: GraphIndex, name: str,
                     cache: Dict[str, Optional[np.ndarray]]) -> Optional[np.ndarray]:
    """Value of a tensor computed from constants only (e.g. Reshape(const, const)), else None."""
    if name in cache:
        return cache[name]
    graph_inputs = {i.name for i in proto.graph.input} - set(index.initializers)
    needed, stack, ok = set(), [name], True
    while stack and ok:
        t = stack.pop()
        if t in needed or t in index.initializers:
            continue
        node = index.producer.get(t)
        if node is None or t in graph_inputs:
            ok = False
            break
        needed.add(t)
        stack.extend(i for i in node.input if i)
    value = None
    if ok:
        nodes = [n for n in proto.graph.node if any(o in needed for o in n.output)]
        used = {i for n in nodes for i in n.input if i in index.initializers}
        graph = onnx.helper.make_graph(nodes, "const", [], [onnx.ValueInfoProto(name=name)],
                                       [index.initializers[i] for i in sorted(used)])
        m = onnx.helper.make_model(graph, opset_imports=list(proto.opset_import))
        m.ir_version = proto.ir_version
        values = _evaluate_node(m, {})
        value = None if values is None else np.asarray(values[0])
    cache[name] = value
    return value


def _local_errors(proto: onnx.ModelProto, reference: Mapping[str, np.ndarray], candidate: Mapping[str, np.ndarray],
                  metrics: Mapping[str, OutputMetrics]) -> Dict[str, float]:
    """Output -> NSR dB of the candidate against the model's node run on the candidate's inputs."""
    index = GraphIndex(proto.graph)
    graph_inputs = {i.name for i in proto.graph.input}
    folded: Dict[str, Optional[np.ndarray]] = {}
    out: Dict[str, float] = {}
    for node in proto.graph.node:
        targets = [o for o in node.output if o in metrics]
        if not targets or any(a.type == onnx.AttributeProto.GRAPH for a in node.attribute):
            continue
        feeds: Dict[str, np.ndarray] = {}
        ok = True
        for name in node.input:
            if not name or index.is_constant(name):
                continue
            # Candidate values where compared; tensors both sides share exactly (graph inputs,
            # shape arithmetic the reference exposes) from the reference.
            if name in metrics:
                feeds[name] = np.asarray(candidate[name])
            elif name in reference and (name in graph_inputs or name not in candidate):
                feeds[name] = np.asarray(reference[name])
            elif name in candidate:
                feeds[name] = np.asarray(candidate[name])
            else:
                value = _folded_constant(proto, index, name, folded)
                if value is None:
                    ok = False
                    break
                feeds[name] = value
        if not ok:
            continue
        for k, v in list(feeds.items()):
            ref_v = reference.get(k)
            if ref_v is not None and v.dtype != np.asarray(ref_v).dtype:
                feeds[k] = v.astype(np.asarray(ref_v).dtype)
        values = _evaluate_node(_node_model(proto, index, node, feeds), feeds)
        if values is None:
            continue
        by_name = dict(zip([o for o in node.output if o], values))
        for o in targets:
            try:
                m = compare_tensor(by_name[o], candidate[o], topk=(), name=o)
            except (ComparisonError, KeyError):
                continue
            out[o] = _nsr_db(m)
    return out


# ----------------------------------------------------------------------------- sweep


@dataclass(frozen=True)
class SweepStep:
    """One step of a sensitivity sweep: keep ``layers`` out of INT8.

    Attributes
    ----------
    n : int
        How many of the most sensitive layers are kept out of INT8.
    layers : tuple of str
        Their names (ONNX node names = TensorRT layer names).
    mode : str
        ``"layer_precision"``: the recipe pins them to FP16 (TensorRT <= 10, implicit
        INT8); ``"qdq_exclude"``: the Q/DQ exporter leaves them unquantized (explicit).
    recipe : object, optional
        The step's Recipe in ``layer_precision`` mode.
    exclude : tuple of str
        Node names for ``export_qdq(..., exclude=...)`` in ``qdq_exclude`` mode.
    """

    n: int
    layers: Tuple[str, ...]
    mode: str
    recipe: object = None
    exclude: Tuple[str, ...] = ()

    def to_dict(self) -> dict:
        d = {"n": self.n, "layers": list(self.layers), "mode": self.mode, "exclude": list(self.exclude)}
        if self.recipe is not None and hasattr(self.recipe, "to_json"):
            import json

            d["recipe"] = json.loads(self.recipe.to_json())
        return d


_MODES = ("auto", "layer_precision", "qdq_exclude")


def plan_sweep(
    ranked_layers: Union[ErrorReport, Sequence[str]],
    steps: Sequence[int] = (0, 1, 2, 4, 8),
    recipe=None,
    mode: str = "auto",
    trt_major: Optional[int] = None,
    keep_precision: str = "fp16",
) -> Tuple[SweepStep, ...]:
    """Plan the sweep: step N keeps the N most sensitive layers out of INT8.

    Parameters
    ----------
    ranked_layers : ErrorReport or sequence of str
        Layers, most sensitive first.
    steps : sequence of int
        Values of N; values above the number of layers are clipped, duplicates dropped.
    recipe : Recipe, optional
        Base recipe for ``layer_precision`` mode (needed there).
    mode : str
        ``"auto"`` picks ``layer_precision`` when ``trt_major`` <= 10 and a recipe is
        given, else ``qdq_exclude``; TensorRT 11 has no layer precisions.
    trt_major : int, optional
        Installed TensorRT major version, for ``auto``.
    keep_precision : str
        Precision the kept layers get in ``layer_precision`` mode.

    Raises
    ------
    UserError
        Unknown mode, or ``layer_precision`` without a recipe or on TensorRT 11.
    """
    if mode not in _MODES:
        raise UserError(f"Unknown sweep mode {mode!r}.", f"Modes: {', '.join(_MODES)}.", "Pass one of them.")
    layers = list(ranked_layers.ranked_layers() if isinstance(ranked_layers, ErrorReport) else ranked_layers)
    if mode == "auto":
        mode = "layer_precision" if (recipe is not None and (trt_major is None or trt_major <= 10)) else "qdq_exclude"
    if mode == "layer_precision":
        if recipe is None:
            raise UserError("A layer-precision sweep needs a base recipe.", None, "Pass recipe=your INT8 recipe.")
        if trt_major is not None and trt_major >= 11:
            raise UserError(
                f"TensorRT {trt_major} has no per-layer precisions.",
                "TensorRT 11 removed layer.precision; strong typing decides precisions from the model.",
                "Use mode='qdq_exclude' with an explicitly quantized (Q/DQ) model.",
            )
    plan: List[SweepStep] = []
    seen = set()
    for n in steps:
        n = max(0, min(int(n), len(layers)))
        if n in seen:
            continue
        seen.add(n)
        chosen = tuple(layers[:n])
        if mode == "layer_precision":
            plan.append(SweepStep(n=n, layers=chosen, mode=mode, recipe=_keep_layers(recipe, chosen, keep_precision)))
        else:
            plan.append(SweepStep(n=n, layers=chosen, mode=mode, exclude=chosen))
    return tuple(plan)


def _keep_layers(recipe, layers: Sequence[str], precision: str):
    from ..recipe.recipe import LayerPrecision

    if not layers:
        return recipe
    kept = tuple(LayerPrecision(pattern=name, precision=precision, regex=False) for name in layers)
    flags = tuple(recipe.flags)
    if precision not in flags:
        flags = flags + (precision,)
    # Without a constraint TensorRT may still choose INT8 for a pinned layer.
    constraints = recipe.precision_constraints if recipe.precision_constraints != "none" else "prefer"
    return recipe.replace(layer_precisions=tuple(recipe.layer_precisions) + kept, flags=flags,
                          precision_constraints=constraints)


@dataclass(frozen=True)
class SweepStepResult:
    """Accuracy and latency of one sweep step.

    Attributes
    ----------
    step : SweepStep
    metrics : dict
        Output name -> OutputMetrics against the FP32 reference (empty on error).
    median_ms : float, optional
        Benchmark median latency.
    error : str, optional
        Why the step failed (build or run), as the user should read it.
    """

    step: SweepStep
    metrics: Dict[str, OutputMetrics] = field(default_factory=dict)
    median_ms: Optional[float] = None
    error: Optional[str] = None

    @property
    def worst_snr_db(self) -> float:
        """The lowest output SNR (``nan`` without metrics)."""
        return min((m.snr_db for m in self.metrics.values()), default=math.nan)

    @property
    def worst_cosine(self) -> float:
        return min((m.cosine for m in self.metrics.values()), default=math.nan)

    def to_dict(self) -> dict:
        return {"step": self.step.to_dict(), "metrics": {k: v.to_dict() for k, v in self.metrics.items()},
                "median_ms": self.median_ms, "error": self.error,
                "worst_snr_db": _jf(self.worst_snr_db), "worst_cosine": _jf(self.worst_cosine)}


@dataclass(frozen=True)
class SweepResult:
    """All steps of a sweep, in the planned order."""

    steps: Tuple[SweepStepResult, ...]

    def to_rows(self) -> List[dict]:
        return [{"n": r.step.n, "layers": ", ".join(r.step.layers), "worst_snr_db": r.worst_snr_db,
                 "worst_cosine": r.worst_cosine, "median_ms": r.median_ms, "error": r.error} for r in self.steps]

    def to_dict(self) -> dict:
        return {"steps": [r.to_dict() for r in self.steps]}


def run_sweep(
    plan: Sequence[SweepStep],
    build: Callable[[SweepStep], object],
    evaluate: Callable[[object], Mapping[str, OutputMetrics]],
    benchmark: Optional[Callable[[object], object]] = None,
    on_step: Optional[Callable[[SweepStepResult], None]] = None,
) -> SweepResult:
    """Build, evaluate and time each step; a failing step is recorded, not fatal.

    Parameters
    ----------
    plan : sequence of SweepStep
        From :func:`plan_sweep`.
    build : callable
        ``build(step) -> artifact`` (e.g. a BuildResult, or an engine path).
    evaluate : callable
        ``evaluate(artifact) -> {output: OutputMetrics}`` against the FP32 reference.
    benchmark : callable, optional
        ``benchmark(artifact)`` returning a median latency in ms, or an object with
        ``median_ms`` (a BenchResult).
    on_step : callable, optional
        Called with each finished step (progress display).

    Returns
    -------
    SweepResult
        Completed steps; on Ctrl-C, those finished so far.
    """
    results: List[SweepStepResult] = []
    try:
        for step in plan:
            try:
                artifact = build(step)
                metrics = dict(evaluate(artifact))
                median = None
                if benchmark is not None:
                    b = benchmark(artifact)
                    median = float(getattr(b, "median_ms", b))
                res = SweepStepResult(step=step, metrics=metrics, median_ms=median)
            except UserError as exc:
                res = SweepStepResult(step=step, error=exc.message)
            results.append(res)
            if on_step is not None:
                on_step(res)
    except KeyboardInterrupt:
        pass
    return SweepResult(steps=tuple(results))
