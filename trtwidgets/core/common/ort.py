"""The one place the toolkit sets up and runs ONNX Runtime.

Calibration statistics, the FP32 reference, Q/DQ validation and per-node local errors all go
through :func:`open_session`, which decides:

- **Providers**: a requested provider this onnxruntime lacks is a :class:`UserError` naming the
  ones it has (ORT itself only warns and falls back).
- **Threads**: intra-op threads default to the CPUs this process may use
  (``TRTWIDGETS_ORT_THREADS``, then ``threads=``, override it) and never exceed them (a note says
  so; evidence: docs/evidence.md, "ort"). Inter-op threads default to 1.
- **Optimization**: ``"all"`` (ORT's default), ``"extended"``, ``"basic"`` or ``"disable"`` (for
  callers that need the graph's own tensor names). A Q/DQ model with FP8/FP16/BF16 initializers
  always runs unoptimized (ORT's QLinear fusions have no kernels for them).
- **Inputs**: feeds are cast to each input's declared element type; a cast that would change
  values is an error.
- **Loading**: a ModelProto over protobuf's 2 GB limit goes through a temporary file with
  external data; a path is handed to ORT as it is.
- **ORT's own log** while a session is made or run is caught and noted with its meaning (:mod:`.ort_log`).
- **Refusals**: ``INVALID_GRAPH`` / ``NOT_IMPLEMENTED`` / type errors become a
  :class:`ModelLoadError` naming the op and node and how to fix the model.

onnxruntime is imported inside the functions: ``trtwidgets.core`` must import without it
(the GPU machine's Python 3.9).
"""

from __future__ import annotations

import os
import re
import tempfile
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

from .errors import ModelLoadError, UserError
from .notes import note
from .ort_log import ort_log

__all__ = ["DEFAULT_PROVIDERS", "OPTIMIZATION_LEVELS", "OrtSession", "open_session", "is_available", "ort_version",
           "default_threads", "check_providers", "cast_feeds", "runs_unoptimized",
           "unoptimized_node_outputs", "explain_load_error", "explain_run_error"]

DEFAULT_PROVIDERS = ("CPUExecutionProvider",)
#: Names of ORT's graph optimization levels, mildest first.
OPTIMIZATION_LEVELS = ("disable", "basic", "extended", "all")
#: The environment variable that sets the default number of intra-op threads.
THREADS_ENV = "TRTWIDGETS_ORT_THREADS"
# protobuf cannot serialize a message of 2 GiB or more; stay clear of the edge.
_PROTO_LIMIT = 2 ** 31 - 2 ** 20

_ELEM_TYPES = {
    "tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
    "tensor(int8)": np.int8, "tensor(int16)": np.int16, "tensor(int32)": np.int32, "tensor(int64)": np.int64,
    "tensor(uint8)": np.uint8, "tensor(uint16)": np.uint16, "tensor(uint32)": np.uint32,
    "tensor(uint64)": np.uint64, "tensor(bool)": np.bool_,
}


def is_available() -> bool:
    """True when onnxruntime can be imported here."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def _import_ort():
    try:
        import onnxruntime
    except ImportError:
        raise UserError("ONNX Runtime is not installed.",
                        "This step runs the model in ONNX Runtime on the CPU (or another ORT provider).",
                        "pip install onnxruntime (or onnxruntime-gpu), or run this step on a machine that has it.") from None
    return onnxruntime


def ort_version() -> str:
    """The installed onnxruntime's version (UserError when it is not installed)."""
    return str(_import_ort().__version__)


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity where the system tells it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # macOS, Windows
        return max(1, os.cpu_count() or 1)


#: Texts of the thread notes already made in this process (one per setting, not one per session).
_THREAD_NOTES: set = set()


