"""ONNX Runtime's own log lines, caught while a session is made or run, and turned into notes.

ONNX Runtime logs errors and warnings from C++ straight to the process's standard error
(file descriptor 2): ``[E:onnxruntime:, ...] ... Resize node ... 'Cubic' mode only supports ...``.
Python cannot hook that logger, so a red line reached the terminal (or, in the App, only the
Jupyter server's log) while the toolkit's result never mentioned it.

:func:`ort_log` catches descriptor 2 in a temporary file for the duration of a session's
creation or run. Afterwards each ONNX Runtime record becomes one :func:`~.notes.note` saying
which node, what ONNX Runtime said, and what it means; anything else written to standard
error meanwhile (a progress bar in another thread) is passed on unchanged. The catch is
shared by threads (one swap of the descriptor, counted), and skipped where there is no
descriptor 2 to catch (``2>&-``) or the caller asked ONNX Runtime for its verbose log.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from .notes import note

__all__ = ["ort_log", "OrtRecord", "parse_records", "explain_record"]

# A record's first line: "<date> <time> [E:onnxruntime:<log id>, <file>:<line> <function>] <message>".
_HEAD = re.compile(r"\[(?P<sev>[VIWEF]):onnxruntime:(?P<logid>[^,\]]*),\s*(?P<where>[^\]]*)\]\s?(?P<msg>.*)")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_SEVERITY = {"V": "verbose message", "I": "message", "W": "warning", "E": "error", "F": "fatal error"}

_NODE_PATTERNS = (
    re.compile(r"running (?P<op>[\w.]+) node\. Name:'(?P<node>[^']*)'"),
    re.compile(r"(?P<op>[\w.]+)\(\d+\) node with name '(?P<node>[^']*)'"),
    re.compile(r"operator \((?P<op>[\w.]+)\) in node \((?P<node>[^)]*)\)"),
    re.compile(r"[Nn]ode \(?'?(?P<node>[^')\s]+)'?\)? of type (?P<op>[\w.]+)"),
    re.compile(r"(?P<op>[A-Z][\w.]*) node '(?P<node>[^']*)'"),
    re.compile(r"in the (?P<op>[A-Z][\w.]*) operator"),
    re.compile(r"initializer (?P<node>\S+?)\.? It is not used"),
)

#: (pattern in ONNX Runtime's message, what it means for the user, whether it is harmless)
_MEANINGS: Tuple[Tuple[re.Pattern, str, bool], ...] = (
    (re.compile(r"'Cubic' mode only supports", re.I),
     "ONNX Runtime's CPU Resize runs bicubic ('cubic') interpolation only on 2-D inputs, or on 4-D inputs scaled "
     "in their last two dimensions; this node asks for another layout, so ONNX Runtime cannot run it as exported "
     "(TensorRT can). Statistics, references and accuracy checks that need this node fail or leave it out; "
     "re-export the model with the Resize on an N,C,H,W tensor scaled in H and W, or with mode 'linear'", False),
    (re.compile(r"Removing initializer .* not used by any node", re.I),
     "harmless: ONNX Runtime drops weights that no node uses from its own copy of the model", True),
    (re.compile(r"pthread_setaffinity_np failed|Unknown CPU vendor|cpuinfo", re.I),
     "harmless: ONNX Runtime could not pin its threads to CPUs or name this CPU (usual in containers); results "
     "hold", True),
    (re.compile(r"Could not find an implementation", re.I),
     "the provider has no kernel for this op with the types the model gives it; the model cannot run here "
     "until that node runs in a type ONNX Runtime implements (float32)", False),
    (re.compile(r"Non-zero status code returned while running", re.I),
     "the node failed while the model ran, so that run produced no outputs", False),
    (re.compile(r"Exception during initialization", re.I),
     "ONNX Runtime could not prepare the node, so the model was not loaded", False),
    (re.compile(r"(?:Force fallback to CPU|not supported by .*ExecutionProvider|no kernel .* assigned)", re.I),
     "these nodes run on the CPU instead of the provider asked for: results hold, timings do not", False),
)

#: Longest message kept in a note (ONNX Runtime's messages can carry whole tensors' shapes).
MAX_MESSAGE = 400
# ORT's wrapping of a message from deeper down: "[ONNXRuntimeError] : 1 : FAIL : file.h:579 Function <message>".
_WRAPPED = re.compile(r"\[ONNXRuntimeError\] : \d+ : \w+ : ")
_SOURCE_PREFIX = re.compile(r"^(?:/?[\w.\-]+/)*[\w.\-]+\.(?:h|cc|cpp|cu):\d+ (?:[\w:~<>]+(?:\([^)]*\))?(?: \[with [^\]]*\])? )?")


def _clean(message: str) -> str:
    """ORT's message without its C++ source locations and wrappers (what it said, not where in ORT)."""
    parts = _WRAPPED.split(message)
    text = parts[-1].strip() if len(parts) > 1 else message.strip()
    text = _SOURCE_PREFIX.sub("", text)
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE] + " ..."


