"""core.common.ort_log: what ONNX Runtime logs to standard error becomes notes (issue 34, item 4).

Real ONNX Runtime sessions on tiny models that make ORT log: a bicubic Resize its CPU provider cannot run
(the ViT of issue 34), a node that fails while running, an unused initializer. Standard error is read at
the file-descriptor level (pytest's ``capfd``), where ORT's C++ logger writes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from trtwidgets.core.common import ort as tort
from trtwidgets.core.common.errors import UserError
from trtwidgets.core.common.notes import collect_notes
from trtwidgets.core.common.ort_log import ort_log, parse_records

pytest.importorskip("onnxruntime")
ROOT = Path(__file__).resolve().parents[3]


def _model(nodes, inputs, outputs, inits=(), opset=13) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def cubic_3d() -> onnx.ModelProto:
    """A bicubic Resize of a 3-D tensor (a ViT's position embeddings): ORT's CPU provider refuses it."""
    return _model([helper.make_node("Resize", ["x", "roi", "scales"], ["y"], mode="cubic",
                                    name="/backbone/embeddings/Resize")],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                  [helper.make_tensor("roi", TensorProto.FLOAT, [0], []),
                   helper.make_tensor("scales", TensorProto.FLOAT, [3], [1.0, 2.0, 2.0])])


def reshape_at_runtime() -> onnx.ModelProto:
    """Reshape to a shape given as an input: a wrong one fails inside ORT's run, naming the node."""
    return _model([helper.make_node("Reshape", ["x", "shape"], ["y"], name="the_reshape")],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                   helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])


def unused_initializer() -> onnx.ModelProto:
    return _model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
                  [helper.make_tensor("left_over_weight", TensorProto.FLOAT, [2], [1.0, 2.0])])


def test_a_bicubic_resize_ort_cannot_run_is_a_note_naming_the_node_and_what_it_means(capfd):
    with collect_notes(forward=False) as notes, pytest.raises(UserError):
        tort.open_session(cubic_3d(), purpose="compute statistics")
    out, err = capfd.readouterr()
    assert "onnxruntime" not in err and "Cubic" not in err, f"ORT's line reached the terminal: {err}"
    assert len(notes) == 1, notes
    assert "'/backbone/embeddings/Resize'" in notes[0] and "Resize node" in notes[0]
    assert "'Cubic' mode only supports" in notes[0] and "compute statistics" in notes[0]
    assert "re-export" in notes[0] and "/onnxruntime_src" not in notes[0]  # what it means, not ORT's source path


def test_a_node_that_fails_while_running_is_noted_and_the_error_names_it(capfd):
    sess = tort.open_session(reshape_at_runtime(), purpose="compute the FP32 reference")
    with collect_notes(forward=False) as notes, pytest.raises(UserError, match="the_reshape"):
        sess.run(None, {"x": np.zeros((2, 3), np.float32), "shape": np.array([4, 4], np.int64)})
    assert "onnxruntime" not in capfd.readouterr().err
    assert len(notes) == 1 and "'the_reshape'" in notes[0] and "Reshape" in notes[0], notes
    assert "compute the FP32 reference" in notes[0]
    # The same session runs on good input, with nothing to say.
    with collect_notes(forward=False) as notes:
        (y,) = sess.run(None, {"x": np.ones((2, 3), np.float32), "shape": np.array([3, 2], np.int64)})
    assert y.shape == (3, 2) and notes == []


def test_warnings_are_caught_and_the_harmless_ones_said_once(capfd):
    with collect_notes(forward=False) as notes:
        sess = tort.open_session(unused_initializer())
        sess.run(None, {"x": np.ones(2, np.float32)})
    assert "onnxruntime" not in capfd.readouterr().err
    assert len(notes) == 1 and "harmless" in notes[0] and "'left_over_weight'" in notes[0], notes


def test_other_text_written_to_stderr_meanwhile_is_passed_on(capfd):
    with collect_notes(forward=False) as notes, ort_log("run the model"):
        os.write(2, b"a progress line from elsewhere\n")
        os.write(2, b"2025-01-01 00:00:00.0 [W:onnxruntime:, graph.cc:1 F] Something odd in Conv node 'c1'\n")
    err = capfd.readouterr().err
    assert err == "a progress line from elsewhere\n"
    assert len(notes) == 1 and "Conv node 'c1'" in notes[0] and "warning" in notes[0]


