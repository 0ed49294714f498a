"""Task metrics by name: what a plan's accuracy target is judged by, built-in or the user's own.

A task metric is ``metric(outputs) -> float`` (higher is better): ``outputs`` maps output names
to arrays over the held-back samples, stacked on the batch axis. It is made from the FP32
reference outputs, so most metrics measure agreement with FP32 and score 1.0 on FP32 itself.

Built in (:data:`REGISTRY`; ``--metric`` text, then its ``:``-separated options):

=====================================  =====================================================
``detection[:SCORE[:OUTPUT[:IOU]]]``   F1 of the candidate's detections against FP32's
                                       (YOLO-style ``[N, 4+C, A]`` or ``[N, A, 4+C]``;
                                       score threshold 0.25, class-wise NMS, match IoU 0.5)
``detection-obj[...]``                 the same with an objectness channel (YOLOv5 layout)
``top1-agreement[:OUTPUT]``            fraction of samples whose arg-max class is FP32's
``topk-agreement:K[:OUTPUT]``          top-k overlap with FP32 (:func:`.metrics.topk_agreement`)
``mask-iou[:T[:OUTPUT]]``              IoU of ``output > T`` against FP32's mask
``seg-miou[:OUTPUT]``                  mean IoU over classes of the per-pixel arg-max (axis 1 of
                                       ``[N, K, H, W]`` logits) against FP32's
``cosine[:OUTPUT]``                     the pooled output cosine of :mod:`.metrics`
``worst-group``                        the worst channel group's cosine (:mod:`.output_groups`)
``top1`` (needs labels)                top-1 accuracy against the user's labels (each in ``[0, classes)``)
=====================================  =====================================================

An SNR is a target of its own (``--target-snr``), not a task metric: FP32's SNR against itself is infinite.

**The user's own metric** is ``function(reference, candidate) -> float`` over two mappings of
output name to array (batch first). It is called once on ``(reference, reference)`` when made, so a
wrong signature fails at once with a :class:`UserError`; that value is ``TaskMetric.reference_value``.
Every call gets copies of the arrays and runs under :mod:`.metric_guard`.

**Data never names code.** Metrics are looked up by name in :data:`REGISTRY`: the built-in ones and
those registered with :func:`register_metric`. :func:`import_metric` imports ``package.module:function``
only for text the user typed (``--metric``, ``metric=``); a name read from a file (plan.json's
``metric_spec``) is only looked up, and an unregistered one raises :class:`MetricNotRegistered`.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import numpy as np

from ..common.errors import UserError
from .builtin_metrics import BUILTIN, DEFAULT_DROP, DETECTION_DROP, Factory, Outputs, TaskMetric
from .metric_guard import call_metric, guarded, trusted, user_code

__all__ = ["DEFAULT_DROP", "DETECTION_DROP", "REGISTRY", "MetricNotRegistered", "TaskMetric", "check_metric_text",
           "import_metric", "is_function_text", "make_task_metric", "metric_names", "parse_task_metric",
           "register_metric"]

_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NAME = re.compile(r"^[a-z][a-z0-9-]*$")


class MetricNotRegistered(UserError):
    """A metric named by text (a plan.json's ``metric_spec``) that is neither built in nor registered here."""


#: Metric name -> factory: the built-in ones, then what :func:`register_metric` and :func:`import_metric` add.
REGISTRY: Dict[str, Factory] = dict(BUILTIN)


#: The toolkit's own metrics: called directly (:func:`.metric_guard.trusted`), never replaced by a registration.
_BUILTIN: Dict[str, Factory] = BUILTIN

#: Name -> what it was registered with (the factory, or the function of ``package.module:function``): a later
#: registration of the same name with another one is refused unless it says ``replace=True``.
_GIVEN: Dict[str, Callable] = {}


def is_function_text(text: str) -> bool:
    """Whether ``text`` has the form ``package.module:function`` (the user's own metric, by name)."""
    module_name, sep, attr = text.partition(":")
    return bool(sep) and bool(_DOTTED.match(module_name)) and bool(_IDENT.match(attr))


def register_metric(name: str, factory: Callable, *, replace: bool = False) -> None:
    """Make a metric known by name in this process, so that a plan naming it can be judged by it.

    Parameters
    ----------
    name : str
        ``"my-metric"`` (lower case, digits and dashes; ``--metric my-metric:OPTION...`` passes the
        ``:``-separated options to the factory), or ``"package.module:function"``: the text a plan.json
        holds for a metric given that way, so that ``plan measure`` (or ``Plan``-loading code) finds it.
    factory : callable
        For a name: ``factory(reference, options, labels) -> TaskMetric``. For ``package.module:function``:
        the function itself, ``function(reference, candidate) -> float``.
    replace : bool
        Replace what the name is registered to already. Without it, registering a name again with another
        function is refused (the same function again, or a cell defining it run again, is fine): a plan that
        names the metric would otherwise be judged by another metric without a word.

    Raises
    ------
    UserError
        The name is neither form, names a built-in metric, is registered to another function (and not
        ``replace``), or the factory is not callable.
    """
    function = is_function_text(name)
    if not function and not _NAME.match(name):
        raise UserError(f"{name!r} is not a metric name.",
                        "Names are lower case, digits and dashes, or package.module:function.",
                        "Pick a name like 'my-metric'.")
    if name in _BUILTIN:
        raise UserError(f"{name!r} is a built-in metric.", "A plan that names it must mean the same metric everywhere.",
                        "Register yours under a name of its own, e.g. 'my-" + name + "'.")
    if not callable(factory):
        raise UserError(f"The metric {name!r} was registered with {type(factory).__name__}, not a function.",
                        "A registered metric is made by calling it.",
                        "Pass factory(reference, options, labels) -> TaskMetric, or for package.module:function "
                        "the function(reference, candidate) -> float itself.")
    if name in REGISTRY and not replace and not _same_function(_GIVEN.get(name), factory):
        raise UserError(f"The metric {name!r} is registered already, to {_described(_GIVEN.get(name))}.",
                        f"Registering it again with {_described(factory)} would change what every plan naming "
                        f"{name!r} is judged by, without a word.",
                        f"Register it under a name of its own, or pass replace=True: "
                        f"register_metric({name!r}, ..., replace=True).")
    REGISTRY[name] = _user_factory(factory, name) if function else factory
    _GIVEN[name] = factory


def _same_function(a: Optional[Callable], b: Callable) -> bool:
    """``a`` is ``b``, or the same code defined again (a notebook cell run twice makes a new function object)."""
    if a is None:
        return False
    if a is b:
        return True
    _, name_a, code_a = _function_parts(a)
    _, name_b, code_b = _function_parts(b)
    return (code_a is not None and code_b is not None and name_a == name_b
            and (code_a.co_code, code_a.co_consts, code_a.co_names) == (code_b.co_code, code_b.co_consts,
                                                                        code_b.co_names))


def _function_parts(fn: Callable) -> Tuple[Optional[str], Optional[str], Any]:
    """``(__module__, __qualname__, __code__)`` of ``fn``, None where a callable has none (a partial, a C function)."""
    return tuple(getattr(fn, part, None) for part in ("__module__", "__qualname__", "__code__"))  # type: ignore[return-value]


def _described(fn: Optional[Callable]) -> str:
    if fn is None:
        return "a metric registered before (not through register_metric)"
    module, qualname, _ = _function_parts(fn)
    return f"{module}.{qualname}" if module and qualname else type(fn).__name__


def import_metric(text: str) -> None:
    """Import the ``package.module:function`` the user typed and register it under that text.

    Only for text the user gave in this process (a command line's ``--metric``, the API's ``metric=``):
    a file never chooses a module to import (module docstring). Nothing is imported when the text is
    registered already.

    Raises
    ------
    UserError
        The text is not ``module:function``, the module does not import, or it has no such function.
    """
    text = text.strip()
    if text in REGISTRY:
        return
    if not is_function_text(text):
        raise UserError(f"{text!r} is neither a built-in metric nor package.module:function.",
                        f"The built-in metrics are {', '.join(metric_names())}.",
                        "Name one of them, or your own metric as mypackage.metrics:my_metric.")
    module_name, _, attr = text.partition(":")
    try:
        with user_code(text):  # the module's own code runs: its prints go to stderr, its chdir is undone
            module = importlib.import_module(module_name)
    except Exception as exc:
        raise UserError(f"The metric's module {module_name!r} does not import.", f"{type(exc).__name__}: {exc}",
                        "Install it, or put its folder on PYTHONPATH, and check the spelling.") from exc
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise UserError(f"{module_name} has no function {attr!r}.",
                        f"Found {type(fn).__name__ if fn is not None else 'nothing'} under that name.",
                        "Name a function defined in that module: package.module:function.")
    REGISTRY[text] = _user_factory(fn, text)
    _GIVEN[text] = fn


def _user_factory(fn: Callable, text: str) -> Factory:
    def factory(reference: Outputs, options: List[str], labels=None) -> TaskMetric:
        return _wrap_user(fn, text, reference)

    return factory


def metric_names() -> Tuple[str, ...]:
    """The metric names known here (built in, and registered by name), sorted."""
    return tuple(sorted(n for n in REGISTRY if not is_function_text(n)))


def _check_signature(fn: Callable, text: str) -> None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # a builtin without a signature: the trial call below decides
    try:
        sig.bind({}, {})
    except TypeError:
        raise UserError(f"{text} does not take (reference, candidate).",
                        f"Its signature is {text.split(':')[-1]}{sig}; a metric is called as "
                        "function(reference, candidate) with two dicts of output name -> array.",
                        "Write it as def metric(reference, candidate) -> float (higher is better).") from None


def _wrap_user(fn: Callable, text: str, reference: Outputs) -> TaskMetric:
    """The user's ``fn(reference, candidate)`` as a TaskMetric; every call on copies, bounded, its value checked."""
    ref = dict(reference)
    _check_signature(fn, text)
    value = call_metric(fn, text, ref, ref, on="the float model's own outputs")

    def metric(outputs: Outputs) -> float:
        return call_metric(fn, text, ref, outputs)

    trusted(metric)  # guarded inside: call_metric copies, bounds and checks every call
    return TaskMetric(metric, text, reference_value=value)


def _not_a_metric(text: str) -> UserError:
    kind = text.strip().partition(":")[0]
    if kind == "snr":
        return UserError("snr is not a task metric.",
                         "A task metric is judged by how far it falls below FP32's own score, and FP32's SNR against "
                         "itself is infinite; an SNR is a target of its own.",
                         "Use --target-snr DB (PlanTarget(snr_db=...)): the SNR of the worst channel group of every "
                         "output.")
    return UserError(f"Unknown metric {text!r}: neither a built-in metric nor package.module:function.",
                     f"The built-in metrics are {', '.join(sorted(_BUILTIN))}.",
                     "Name one of them (e.g. --metric detection), or your own as mypackage.metrics:my_metric.")


def check_metric_text(text: str) -> None:
    """Refuse, before any work, a ``--metric`` text that is neither a known name nor ``package.module:function``.

    Nothing is imported here (:func:`import_metric` does that, for text the user typed).

    Raises
    ------
    UserError
        An unknown name (the built-in names listed), or ``snr`` (a target, not a task metric).
    """
    text = text.strip()
    kind = text.partition(":")[0]
    if text in REGISTRY or kind in REGISTRY or (is_function_text(text) and kind != "snr"):
        return
    raise _not_a_metric(text)


def _not_registered(text: str) -> MetricNotRegistered:
    shown = repr(text) if len(text) <= 100 else repr(text[:97]) + "..."
    return MetricNotRegistered(
        f"The metric {shown} is not registered in this process.",
        "A plan names its metric as text; a plan folder never chooses code to import (a shared folder could name "
        "any module), so only the built-in metrics and those registered here are looked up.",
        f"If it is your own metric, register it yourself: pass --metric {text} on this command line (the module you "
        f"type is imported), or call tw.register_metric({shown}, function) in your code first.")


def parse_task_metric(text: str, reference: Outputs, labels: Optional[np.ndarray] = None, *,
                      own: bool = False) -> TaskMetric:
    """The task metric ``text`` names, looked up in :data:`REGISTRY` (module docstring lists the forms).

    Parameters
    ----------
    text : str
        ``name[:option...]`` of a known metric, or ``package.module:function``.
    reference : mapping
        FP32's outputs over the held-back samples.
    labels : ndarray, optional
        Integer classes in sample order (for ``top1``).
    own : bool
        ``text`` is the user's own, typed in this process (the API's ``metric=``, a command line): an
        unregistered ``package.module:function`` is imported (:func:`import_metric`). Never for text read
        from a file.

    Raises
    ------
    MetricNotRegistered
        A ``package.module:function`` that is not registered (and ``own`` is False).
    UserError
        An unknown name, or the metric cannot be made on this reference.
    """
    text = text.strip()
    kind, _, rest = text.partition(":")
    if text not in REGISTRY and kind not in REGISTRY:
        if not is_function_text(text) or kind == "snr":
            raise _not_a_metric(text)
        if not own:
            raise _not_registered(text)
        import_metric(text)
    if text in REGISTRY and is_function_text(text):
        return _made(REGISTRY[text], text, reference, [], labels)
    return _made(REGISTRY[kind], kind, reference, rest.split(":") if rest else [], labels)


def _made(factory: Factory, name: str, reference: Outputs, options: List[str], labels) -> TaskMetric:
    """``factory``'s metric: the toolkit's own as it is, anyone else's on copies, bounded, checked."""
    if _BUILTIN.get(name) is factory:
        try:
            made = factory(reference, options, labels)
        except (ValueError, IndexError, TypeError, ArithmeticError) as exc:  # outputs it cannot read (no classes...)
            shapes = ", ".join(f"{k} {tuple(np.shape(v))}" for k, v in list(reference.items())[:4])
            raise UserError(f"The metric {name} cannot be made on FP32's outputs ({shapes}).",
                            f"{type(exc).__name__}: {exc}"[:300],
                            "Name the output it should read after the metric (e.g. top1-agreement:OUTPUT), or pick a "
                            "metric that fits the model's outputs.") from None
        trusted(made.fn)
        return made
    # A registered factory is the user's code too: it gets copies of FP32's outputs, and its metric is guarded.
    try:
        with user_code(name):
            made = factory({k: np.array(v, copy=True) for k, v in reference.items()}, options, labels)
    except (UserError, KeyboardInterrupt):
        raise
    except Exception as exc:
        raise UserError(f"The metric {name!r} could not be made: its registered factory failed.",
                        f"{type(exc).__name__}: {exc}"[:300],
                        "Fix the factory: factory(reference, options, labels) -> TaskMetric.") from None
    if not isinstance(made, TaskMetric):
        raise UserError(f"The metric {name!r} was registered with a factory that returned {type(made).__name__}.",
                        "A registered factory makes the metric: factory(reference, options, labels) -> TaskMetric.",
                        "Return TaskMetric(fn, name) from it, or register package.module:function with the "
                        "function itself.")
    return dataclasses.replace(made, fn=guarded(made.fn, made.name))


def make_task_metric(metric: Union[str, Callable, TaskMetric], reference: Outputs,
                     labels: Optional[np.ndarray] = None, *, own: bool = False) -> TaskMetric:
    """A :class:`TaskMetric` from the API's ``metric=``: a name, ``(reference, candidate) -> float``, or one made.

    ``own``: a ``package.module:function`` text is the caller's own and may be imported (:func:`parse_task_metric`).
    """
    if isinstance(metric, TaskMetric):
        fn = guarded(metric.fn, metric.name)
        return metric if fn is metric.fn else dataclasses.replace(metric, fn=fn)
    if isinstance(metric, str):
        return parse_task_metric(metric, reference, labels, own=own)
    if callable(metric):
        return _wrap_user(metric, getattr(metric, "__qualname__", repr(metric)), reference)
    raise UserError(f"metric={metric!r} is not a metric.", "A metric is a name or a function.",
                    f"Pass one of {', '.join(metric_names())}, or f(reference, candidate) -> float.")