def bounded_threads(wanted: int, source: str) -> int:
    """``wanted`` threads, at most :func:`usable_cpus`; a note (once per setting) when it was more.

    More intra-op threads than CPUs never runs faster: ORT's threads spin while they wait, so 256 threads
    on 2 CPUs ran ten times slower, and each thread's stack is memory (99999 took gigabytes).
    """
    cpus = usable_cpus()
    if wanted <= cpus:
        return wanted
    text = (f"{source} asks for more ONNX Runtime threads than the {cpus} CPU(s) this process may use: {cpus} used "
            "(more threads than CPUs only compete for them, and each costs memory)")
    if text not in _THREAD_NOTES:
        _THREAD_NOTES.add(text)
        note(text)
    return cpus


def default_threads() -> int:
    """Intra-op threads when none are asked for: ``$TRTWIDGETS_ORT_THREADS``, else the CPUs this process may use.

    A setting above the CPUs this process may use is lowered to them, with a note.
    """
    text = os.environ.get(THREADS_ENV, "").strip()
    if text:
        if not re.fullmatch(r"[0-9]+", text) or not text.strip("0"):  # no int(): 5,000 digits raise ValueError
            raise UserError(f"{THREADS_ENV}={text[:40]!r} is not a positive whole number.",
                            "It sets how many threads ONNX Runtime uses per operator.",
                            "Set it to e.g. 2, or unset it to use every CPU this process may use.")
        # int() of a 5,000-digit string raises ValueError in Python >= 3.11; any such number is too many anyway.
        shown = text if len(text) <= 20 else text[:20] + "..."
        digits = text.lstrip("0")
        return bounded_threads(int(digits) if len(digits) <= 9 else 10 ** 9, f"{THREADS_ENV}={shown}")
    return usable_cpus()


def _provider_name(provider: Any) -> str:
    # ORT accepts "Name" or ("Name", {options}).
    return str(provider[0] if isinstance(provider, (tuple, list)) else provider)


def check_providers(providers: Optional[Sequence] = None) -> List:
    """The providers to use (default CPU), checked against what this onnxruntime offers.

    Raises
    ------
    UserError
        When a requested provider is not available, naming the ones that are.
    """
    ort = _import_ort()
    if isinstance(providers, str):  # one name, not a sequence of one-letter names
        providers = [providers]
    wanted = list(providers) if providers else list(DEFAULT_PROVIDERS)
    available = list(ort.get_available_providers())
    missing = [_provider_name(p) for p in wanted if _provider_name(p) not in available]
    if missing:
        raise UserError(f"ONNX Runtime provider {', '.join(missing)} is not available here.",
                        f"This onnxruntime {ort.__version__} offers: {', '.join(available)}.",
                        "Ask for one of those (CPUExecutionProvider always works), or install the onnxruntime "
                        "package that has it (e.g. onnxruntime-gpu for CUDAExecutionProvider).")
    return wanted