def test_a_verbose_log_asked_for_goes_to_the_terminal_as_ort_writes_it(capfd):
    with collect_notes(forward=False) as notes:
        sess = tort.open_session(unused_initializer(), log_severity=0)
        sess.run(None, {"x": np.ones(2, np.float32)})
    assert notes == [] and "onnxruntime" in capfd.readouterr().err


def test_coloured_multiline_records_are_parsed_whole():
    text = ("before\n\x1b[1;31m2025-01-01 00:00:00.1 [E:onnxruntime:, inference_session.cc:3437 operator()] "
            "Exception: upsamplebase.h:579 ScalesValidation 'Cubic' mode only supports:\n  * 2-D inputs or\n"
            "  * 4-D inputs\nin the Resize operator\n\x1b[m\nafter\n"
            "2025-01-01 00:00:00.2 [W:onnxruntime:log, graph.cc:4 Clean] Removing initializer w. "
            "It is not used by any node and should be removed from the model.\n")
    records, rest = parse_records(text)
    assert [r.severity for r in records] == ["E", "W"]
    assert records[0].message.endswith("in the Resize operator") and "* 4-D inputs" in records[0].message
    assert rest == "before\nafter\n"


def test_sessions_in_several_threads_share_the_catch_and_stderr_comes_back(capfd):
    errors, notes_seen = [], []

    def work():
        try:
            with collect_notes(forward=False) as notes:
                for _ in range(20):
                    sess = tort.open_session(unused_initializer(), threads=1)
                    sess.run(None, {"x": np.ones(2, np.float32)})
            notes_seen.append(notes)
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors and len(notes_seen) == 4
    assert "onnxruntime" not in capfd.readouterr().err
    os.write(2, b"after the threads\n")
    assert capfd.readouterr().err == "after the threads\n", "file descriptor 2 was not put back"


def test_no_stderr_at_all_is_no_failure(tmp_path):
    onnx.save(unused_initializer(), tmp_path / "m.onnx")
    code = ("from trtwidgets.core.common.ort import open_session; import numpy as np; "
            f"s = open_session({str(tmp_path / 'm.onnx')!r}); print(s.run(None, {{'x': np.ones(2, np.float32)}})[0])")
    proc = subprocess.run(f"{sys.executable} -c \"{code}\" 2>&-", shell=True, capture_output=True, text=True,
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
    assert proc.returncode == 0 and "[1. 1.]" in proc.stdout, proc.stdout


def test_container_thread_pinning_errors_are_one_harmless_note(capfd):
    line = (b"2025-01-01 00:00:00.0 [E:onnxruntime:Default, env.cc:234 ThreadMain] pthread_setaffinity_np failed "
            b"for thread: 1, index: 0, mask: {1, }, error code: 22 error msg: Invalid argument.\n")
    with collect_notes(forward=False) as notes, ort_log("compute statistics"):
        os.write(2, line * 3)
    assert capfd.readouterr().err == ""
    assert len(notes) == 1 and "3 line(s)" in notes[0] and "harmless" in notes[0], notes


def test_a_run_stopped_by_a_cancel_leaves_no_note_and_no_line(capfd):
    # A cancel stops the run with ORT's terminate flag: the Cancelled raised says so; no note, nothing on stderr.
    from trtwidgets.core.common.cancel import Cancelled, cancel_scope

    n = 1024
    nodes = [helper.make_node("MatMul", [f"a{i}", "w"], [f"a{i + 1}"], name=f"mm{i}") for i in range(60)]
    model = _model(nodes, [helper.make_tensor_value_info("a0", TensorProto.FLOAT, [n, n])],
                   [helper.make_tensor_value_info("a60", TensorProto.FLOAT, [n, n])],
                   [helper.make_tensor("w", TensorProto.FLOAT, [n, n], np.full(n * n, 1e-3, np.float32))])
    sess = tort.open_session(model, threads=1)
    token = threading.Event()
    threading.Timer(0.3, token.set).start()
    with collect_notes(forward=False) as notes, pytest.raises(Cancelled), cancel_scope(token):
        sess.run(None, {"a0": np.ones((n, n), np.float32)})
    assert notes == [] and "onnxruntime" not in capfd.readouterr().err


def test_a_terminate_line_is_the_toolkits_own_doing_and_no_note(capfd):
    # Some ORT versions log the terminate of a cancelled run; the Cancelled already says it.
    with collect_notes(forward=False) as notes, ort_log("compute statistics"):
        os.write(2, b"2025-01-01 00:00:00.0 [E:onnxruntime:, sequential_executor.cc:1 Execute] Exiting due to "
                    b"terminate flag being set to true.\n")
    assert notes == [] and capfd.readouterr().err == ""