class OrtRecord:
    """One record of ONNX Runtime's log: severity letter, where in ORT's source, and the message text."""

    __slots__ = ("severity", "source", "message")

    def __init__(self, severity: str, source: str, message: str) -> None:
        self.severity, self.source, self.message = severity, source, message

    def __repr__(self) -> str:
        return f"OrtRecord({self.severity!r}, {self.source!r}, {self.message[:60]!r})"


def parse_records(text: str) -> Tuple[List[OrtRecord], str]:
    """ONNX Runtime's records in ``text``, and the rest of the text (not ORT's) to pass on.

    A record is its first line and the lines that follow it, up to a blank line, the next
    record, or the colour reset ORT ends a coloured record with.
    """
    found: List[Tuple[str, str, List[str]]] = []
    rest: List[str] = []
    open_ = False
    for raw in text.splitlines(keepends=True):
        line = _ANSI.sub("", raw).strip()
        ends = raw.rstrip("\r\n").endswith("\x1b[m")
        head = _HEAD.search(line)
        if head:
            found.append((head["sev"], head["where"].strip(), [head["msg"].strip()]))
            open_ = not ends
        elif open_ and line:
            found[-1][2].append(line)
            open_ = not ends
        elif open_:
            open_ = False  # a blank line or a lone colour reset ends the record
        else:
            rest.append(raw)
    return [OrtRecord(sev, where, " ".join(p for p in parts if p)) for sev, where, parts in found], "".join(rest)


