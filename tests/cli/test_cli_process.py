"""The ``trtwidgets`` command as a process: ``python -m trtwidgets.cli`` and a reader that closes the pipe early."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from trtwidgets import demo


def _cli(*argv, **kw):
    return subprocess.run([sys.executable, "-m", "trtwidgets.cli", *argv], timeout=120, **kw)


def test_python_dash_m_runs_the_cli():
    proc = _cli("summary", str(demo.MODEL_PATH), "--json", capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert [t["name"] for t in json.loads(proc.stdout)["inputs"]] == ["x"]
    bare = _cli(capture_output=True, text=True)
    assert bare.returncode == 2 and "summary" in bare.stderr, "no command prints the help with every command"


def test_reader_closing_the_pipe_early_is_not_an_error():
    # Like `trtwidgets summary ... --json | head -1`, but deterministic: the read end is closed before the
    # command writes anything, so its first write meets a closed pipe (EPIPE).
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = _cli("summary", str(demo.MODEL_PATH), "--json", stdout=write_end, stderr=subprocess.PIPE, text=True)
    finally:
        os.close(write_end)
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stderr


def test_head_minus_one_gets_the_first_line_and_no_traceback():
    proc = subprocess.Popen([sys.executable, "-m", "trtwidgets.cli", "summary", str(demo.MODEL_PATH), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    proc.stderr.close()
    assert proc.wait(timeout=120) == 0, err
    assert first.strip() == "{" and "Traceback" not in err
