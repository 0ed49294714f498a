"""``--no-rewrites`` of export-qdq and plan: the exact graph rewrites by default, the graph as it is with the flag."""

from __future__ import annotations

import pytest

from trtwidgets.core.model.trt_rewrites import DEFAULT_REWRITES


@pytest.mark.parametrize("command", [["export-qdq", "m.onnx", "--stats", "s.npz", "--out", "q.onnx"],
                                     ["plan", "m.onnx", "--data", "d", "--out", "p"]])
def test_the_commands_write_the_rewrites_by_default_and_the_graph_as_it_is_with_no_rewrites(command):
    from trtwidgets.cli import build_parser
    from trtwidgets.cli import export_qdq, plan

    module = export_qdq if command[0] == "export-qdq" else plan
    parser = build_parser()
    assert module.options(parser.parse_args(command)).rewrites == DEFAULT_REWRITES
    assert module.options(parser.parse_args(command + ["--no-rewrites"])).rewrites == ()