def _node_of(message: str, model_nodes: Sequence[Tuple[str, str]]) -> str:
    """`` in Resize node '/up'`` (or the nodes of that op in the model), or '' when the message names none."""
    for pattern in _NODE_PATTERNS:
        m = pattern.search(message)
        if not m:
            continue
        g = m.groupdict()
        op, node = g.get("op"), g.get("node")
        if node and op:
            return f" in {op} node {node!r}"
        if node:
            return f" ({node!r})"
        names = [n for o, n in model_nodes if o == op]
        if names:
            shown = ", ".join(repr(n) for n in names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            return f" in {op} node{'s' if len(names) > 1 else ''} {shown}"
        return f" in a {op} node"
    return ""


def explain_record(record: OrtRecord, purpose: str, model_nodes: Sequence[Tuple[str, str]] = ()) -> str:
    """The note for one record: what ONNX Runtime said, where, and what it means."""
    kind = _SEVERITY.get(record.severity, "message")
    message = _clean(record.message)
    meaning = next((text for pattern, text, _ in _MEANINGS if pattern.search(record.message)),
                   "ONNX Runtime reported it while the toolkit used its results; check that node if a result looks "
                   "wrong")
    return (f"ONNX Runtime {kind} while it was used to {purpose}{_node_of(record.message, model_nodes)}: "
            f"{message} -- {meaning}")


# ----------------------------------------------------------------------------- the catch of descriptor 2

_lock = threading.Lock()


class _Capture:
    """The one capture of descriptor 2, shared by the threads inside :func:`ort_log` (under ``_lock``)."""

    depth = 0  # threads inside
    saved: Optional[int] = None  # the real descriptor 2, while caught
    file: Any = None  # the capture file (a binary TemporaryFile), made once
    offset = 0  # read up to here
    pending = b""  # a line not yet complete


_state = _Capture()


def _flush_python_stderr() -> None:
    for stream in (sys.stderr, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError, AttributeError):
            pass


def _start() -> bool:
    """Point descriptor 2 at the shared capture file (once for all threads); False where it cannot be."""
    with _lock:
        if _state.depth == 0:
            try:
                saved = os.dup(2)
            except OSError:
                return False  # no standard error at all (2>&-): nothing can reach a terminal
            try:
                if _state.file is None:
                    _state.file = tempfile.TemporaryFile(prefix="trtw-ort-log-")
                _flush_python_stderr()
                os.dup2(_state.file.fileno(), 2)
            except OSError:
                os.close(saved)
                return False
            _state.saved = saved
        _state.depth += 1
        return True


def _take_new_text(final: bool) -> bytes:
    """What was written to the capture file since the last read (whole lines, all of it when ``final``)."""
    f = _state.file
    f.seek(_state.offset)
    data = _state.pending + f.read()
    _state.offset = f.tell()
    if final:
        _state.pending = b""
        f.seek(0)
        f.truncate()
        _state.offset = 0
        return data
    cut = data.rfind(b"\n") + 1
    _state.pending = data[cut:]
    return data[:cut]


def _stop() -> List[OrtRecord]:
    """ONNX Runtime's records caught so far; other text goes on to the real standard error. The last thread
    to leave puts descriptor 2 back."""
    with _lock:
        _state.depth -= 1
        final = _state.depth == 0
        saved = _state.saved
        assert saved is not None, "_stop follows a _start that caught descriptor 2"
        try:

            _flush_python_stderr()
            records, rest = parse_records(_take_new_text(final).decode("utf-8", errors="replace"))
            if rest:
                os.write(saved, rest.encode("utf-8", errors="replace"))
        except OSError:
            records = []
        finally:
            if final:
                os.dup2(saved, 2)
                os.close(saved)
                _state.saved = None
    return records


def _model_nodes(model) -> List[Tuple[str, str]]:
    """``(op_type, name)`` of the model's nodes, for messages that name an op but not its node."""
    try:
        import onnx

        proto = model if isinstance(model, onnx.ModelProto) else (
            onnx.load(os.fspath(model), load_external_data=False) if isinstance(model, (str, os.PathLike)) else None)
    except Exception:
        return []
    if proto is None:
        return []
    return [(n.op_type, n.name or (n.output[0] if n.output else "")) for n in proto.graph.node]


@contextmanager
def ort_log(purpose: str, model=None, enabled: bool = True) -> Iterator[None]:
    """Catch ONNX Runtime's log inside the block and note each record after it.

    Parameters
    ----------
    purpose : str
        What ONNX Runtime was used for, completing "while it was used to ..." ("compute the FP32 reference").
    model : onnx.ModelProto or path, optional
        Read only when a record names an op but not its node, to name the model's nodes of that op.
    enabled : bool
        False: do nothing (the caller asked for ORT's verbose log on the terminal).
    """
    started = enabled and _start()
    try:
        yield
    finally:
        if started:
            _report(_stop(), purpose, model)


#: Records that are the toolkit's own doing, said elsewhere: a run stopped by a cancel (core/common/cancel.py).
_OWN = re.compile(r"terminate flag", re.I)


def _report(records: Sequence[OrtRecord], purpose: str, model) -> None:
    """One note per record; the harmless ones together, one note per kind (unused weights, thread pinning)."""
    nodes: Optional[List[Tuple[str, str]]] = None
    harmless: Dict[str, List[OrtRecord]] = {}
    for record in records:
        if _OWN.search(record.message):
            continue
        quiet = next((text for pattern, text, q in _MEANINGS if q and pattern.search(record.message)), None)
        if quiet is not None:
            harmless.setdefault(quiet, []).append(record)
            continue
        if nodes is None and model is not None and not any(p.search(record.message) for p in _NODE_PATTERNS[:5]):
            nodes = _model_nodes(model)
        note(explain_record(record, purpose, nodes or ()))
    for meaning, group in harmless.items():
        names = [m.group("node") for m in (_NODE_PATTERNS[-1].search(r.message) for r in group) if m]
        shown = ", ".join(repr(n) for n in names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        note(f"ONNX Runtime wrote {len(group)} line(s) while it was used to {purpose}"
             + (f" (unused initializers {shown})" if names else "") + f": {meaning}")