def _session_options(ort, threads: Optional[int], inter_op_threads: Optional[int], optimization: str,
                     log_severity: int):
    if optimization not in OPTIMIZATION_LEVELS:
        raise UserError(f"Unknown ONNX Runtime optimization level {optimization!r}.",
                        f"The levels are {', '.join(OPTIMIZATION_LEVELS)}.", "Pick one of those.")
    for name, value in (("threads", threads), ("inter_op_threads", inter_op_threads)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise UserError(f"{name}={value!r} is not a positive whole number.",
                            "It is how many threads ONNX Runtime may use.", f"Pass e.g. {name}=2, or leave it out.")
    level = ort.GraphOptimizationLevel
    opts = ort.SessionOptions()
    opts.graph_optimization_level = {"disable": level.ORT_DISABLE_ALL, "basic": level.ORT_ENABLE_BASIC,
                                     "extended": level.ORT_ENABLE_EXTENDED, "all": level.ORT_ENABLE_ALL}[optimization]
    opts.intra_op_num_threads = bounded_threads(int(threads), f"threads={threads}") if threads else default_threads()
    opts.inter_op_num_threads = bounded_threads(int(inter_op_threads), f"inter_op_threads={inter_op_threads}") \
        if inter_op_threads else 1
    opts.log_severity_level = int(log_severity)
    return opts


def _is_qdq(model) -> bool:
    """True for an in-memory model holding QuantizeLinear/DequantizeLinear nodes (a path is not opened here)."""
    import onnx

    return isinstance(model, onnx.ModelProto) and any(
        n.op_type in ("QuantizeLinear", "DequantizeLinear") for n in model.graph.node)


def _qdq_needs_unfused(proto) -> bool:
    """True for a Q/DQ model with FP8, FP16 or BF16 initializers (scales, weights).

    ORT fuses Q/DQ + Conv (Concat, ...) into QLinearConv (QLinearConcat, ...), which
    has no FP8 kernel and takes no FP16 scales: such a model must run its Q/DQ ops as
    they are, with graph optimizations off.
    """
    import onnx

    low = {onnx.TensorProto.FLOAT8E4M3FN, onnx.TensorProto.FLOAT8E5M2, onnx.TensorProto.FLOAT16,
           onnx.TensorProto.BFLOAT16}
    if not any(t.data_type in low for t in proto.graph.initializer):
        return False
    return any(n.op_type in ("QuantizeLinear", "DequantizeLinear") for n in proto.graph.node)


def runs_unoptimized(model) -> bool:
    """True when :func:`open_session` runs ``model`` (an in-memory model) with every graph optimization off,
    whatever level is asked: a Q/DQ model with FP8, FP16 or BF16 initializers. Its nodes then compute each on its
    own, so a part of it cut out and run alone computes what it computes inside the whole."""
    import onnx

    return isinstance(model, onnx.ModelProto) and _qdq_needs_unfused(model)


def unoptimized_node_outputs(proto) -> Optional[set]:
    """``(node name, output name)`` of every node as ONNX Runtime runs ``proto`` with graph optimizations off, or
    None where it cannot say (a model over protobuf's limit).

    Even then ORT changes the graph: an FP16 node without an FP16 kernel on the CPU runs in FP32 between Casts it
    inserts, and a run of such nodes passes FP32 values from one to the next (the tensor is renamed, never rounded
    to FP16). A node that still writes its own output name writes it as the model types it.
    """
    import onnx

    ort = _import_ort()
    opts = _session_options(ort, None, None, "disable", 3)
    data = _serialized(proto)
    if data is None:
        return None
    with tempfile.TemporaryDirectory(prefix="trtw-ort-") as tmp:
        opts.optimized_model_filepath = os.path.join(tmp, "ran.onnx")
        try:
            with ort_log("read the graph ONNX Runtime runs", proto, True):
                ort.InferenceSession(data, sess_options=opts, providers=list(DEFAULT_PROVIDERS))
            ran = onnx.load(opts.optimized_model_filepath, load_external_data=False)
        except Exception:  # any failure only means: the caller runs the whole model
            return None
    return {(n.name, o) for n in ran.graph.node for o in n.output}


class OrtSession:
    """An ONNX Runtime session with the toolkit's feeding and error rules.

    Made by :func:`open_session`. ``session`` is the underlying
    ``onnxruntime.InferenceSession`` for anything not wrapped here.
    """

    def __init__(self, session, providers: Sequence, purpose: str = "run the model", model=None,
                 log_caught: bool = True) -> None:
        self.session = session
        self.providers = list(providers)
        self.purpose = purpose
        self._model = model  # only read to name the nodes of an op that ORT's log names without one
        self._log_caught = log_caught
        self.input_names = [i.name for i in session.get_inputs()]
        self.output_names = [o.name for o in session.get_outputs()]
        self.input_types = {i.name: i.type for i in session.get_inputs()}

    def get_inputs(self):
        """The model's inputs as ORT describes them (``name``, ``type``, ``shape``)."""
        return self.session.get_inputs()

    def get_outputs(self):
        """The model's outputs as ORT describes them."""
        return self.session.get_outputs()

    def run(self, names: Optional[Sequence[str]], feeds: Mapping[str, Any]) -> List[np.ndarray]:
        """Run on ``feeds`` cast to the inputs' declared types; outputs ``names`` (None: all).

        Raises
        ------
        UserError
            When a feed cannot be cast without changing its values, or ORT fails on it
            (the node and ORT's message are named).
        """
        from . import cancel

        feeds = cast_feeds(feeds, self.input_types)
        with cancel.run_options(_import_ort()) as opts:
            try:
                with ort_log(self.purpose, self._model, self._log_caught):
                    return self.session.run(None if names is None else list(names), feeds, opts)
            except Exception as exc:
                if opts is not None and opts.terminate:  # stopped by a cancel (see core/common/cancel.py)
                    raise cancel.Cancelled() from None
                raise explain_run_error(exc, self.input_names) from None


def open_session(model, *, providers: Optional[Sequence] = None, threads: Optional[int] = None,
                 inter_op_threads: Optional[int] = None, optimization: str = "all",
                 log_severity: int = 2, purpose: str = "run the model") -> OrtSession:
    """An :class:`OrtSession` for ``model``.

    Parameters
    ----------
    model : onnx.ModelProto, str or path-like
        A path is given to ORT as it is (external data next to it is found).
    providers : sequence, optional
        ORT execution providers, names or ``(name, options)``; default CPU.
    threads, inter_op_threads : int, optional
        Intra-op threads (default :func:`default_threads`) and inter-op threads (default 1).
    optimization : {"all", "extended", "basic", "disable"}
        ORT's graph optimization level. A Q/DQ model runs at "basic" at most: its Q/DQ stays fake
        quantization (float math on the INT8 grid, what TensorRT's INT8 arithmetic computes exactly),
        never ORT's fused int8 kernels, which saturate on CPUs without VNNI. One with FP8, FP16 or BF16
        initializers runs with "disable": ORT's QLinear fusions take no FP8 or FP16 scales.
    log_severity : int
        ORT's log level (2: warnings and errors, 3: errors only). At 2 and above what ORT logs is caught and
        noted (:mod:`.ort_log`); below it (1: info, 0: verbose) ORT's log goes to standard error as ORT writes it.
    purpose : str
        What the session is for, in the error's first line ("compute the FP32 reference").

    Raises
    ------
    UserError
        onnxruntime missing, a provider missing, bad thread counts.
    ModelLoadError
        ORT refused the model (op, node, why and fix are named).
    """
    import onnx

    ort = _import_ort()
    providers = check_providers(providers)
    opts = _session_options(ort, threads, inter_op_threads, optimization, log_severity)
    if isinstance(model, onnx.ModelProto) and _qdq_needs_unfused(model):
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    elif _is_qdq(model) and optimization in ("extended", "all"):
        # Q/DQ stays fake quantization (float math on the INT8 grid), as TensorRT's exact INT8 arithmetic is:
        # ORT's fused int8 kernels saturate on CPUs without VNNI (u8s8 pairs summed in int16): a 4-layer test
        # model fell to cosine 0.954 on an AVX2-only EPYC where the fake-quantized math gives 0.999.
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    caught = int(log_severity) >= 2
    try:
        with ort_log(purpose, model, caught):
            if not isinstance(model, onnx.ModelProto):
                session = ort.InferenceSession(os.fspath(model), sess_options=opts, providers=providers)
            else:
                # Serialized once (ByteSize() first cost as much again: a ViT-S's 88 MB per candidate scored).
                data = _serialized(model)
                if data is not None:
                    session = ort.InferenceSession(data, sess_options=opts, providers=providers)
                else:
                    session = _session_via_file(ort, model, opts, providers)
    except Exception as exc:
        raise explain_load_error(exc, purpose, [_provider_name(p) for p in providers]) from None
    return OrtSession(session, providers, purpose, model, caught)


def _serialized(proto) -> Optional[bytes]:
    """``proto``'s bytes, or None where it is over protobuf's 2 GB limit (ORT reads it from a file then)."""
    from google.protobuf.message import EncodeError

    try:
        data = proto.SerializeToString()
    except (ValueError, EncodeError):  # protobuf refuses a message over 2 GB
        return None
    return data if len(data) < _PROTO_LIMIT else None


def _session_via_file(ort, proto, opts, providers):
    # Over 2 GB a ModelProto cannot be serialized in one piece: ORT reads it from disk,
    # weights as external data. The session holds everything once made, so the folder goes.
    import onnx

    with tempfile.TemporaryDirectory(prefix="trtw-ort-") as tmp:
        path = os.path.join(tmp, "model.onnx")
        # save_model moves the weights out of ``proto`` (no copy: it is over 2 GB); they are
        # read back before the folder goes, so the caller's model is whole again.
        onnx.save_model(proto, path, save_as_external_data=True, all_tensors_to_one_file=True,
                        location="model.onnx.data", size_threshold=0)
        try:
            return ort.InferenceSession(path, sess_options=opts, providers=providers)
        finally:
            onnx.load_external_data_for_model(proto, tmp)


# ----------------------------------------------------------------------------- feeds

def _cast_error(name: str, src, dst, why: str) -> UserError:
    return UserError(f"Input {name!r} is {np.dtype(src).name}, but the model declares {np.dtype(dst).name}.",
                     f"Converting it would change its values: {why}.",
                     f"Feed {name!r} as {np.dtype(dst).name} (check the preprocessing), or re-export the model "
                     "with the input type the data has.")


def _cast(name: str, value: Any, dst) -> np.ndarray:
    a = np.asarray(value)
    dst = np.dtype(dst)
    if a.dtype == dst:
        return a
    if a.dtype.kind not in "biuf":
        raise _cast_error(name, a.dtype, dst, f"{a.dtype.name} is not a number type")
    if dst.kind == "f":
        # Only a narrowing cast can overflow (float64 -> float32, float32 or int16 -> float16).
        narrowing = a.dtype.kind == "f" and a.dtype.itemsize > dst.itemsize or a.dtype.kind in "iu" and dst.itemsize <= 2
        if a.size and narrowing:
            big = float(np.nanmax(np.abs(a[np.isfinite(a)]))) if np.isfinite(a).any() else 0.0
            if big > float(np.finfo(dst).max):
                raise _cast_error(name, a.dtype, dst, f"|values| up to {big:g} exceed {dst.name}'s largest "
                                                      f"{float(np.finfo(dst).max):g}")
        return a.astype(dst)
    if dst.kind == "b":
        if a.size and not np.isin(a, (0, 1)).all():
            raise _cast_error(name, a.dtype, dst, "values other than 0 and 1 are not booleans")
        return a.astype(dst)
    # An integer input: the values must be whole numbers that fit.
    if a.size and a.dtype.kind == "f" and not (np.isfinite(a).all() and (a == np.round(a)).all()):
        raise _cast_error(name, a.dtype, dst, "it holds fractions (or NaN/inf), an integer input cannot")
    info = np.iinfo(dst)
    if a.size and (a.min() < info.min or a.max() > info.max):
        raise _cast_error(name, a.dtype, dst, f"values in [{a.min()}, {a.max()}] do not fit [{info.min}, {info.max}]")
    return a.astype(dst)


def cast_feeds(feeds: Mapping[str, Any], input_types: Mapping[str, str]) -> Dict[str, np.ndarray]:
    """``feeds`` with each array cast to its input's declared type (``"tensor(float16)"`` ...).

    Names the model does not declare, and types without a NumPy equivalent
    (bfloat16, strings), pass through unchanged for ORT to judge.

    Raises
    ------
    UserError
        When a cast would change values: fractions into an integer input, values
        out of the target's range, a non-number array into a number input.
    """
    out = {}
    for name, value in feeds.items():
        dst = _ELEM_TYPES.get(input_types.get(name, ""))
        out[name] = _cast(name, value, dst) if dst is not None else np.asarray(value)
    return out


# ----------------------------------------------------------------------------- errors

_PATTERNS = (
    # (kind, regex with groups op, node)
    ("not_implemented", re.compile(r"Could not find an implementation for (?P<op>[\w.]+)\((?P<opset>\d+)\) node "
                                   r"with name '(?P<node>[^']*)'")),
    ("type", re.compile(r"Type Error: Type '(?P<type>[^']*)' of input parameter \((?P<input>[^)]*)\) of operator "
                        r"\((?P<op>[\w.]+)\) in node \((?P<node>[^)]*)\)")),
    ("no_op", re.compile(r"In Node, \(\"(?P<node>[^\"]*)\", (?P<op>[\w.]+), \"(?P<domain>[^\"]*)\".*?"
                         r"No Op registered for [\w.]+ with domain_version of (?P<opset>\d+)", re.S)),
    ("no_op", re.compile(r"No Op registered for (?P<op>[\w.]+) with domain_version of (?P<opset>\d+)")),
)


def _first_line(text: str, limit: int = 400) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + " ..."


def explain_load_error(exc: BaseException, purpose: str = "run the model",
                       providers: Sequence[str] = DEFAULT_PROVIDERS) -> ModelLoadError:
    """A :class:`ModelLoadError` for ORT refusing a model: which op, that the model is the cause, and the fix."""
    text = str(exc)
    ort_said = f"ONNX Runtime said: {type(exc).__name__}: {_first_line(text)}"
    if "NO_SUCHFILE" in text:
        return ModelLoadError(f"ONNX Runtime found no model file, so it cannot {purpose}.", ort_said,
                              "Check the path (and that external data files sit beside the model).")
    for kind, pattern in _PATTERNS:
        m = pattern.search(text)
        if not m:
            continue
        g = m.groupdict()
        op, node = g.get("op"), g.get("node") or "(unnamed)"
        where = f"op {op}, node {node!r}" if g.get("node") is not None else f"op {op}"
        what = f"ONNX Runtime refused the model ({where}), so it cannot {purpose}."
        if kind == "not_implemented":
            why = (f"The model is the problem, not the data: {', '.join(providers)} has no kernel for {op} "
                   f"(opset {g['opset']}) with the types the model gives it. {ort_said}")
            fix = (f"Keep {op} in a type ORT runs (float32; some ops have no float16/bfloat16 kernel), re-export at "
                   "another opset, or pick a provider that implements it.")
        elif kind == "type":
            why = (f"The model is the problem, not the data: it gives {op} an input {g['input']!r} of "
                   f"{g['type']}, which the ONNX spec does not allow for {op}. {ort_said}")
            fix = ("Re-export the model so that input has an allowed type (a Cast before the node); "
                   "`trtwidgets lint MODEL.onnx` and onnx.checker.check_model(model, full_check=True) find such nodes.")
        else:
            why = (f"The model is the problem, not the data: {op} is not an op of "
                   f"{'domain ' + repr(g['domain']) if g.get('domain') else 'the ONNX standard'} at opset "
                   f"{g['opset']} (a custom op, a typo, or an op newer than the model's opset). {ort_said}")
            fix = ("Export the model with standard ONNX ops at an opset that has them, or register the custom op's "
                   "library with ONNX Runtime.")
        return ModelLoadError(what, why, fix)
    return ModelLoadError(f"ONNX Runtime could not load the model, so it cannot {purpose}.", ort_said,
                          "Check the model with `trtwidgets lint MODEL.onnx` and onnx.checker.check_model; "
                          "re-export it if it came from an older toolkit.")


_RUN_NODE = re.compile(r"running (?P<op>[\w.]+) node\. Name:'(?P<node>[^']*)'")


def explain_run_error(exc: BaseException, input_names: Sequence[str] = ()) -> UserError:
    """A :class:`UserError` for ORT failing while running (shapes, types, missing inputs), naming the node."""
    text = str(exc)
    ort_said = f"ONNX Runtime said: {type(exc).__name__}: {_first_line(text)}"
    m = _RUN_NODE.search(text)
    where = f" in {m['op']} node {m['node']!r}" if m else ""
    return UserError(f"ONNX Runtime failed while running the model{where}.", ort_said,
                     "Check the feed against the model's inputs (" + (", ".join(input_names) or "none")
                     + "): names, shapes and types; `trtwidgets lint MODEL.onnx` shows what the model declares.")

