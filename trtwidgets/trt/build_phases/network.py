"""The network phase: a Builder, and the ONNX model parsed into a TensorRT network."""

from __future__ import annotations

from typing import Optional

from ...core.common.errors import TensorRTUnavailable
from .. import major_version
from ..layer_info import network_layers
from ..logger import decisive_lines, trt_logger
from .state import BuildState


def make_builder(state: BuildState):
    """Create the TensorRT logger and Builder (a Builder needs a CUDA GPU)."""
    trt = state.trt
    state.logger = trt_logger(state.collector, trt)
    try:
        builder = trt.Builder(state.logger)
    except TypeError:  # pybind: "factory function returned nullptr"
        builder = None
    if builder is None:
        said = " / ".join(decisive_lines(state.collector.lines)) or "CUDA initialisation failed."
        from ..cuda import context_broken

        if context_broken():  # a GPU is there: an earlier failure in this process broke its CUDA context
            raise TensorRTUnavailable(
                "TensorRT could not create a Builder: this process's CUDA context is broken by an earlier failure.",
                f"A sticky CUDA error (an illegal memory access in an earlier build, say) makes every later CUDA "
                f"call of the process fail. {said}",
                "Restart the process (the notebook's kernel) and build again; leave out the model whose build "
                "failed first, or build each model in its own process (plan measure does).")
        raise TensorRTUnavailable(
            "TensorRT could not create a Builder: no CUDA GPU visible.", said,
            "Build on a machine with an NVIDIA GPU and a driver that supports this TensorRT's CUDA version.")
    state.builder = builder
    return builder


def parse_network(state: BuildState) -> None:
    """Create the network and parse the ONNX model into it; list its layers (``state.layers``)."""
    trt = state.trt
    flags = 0
    if hasattr(trt.NetworkDefinitionCreationFlag, "EXPLICIT_BATCH") and major_version(trt) < 11:
        flags |= 1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH)
    state.network = state.builder.create_network(flags)
    state.parser = trt.OnnxParser(state.network, state.logger)
    state.progress.start("Parsing ONNX")
    renamed = _unique_dim_names(state)
    if renamed is None:
        ok = state.parser.parse_from_file(str(state.model.path))
    else:
        # The path lets the parser find external weights next to the user's file.
        ok = state.parser.parse(renamed, str(state.model.path))
    state.progress.finish("Parsing ONNX")
    if not ok:
        errors = []
        for i in range(state.parser.num_errors):
            e = state.parser.get_error(i)
            node = e.node() if hasattr(e, "node") else -1
            where = f" (node {node}" + (f" {e.node_name()}" if hasattr(e, "node_name") and e.node_name() else "") \
                + (f" {e.node_operator()}" if hasattr(e, "node_operator") and e.node_operator() else "") + ")" \
                if node is not None and node >= 0 else ""
            msg = f"[parser] {e.desc()}{where}"
            errors.append(msg)
            state.collector.add("ERROR", msg, source="parser")
        raise state.fail(f"TensorRT's ONNX parser rejected {state.model.path.name}.", codes=("PARSE_FAILED",))
    state.layers = network_layers(state.network, trt)


def _unique_dim_names(state: BuildState) -> Optional[bytes]:
    """The model's bytes with shared dim names made unique, or None when the file can be parsed as it is.

    TensorRT's parser makes every ``dim_param`` name one symbolic dimension: the demo
    cls model's input ``[-1, 3, "?", "?"]`` ties H to W, and the build fails with
    "?: Input dimensions with this name are inconsistent." (H200, TensorRT 8.6) for
    48x192. TensorRT gets a renamed copy; the user's file is never modified.
    """
    import onnx

    from ...core.model.dim_names import shared_dim_names, with_unique_dim_names

    state.dim_renames = ()
    if not shared_dim_names(state.model.proto, state.recipe.profiles):
        return None
    # Re-read without external data: the copy is serialized, and weights stay where they are.
    proto = onnx.load(str(state.model.path), load_external_data=False)
    copy, shared = with_unique_dim_names(proto, state.recipe.profiles)
    if copy is None:
        return None
    state.dim_renames = tuple(r for s in shared for r in s.renames)
    for s in shared:
        state.note("WARNING", f"dim name {s.describe()} would be one dimension to TensorRT; building with "
                   + ", ".join(f"{i}[{a}] -> {n!r}" for i, a, n in s.renames)
                   + " (a renamed copy; the model file is unchanged).")
    return copy.SerializeToString()
