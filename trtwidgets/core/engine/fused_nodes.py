"""Which ONNX nodes an engine layer came from.

TensorRT names a fused engine layer after the network layers it swallowed, and
the ONNX parser names network layers after ONNX nodes. The name therefore encodes
the fusion, in a handful of shapes seen in TensorRT 8.x-10.x engines:

* ``Conv_0 + Relu_1``: ``" + "`` joins layers fused vertically;
* ``conv1.weight + QuantizeLinear_8 + Conv_12``: Q/DQ fusion, with the weight
  constant's name as a part;
* ``PWN(PWN(Sigmoid_3), Mul_4)``: pointwise fusion, nested, ``", "``-separated;
* ``Conv_1 || Conv_2``: horizontal fusion;
* ``Reformatting CopyNode for Input Tensor 0 to Conv_0 + Relu_1``: a reformat
  TensorRT inserted in front of (or behind) the layer named at the end;
* ``(Unnamed Layer* 12) [Shuffle]`` and ``squeeze_after_Relu_1``: layers TensorRT
  or the parser created itself, with no ONNX node of their own;
* ``{ForeignNode[Conv_0...Relu_9]}``: a Myelin subgraph named by its first and
  last node;
* ``... [profile 1]``: the copy of a layer built for a second optimization profile.

From TensorRT 8.6 on, a DETAILED inspector also gives each layer ``Metadata``:
``[ONNX Layer: Conv_0]\\x1e[ONNX Layer: Relu_1]``. Where present it is the
authoritative list; the name is the fallback.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Optional, Tuple

__all__ = ["LayerNameInfo", "parse_layer_name", "nodes_from_metadata", "onnx_nodes", "strip_profile_suffix"]

# Parts TensorRT or its ONNX parser generate; they name no ONNX node.
_INTERNAL_PREFIXES = (
    "copied_squeeze_after_",
    "squeeze_after_",
    "unsqueeze_node_after_",
    "unsqueeze_after_",
    "shuffle_between_",
    "shuffle_after_",
    "__myl_",
    "[trainStation",
)
_UNNAMED = re.compile(r"^\(Unnamed Layer\* ?\d+\) \[[^\]]*\]")
_REFORMAT = re.compile(r"^Reformatting CopyNode for (Input|Output) Tensor (\d+) to (.*)$", re.S)
_PROFILE = re.compile(r" ?\[profile \d+\]$")
_FOREIGN = re.compile(r"^\{?ForeignNode\[(.*)\]\}?$", re.S)
# One "[ONNX Layer: name]" item, ended by a delimiter TensorRT 8.6-10 writes (the record and unit
# separators \x1e, \x1f), by "+" (TREx rewrites the separators to it), by the next item, or by the end.
_METADATA_ITEM = re.compile(r"\[ONNX Layer: (.*?)\](?=\s*(?:[\x1e\x1f+]|\[ONNX Layer: |$))", re.S)


@dataclass(frozen=True)
class LayerNameInfo:
    """What an engine layer's name says about its origin.

    Attributes
    ----------
    kind : str
        ``"fused"`` (parts joined), ``"single"``, ``"reformat"`` (a copy TensorRT
        inserted), ``"internal"`` (a layer with no ONNX node) or ``"myelin"``.
    nodes : tuple of str
        ONNX node (or initializer) names, in name order, without internal parts.
    internal : tuple of str
        Parts TensorRT or the parser generated (unnamed layers, squeezes).
    target : str or None
        For a reformat: the name of the layer it feeds or follows.
    direction : str or None
        For a reformat: ``"input"`` or ``"output"``.
    profile : int
        The optimization profile the layer belongs to (0 unless ``[profile N]``).
    """

    kind: str
    nodes: Tuple[str, ...]
    internal: Tuple[str, ...] = ()
    target: Optional[str] = None
    direction: Optional[str] = None
    profile: int = 0


def strip_profile_suffix(name: str) -> Tuple[str, int]:
    """``("Conv_0", 1)`` for ``"Conv_0 [profile 1]"``; profile 0 when unmarked."""
    m = _PROFILE.search(name)
    if not m:
        return name, 0
    return name[: m.start()], int(re.sub(r"\D", "", m.group(0)))


def _is_internal(part: str) -> bool:
    return bool(_UNNAMED.match(part)) or part.startswith(_INTERNAL_PREFIXES)


def _split_top_level(text: str, separators: Tuple[str, ...]) -> List[str]:
    """Split at separators outside parentheses and brackets.

    Unnamed layers carry balanced parentheses of their own, so counting depth
    keeps ``(Unnamed Layer* 3) [Shuffle]`` whole. Unbalanced text (a node name
    with a stray parenthesis) falls back to a plain split.
    """
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        ch = text[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth < 0:
                break
        elif depth == 0:
            for sep in separators:
                if text.startswith(sep, i):
                    parts.append(text[start:i])
                    i += len(sep)
                    start = i
                    break
            else:
                i += 1
                continue
            continue
        i += 1
    else:
        if depth == 0:
            parts.append(text[start:])
            return [p.strip() for p in parts if p.strip()]
    # Unbalanced: the plain split is the best guess.
    out = [text]
    for sep in separators:
        out = [piece for chunk in out for piece in chunk.split(sep)]
    return [p.strip() for p in out if p.strip()]


def _flatten(part: str, nodes: List[str], internal: List[str]) -> None:
    part = part.strip()
    if not part:
        return
    if part.startswith("PWN(") and part.endswith(")"):
        for sub in _split_top_level(part[4:-1], (", ", " + ", " || ")):
            _flatten(sub, nodes, internal)
        return
    m = _FOREIGN.match(part)
    if m:
        # A Myelin region names only its ends: "first...last".
        for sub in m.group(1).split("..."):
            _flatten(sub, nodes, internal)
        return
    if _is_internal(part):
        internal.append(part)
    else:
        nodes.append(part)


def parse_layer_name(name: str) -> LayerNameInfo:
    """Parse an engine layer's name into the ONNX nodes it was fused from.

    Parameters
    ----------
    name : str
        The ``Name`` of a layer in the engine inspector JSON.

    Returns
    -------
    LayerNameInfo
    """
    base, profile = strip_profile_suffix(str(name))
    m = _REFORMAT.match(base)
    if m:
        # The reformat has no node of its own; it serves the target layer.
        return LayerNameInfo("reformat", (), (), m.group(3), m.group(1).lower(), profile)
    nodes: List[str] = []
    internal: List[str] = []
    parts = _split_top_level(base, (" + ", " || "))
    for part in parts:
        _flatten(part, nodes, internal)
    if _FOREIGN.match(base.strip()):
        kind = "myelin"
    elif not nodes:
        kind = "internal"
    elif len(parts) > 1 or len(nodes) > 1 or base.startswith("PWN("):
        kind = "fused"
    else:
        kind = "single"
    return LayerNameInfo(kind, tuple(nodes), tuple(internal), None, None, profile)


def nodes_from_metadata(metadata: Optional[str]) -> Tuple[str, ...]:
    """ONNX node names from a layer's ``Metadata`` (TensorRT 8.6+).

    Parameters
    ----------
    metadata : str or None
        The raw field, e.g. ``"[ONNX Layer: Conv_0]\\x1e[ONNX Layer: Relu_1]"``.

    Returns
    -------
    tuple of str
        Node names in order, duplicates removed; empty when there is no metadata.
    """
    if not metadata:
        return ()
    out: List[str] = []
    for name in _METADATA_ITEM.findall(str(metadata)):
        if name not in out:
            out.append(name)
    return tuple(out)


def onnx_nodes(name: str, metadata: Optional[str] = None) -> Tuple[str, ...]:
    """The ONNX nodes behind an engine layer: from ``Metadata`` if present, else from the name."""
    from_meta = nodes_from_metadata(metadata)
    if from_meta:
        return from_meta
    info = parse_layer_name(name)
    seen: List[str] = []
    for n in info.nodes:
        if n not in seen:
            seen.append(n)
    return tuple(seen)
