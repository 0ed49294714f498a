"""The write rule (issue 22), as bad-input tables: outputs never replace an input of the run (named directly or
written inside an output folder, compared by resolved path and by the file itself), only regular files are
replaced, a set of files is replaced as one, a full disk or an interrupted run keeps the earlier files, and
no temporary file is left behind. Every row: exit 2 (130 for an interrupt) or a UserError with what, why and
fix, no traceback, the user's files unchanged (hashed before and after), nothing partial under a final name.

Signals are real: a real ``trtwidgets`` process gets SIGINT, SIGTERM or SIGKILL, either from outside once its
progress shows it is calibrating, or from itself at a named OS call of its writing (:mod:`.signal_at`).
The only mock is the disk filling up: the file objects' ``write`` raises ENOSPC (an edge).
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest

from tests.core.plan.plan_models import conv_stack, feeds
from tests.interrupts import InterruptAfter
from trtwidgets.core.common.atomic import atomic_write, write_bytes_atomic, write_text_atomic
from trtwidgets.core.common.errors import UserError
from trtwidgets.core.common.file_set import clean_leftovers, replace_file_set

from .workspace import FIXTURES, MODEL, fingerprint, make_user_files, run_cli

ROOT = Path(__file__).resolve().parents[2]
M = str(MODEL)
PLAN_SET = ("plan.json", "plan.html", "model.qdq.onnx", "held_back.npz")
#: Names a partial or unfinished write may have; none may appear where a user's final file would be.
LEFTOVER = re.compile(r"(^\..*\.tmp$)|((?<!given)\.partial)|(^\..*\.(new|old)-\d+-)")


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def make_write_workspace(ws: Path) -> None:
    """The user's files (workspace.make_user_files), an earlier plan's complete set, links and special files."""
    user = ws / "user"
    make_user_files(user)
    shutil.copy(MODEL, user / "model.onnx")
    plan = user / "plan"
    plan.mkdir()
    shutil.copy(FIXTURES / "qdq" / "cls_qdq_int8.onnx", plan / "model.qdq.onnx")
    (plan / "plan.json").write_text(json.dumps({"earlier": True, "recommended": 1}))
    (plan / "plan.html").write_text("<html>the earlier plan</html>")
    (plan / "notes.txt").write_text("the user's own notes beside the plan")
    (user / "elsewhere").mkdir()
    shutil.copy(FIXTURES / "qdq" / "cls_qdq_int8.onnx", user / "elsewhere" / "model.qdq.onnx")
    os.link(plan / "model.qdq.onnx", user / "hard.onnx")
    os.link(user / "model.onnx", user / "model_hard.onnx")
    samples = user / "samples"  # a data folder: its samples are inputs too (issue 45)
    samples.mkdir()
    for i, f in enumerate(feeds(4)):
        np.save(samples / f"s{i:03d}.npy", f["x"])
    os.link(samples / "s000.npy", user / "sample_hard.npy")
    os.mkdir(user / "bd")
    (user / "bd" / "calibration.cache").write_bytes((user / "old.cache").read_bytes())
    (user / "given.partial.cache").write_bytes((user / "old.cache").read_bytes())
    special = ws / "special"
    special.mkdir()
    os.mkfifo(special / "fifo")
    os.mkfifo(special / "fifo.html")
    os.symlink(plan / "model.qdq.onnx", special / "link.onnx")
    os.symlink(user / "stats.npz", special / "stats_link.npz")
    os.symlink(user / "model.onnx", special / "model_link.cache")
    os.symlink("/dev/null", special / "null_link.cache")
    os.symlink(samples, special / "samples_link")
    os.symlink(samples / "s003.npy", special / "sample_link.npy")
    weird = special / "weird_plan"
    weird.mkdir()
    os.mkfifo(weird / "plan.json")
    crowded = special / "crowded"
    crowded.mkdir()
    for i in range(501):
        (crowded / f"f{i}").write_bytes(b"")
    odd = special / "odd_plan"
    (odd / "plan.html").mkdir(parents=True)
    data = ws / "data"
    data.mkdir()
    for i, f in enumerate(feeds(16)):
        np.save(data / f"s{i:03d}.npy", f["x"])
    onnx.save(conv_stack(), ws / "stack.onnx")


def _special_state(ws: Path):
    return {p.name: stat.S_IFMT(os.lstat(p).st_mode) for p in (ws / "special").iterdir()}


def _leftovers(*folders: Path):
    return [p for folder in folders for p in folder.rglob("*") if LEFTOVER.search(p.name)]


#: (id, argv with {user}/{ws}/{sp} placeholders, a phrase the message must hold)
CLI_CASES = [
    # an output folder's files against the inputs (issue 22: `plan u/model.qdq.onnx --out u` deleted its input)
    ("plan-out-holds-its-model", ["plan", "{user}/plan/model.qdq.onnx", "--data", "{ws}/data", "--out", "{user}/plan"],
     "own input"),
    ("plan-out-holds-its-model-spelt-otherwise", ["plan", "{user}/elsewhere/../plan/model.qdq.onnx", "--data",
                                                   "{ws}/data", "--out", "{user}/plan/"], "own input"),
    ("plan-model-is-a-symlink-into-out", ["plan", "{sp}/link.onnx", "--data", "{ws}/data", "--out", "{user}/plan"],
     "own input"),
    ("plan-model-is-a-hard-link-into-out", ["plan", "{user}/hard.onnx", "--data", "{ws}/data", "--out",
                                            "{user}/plan"], "own input"),
    ("cache-partial-name-is-an-input", ["calibrate", M, "--data", "demo", "--cache", "{user}/given.cache",
                                        "--resume", "{user}/given.partial.cache"], "interrupted run"),
    ("plan-held-back-is-plan-json", ["plan", "{ws}/stack.onnx", "--data", "{ws}/data", "--out", "{user}/plan",
                                     "--held-back", "{user}/plan/plan.json"], "plan.json"),
    ("plan-labels-is-plan-html", ["plan", "{ws}/stack.onnx", "--data", "{ws}/data", "--out", "{user}/plan",
                                  "--labels", "{user}/plan/plan.html"], "plan.html"),
    ("run-build-dir-holds-its-recipe", ["run", "{user}/bd/calibration.cache", "--report", "{user}/report.html",
                                        "--build-dir", "{user}/bd"], "own input"),
    # hard and symbolic links to an input are the input
    ("export-out-is-a-hard-link-of-the-model", ["export-qdq", "{user}/model.onnx", "--stats", "{user}/stats.npz",
                                                "--out", "{user}/model_hard.onnx"], "own input"),
    ("export-out-is-a-symlink-to-the-stats", ["export-qdq", M, "--stats", "{user}/stats.npz", "--out",
                                              "{sp}/stats_link.npz"], "own input"),
    ("calibrate-cache-is-a-symlink-to-the-model", ["calibrate", "{user}/model.onnx", "--data", "demo", "--cache",
                                                   "{sp}/model_link.cache"], "own input"),
    ("calibrate-stats-and-cache-hard-linked", ["calibrate", M, "--data", "demo", "--stats", "{user}/model_hard.onnx",
                                               "--cache", "{user}/model.onnx"], "both name"),
    ("calibrate-out-is-the-model", ["calibrate", "{user}/model.onnx", "--data", "demo", "--out", "{user}/model.onnx"],
     "own input"),
    ("calibrate-out-and-stats-are-one-file", ["calibrate", M, "--data", "demo", "--out", "{user}/cal.npz", "--stats",
                                              "{user}/cal.npz"], "both name"),
    ("calibrate-out-is-a-fifo", ["calibrate", M, "--data", "demo", "--out", "{sp}/fifo"], "named pipe"),
    ("export-out-is-its-calibration", ["export-qdq", M, "--calibration", "{user}/stats.npz", "--out",
                                       "{user}/stats.npz"], "own input"),
    # only regular files are replaced (issue 22: a FIFO or /dev/null became a regular file)
    ("cache-is-a-fifo", ["calibrate", M, "--data", "demo", "--cache", "{sp}/fifo"], "named pipe"),
    ("cache-is-dev-null", ["calibrate", M, "--data", "demo", "--cache", "/dev/null"], "character device"),
    ("cache-is-a-symlink-to-dev-null", ["calibrate", M, "--data", "demo", "--cache", "{sp}/null_link.cache"],
     "character device"),
    ("stats-is-dev-zero", ["calibrate", M, "--data", "demo", "--stats", "/dev/zero"], "character device"),
    ("export-out-is-dev-null", ["export-qdq", M, "--stats", "{user}/stats.npz", "--out", "/dev/null"],
     "character device"),
    ("export-out-is-a-fifo", ["export-qdq", M, "--stats", "{user}/stats.npz", "--out", "{sp}/fifo"], "named pipe"),
    ("export-out-is-a-folder", ["export-qdq", M, "--stats", "{user}/stats.npz", "--out", "{user}/plan"], "is a folder"),
    ("inspect-csv-is-a-fifo", ["inspect", str(FIXTURES / "trt86" / "tiny" / "fp32"), "--csv", "{sp}/fifo"],
     "named pipe"),
    ("run-report-is-a-fifo", ["run", "{user}/recipe.json", "--report", "{sp}/fifo.html"], "named pipe"),
    ("compare-reference-is-dev-null", ["compare", "{user}/build", "--held-back", "demo", "--save-reference", "/dev/null"],
     "character device"),
    ("bench-profile-is-a-fifo", ["bench", "{user}/build", "--save-profile", "{sp}/fifo"], "named pipe"),
    ("plan-out-is-dev-null", ["plan", "{ws}/stack.onnx", "--data", "{ws}/data", "--out", "/dev/null"],
     "character device"),
    ("plan-out-holds-a-fifo-plan-json", ["plan", "{ws}/stack.onnx", "--data", "{ws}/data", "--out",
                                         "{sp}/weird_plan"], "named pipe"),
    ("plan-out-is-a-crowded-folder", ["plan", "{ws}/stack.onnx", "--data", "{ws}/data", "--out", "{sp}/crowded"],
     "more than 500"),
    ("plan-out-holds-a-folder-plan-html", ["plan", "{ws}/stack.onnx", "--data", "{ws}/data", "--out",
                                           "{sp}/odd_plan"], "is a folder"),
    # the files of an input folder are inputs (issue 45: `calibrate --data data --out data/s000.npy` replaced a sample)
    ("calibrate-out-is-a-data-sample", ["calibrate", "{ws}/stack.onnx", "--data", "{user}/samples", "--out",
                                        "{user}/samples/s000.npy"], "is a file of the --data folder"),
    ("calibrate-stats-is-a-sample-through-dotdot", ["calibrate", "{ws}/stack.onnx", "--data", "{user}/samples",
                                                    "--stats", "{user}/bd/../samples/s001.npy"], "the run's own input"),
    ("calibrate-cache-is-a-hard-link-of-a-sample", ["calibrate", "{ws}/stack.onnx", "--data", "{user}/samples",
                                                    "--cache", "{user}/sample_hard.npy"], "(s000.npy)"),
    ("calibrate-out-through-a-symlinked-data-folder", ["calibrate", "{ws}/stack.onnx", "--data", "{user}/samples",
                                                       "--out", "{sp}/samples_link/s002.npy"], "--data folder"),
    ("calibrate-out-is-a-link-to-a-sample", ["calibrate", "{ws}/stack.onnx", "--data", "{sp}/samples_link", "--out",
                                             "{sp}/sample_link.npy"], "(s003.npy)"),
    ("export-out-is-a-held-back-sample", ["export-qdq", "{ws}/stack.onnx", "--stats", "{user}/stats.npz", "--data",
                                          "{user}/samples", "--out", "{user}/samples/s003.npy"], "--data folder"),
    ("compare-reference-is-a-sample", ["compare", "{user}/build", "--held-back", "{user}/samples", "--save-reference",
                                       "{user}/sample_hard.npy"], "is a file of the --held-back folder"),
    ("inspect-csv-over-the-build-folders-json", ["inspect", "{user}/build", "--csv", "{user}/build/engine.graph.json"],
     "is a file of the graph folder"),
    # names the file system cannot hold (issue 45: OSError tracebacks, before or after the work)
    ("export-out-name-of-256-bytes", ["export-qdq", M, "--stats", "{user}/stats.npz", "--out",
                                      "{ws}/" + "n" * 251 + ".onnx"], "is 256 bytes long"),
    ("calibrate-out-name-of-300-bytes", ["calibrate", M, "--data", "demo", "--out", "{ws}/" + "b" * 296 + ".npz"],
     "is 300 bytes long"),
    ("calibrate-cache-name-of-256-bytes-in-utf-8", ["calibrate", M, "--data", "demo", "--cache",
                                                    "{ws}/" + "\u00e9" * 125 + ".cache"], "is 256 bytes long"),
    ("plan-out-folder-name-too-long", ["plan", "{ws}/stack.onnx", "--data", "{ws}/data", "--out",
                                       "{ws}/" + "d" * 300 + "/plan"], "is 300 bytes long"),
    ("share-out-path-over-4096-bytes", ["share", "{user}/none.ipynb", "--out", "{ws}/" + ("p" * 200 + "/") * 21
                                        + "page.html"], "bytes long"),
    ("calibrate-model-name-too-long", ["calibrate", "{ws}/" + "m" * 256 + ".onnx", "--data", "demo", "--cache",
                                       "{user}/old.cache"], "is 261 bytes long"),
]


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    return tmp_path_factory.mktemp("write_rule_ws")


@pytest.fixture()
def user(ws):
    for name in ("user", "special", "data"):
        if (ws / name).exists():
            shutil.rmtree(ws / name)
    for p in ws.iterdir():
        if p.is_dir() and LEFTOVER.search(p.name):
            shutil.rmtree(p)
    make_write_workspace(ws)
    return ws / "user"


def _argv(argv, ws):
    return [a.replace("{user}", str(ws / "user")).replace("{ws}", str(ws)).replace("{sp}", str(ws / "special"))
            for a in argv]



def _assert_clean_refusal(err, out, command):
    assert "Traceback" not in err + out
    assert err.startswith(f"trtwidgets {command}: "), err
    assert "Why:" in err and "Fix:" in err, f"the message lacks a why or a fix:\n{err}"


def test_the_table_is_big_and_its_entries_distinct():
    assert len(CLI_CASES) >= 25
    assert len({c[0] for c in CLI_CASES}) == len(CLI_CASES)
    assert len({tuple(c[1]) for c in CLI_CASES}) == len(CLI_CASES)


@pytest.mark.parametrize("argv, phrase", [pytest.param(c[1], c[2], id=c[0]) for c in CLI_CASES])
def test_an_output_that_would_break_the_write_rule_is_refused(ws, user, capsys, argv, phrase):
    argv = _argv(argv, ws)
    before, special = fingerprint(user), _special_state(ws)
    rc = run_cli(argv)
    out, err = capsys.readouterr()
    assert rc == 2, f"exit {rc}\n{err}"
    _assert_clean_refusal(err, out, argv[0])
    assert phrase in err, err
    assert fingerprint(user) == before, "a file the user had was changed"
    assert _special_state(ws) == special, "a pipe, device or link was replaced"
    assert not _leftovers(ws), _leftovers(ws)


def test_names_at_the_limit_are_written_and_their_hidden_names_fit(ws, user, capsys):
    """Issue 45: a legal 255-byte --out was refused, because the temporary file's name was longer than it."""
    from trtwidgets.core.common.write_rule import partial_path

    longest = {"export": "q" * 250 + ".onnx", "calibrate": "\u00e9" * 124 + "x.cache", "plan": "p" * 255}
    assert all(len(os.fsencode(n)) == 255 for n in longest.values())
    assert run_cli(["export-qdq", M, "--stats", str(user / "stats.npz"), "--out", str(ws / longest["export"])]) == 0
    assert run_cli(["calibrate", M, "--data", "demo", "--max-samples", "2", "--no-progress", "--cache",
                    str(ws / longest["calibrate"])]) == 0
    assert run_cli(["plan", str(ws / "stack.onnx"), "--data", str(ws / "data"), "--out", str(ws / longest["plan"]),
                    "--no-progress"]) == 0
    capsys.readouterr()
    assert (ws / longest["export"]).stat().st_size > 1000 and (ws / longest["calibrate"]).stat().st_size > 10
    assert (ws / longest["plan"] / "plan.json").is_file() and not _leftovers(ws)
    for name in longest.values():  # where an interrupted run would write: within the limit, and its own name
        partial = partial_path(ws / name)
        assert len(os.fsencode(partial.name)) <= 255 and partial != ws / name and partial_path(partial) == partial
    for name in longest.values():
        target = ws / name
        shutil.rmtree(target) if target.is_dir() else target.unlink()


def test_a_killed_write_of_a_long_name_leaves_a_temporary_file_the_next_write_removes(tmp_path):
    from trtwidgets.core.common.atomic import _temp_prefix, remove_stale_temps

    target = tmp_path / ("k" * 251 + ".txt")
    left = tmp_path / f"{_temp_prefix(target)}{_dead_pid()}.abcdefgh.tmp"
    assert len(os.fsencode(left.name)) <= 255
    left.write_bytes(b"half")
    write_text_atomic(target, "whole")
    assert target.read_text() == "whole" and not left.exists()
    assert remove_stale_temps(target) == [] and sorted(p.name for p in tmp_path.iterdir()) == [target.name]


# ---- a full disk: the file objects' write raises ENOSPC (the edge); everything else is the real code ----------

class _FullDisk:
    """``os.fdopen`` whose files fail with ENOSPC from the ``first``-th file opened on (counting from 1)."""

    def __init__(self, first=1):
        self.first, self.opened = first, 0
        self.real = os.fdopen

    def __call__(self, fd, *args, **kwargs):
        f = self.real(fd, *args, **kwargs)
        self.opened += 1
        return _FullFile(f) if self.opened >= self.first else f


class _FullFile:
    def __init__(self, f):
        self._f = f

    def write(self, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()

    def __getattr__(self, name):
        return getattr(self._f, name)


FULL_DISK_CASES = [
    ("calibrate-stats-and-cache", ["calibrate", M, "--data", "demo", "--max-samples", "2", "--no-progress",
                                   "--stats", "{user}/stats.npz", "--cache", "{user}/old.cache"], 1),
    ("calibrate-cache-after-stats", ["calibrate", M, "--data", "demo", "--max-samples", "2", "--no-progress",
                                     "--stats", "{ws}/new_stats.npz", "--cache", "{user}/old.cache"], 2),
    ("export-qdq", ["export-qdq", M, "--stats", "{user}/stats.npz", "--out", "{user}/old.qdq.onnx"], 1),
    ("plan-first-file-int8", ["plan", "{ws}/stack.onnx", "--data", "{ws}/data", "--out", "{user}/plan", "--no-progress",
                              "--trt-version", "10.16", "--batch", "32"], 1),
    ("plan-last-file-int8", ["plan", "{ws}/stack.onnx", "--data", "{ws}/data", "--out", "{user}/plan", "--no-progress",
                             "--trt-version", "10.16", "--batch", "32"], 3),
    ("plan-last-file-fp16", ["plan", "{ws}/stack.onnx", "--data", "{ws}/data", "--out", "{user}/plan", "--no-progress",
                             "--trt-version", "10.16"], 2),
    ("run-report", ["run", "{user}/recipe.json", "--no-calibrate", "--no-build", "--report", "{user}/report.html"], 1),
]


@pytest.mark.parametrize("argv, first", [pytest.param(c[1], c[2], id=c[0]) for c in FULL_DISK_CASES])
def test_a_full_disk_keeps_the_earlier_files(ws, user, capsys, monkeypatch, argv, first):
    argv = _argv(argv, ws)
    before = fingerprint(user)
    disk = _FullDisk(first)
    monkeypatch.setattr(os, "fdopen", disk)
    rc = run_cli(argv)
    out, err = capsys.readouterr()
    assert disk.opened >= first, "the run never reached the write that fails"
    assert rc == 2, f"exit {rc}\n{err}"
    _assert_clean_refusal(err, out, argv[0])
    assert "No space left on device" in err and "full" in err and "kept as" in err, err
    assert fingerprint(user) == before, "a file the user had was changed"
    assert not _leftovers(ws), _leftovers(ws)


def test_a_file_too_large_for_the_limit_is_a_clean_exit_2(ws, user):
    # A real failing write, not a mock: the process may not write files over 64 KiB (ulimit -f), so the kernel
    # refuses the Q/DQ model's bytes with EFBIG.
    import resource

    before = fingerprint(user)

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))

    proc = subprocess.run([sys.executable, "-m", "trtwidgets", "export-qdq", M, "--stats", str(user / "stats.npz"),
                           "--out", str(user / "old.qdq.onnx")], cwd=ROOT, capture_output=True, text=True,
                          preexec_fn=limit, timeout=300, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 2, proc.stderr
    _assert_clean_refusal(proc.stderr, proc.stdout, "export-qdq")
    assert "larger than" in proc.stderr and "kept as it was" in proc.stderr
    assert fingerprint(user) == before
    assert not _leftovers(ws)


# ---- the Python API ----------------------------------------------------------------------------------------------

def _stats(user):
    from trtwidgets.core.calibration.stats import load_stats

    return load_stats(user / "stats.npz")


API_CASES = [
    ("export-qdq-over-its-model", lambda ws, user: __import__("trtwidgets").export_qdq(
        user / "model.onnx", user / "stats.npz", user / "model.onnx")),
    ("export-qdq-over-a-hard-link-of-its-model", lambda ws, user: __import__("trtwidgets").export_qdq(
        user / "model.onnx", user / "stats.npz", user / "model_hard.onnx")),
    ("export-qdq-over-its-statistics", lambda ws, user: __import__("trtwidgets").export_qdq(
        user / "model.onnx", user / "stats.npz", ws / "special" / "stats_link.npz")),
    ("export-qdq-to-dev-null", lambda ws, user: __import__("trtwidgets").export_qdq(
        user / "model.onnx", user / "stats.npz", "/dev/null")),
    ("save-stats-to-a-fifo", lambda ws, user: __import__("trtwidgets.core.calibration.stats", fromlist=["x"]).save_stats(
        _stats(user), ws / "special" / "fifo")),
    ("save-stats-to-a-folder", lambda ws, user: __import__("trtwidgets.core.calibration.stats", fromlist=["x"])
     .save_stats(_stats(user), user / "plan")),
    ("save-calibration-to-a-fifo", lambda ws, user: __import__("trtwidgets").Calibration.fit(_stats(user)).save(
        ws / "special" / "fifo")),
    ("save-calibration-to-a-folder", lambda ws, user: __import__("trtwidgets").Calibration.fit(_stats(user)).save(
        user / "plan")),
    ("write-cache-to-dev-null", lambda ws, user: __import__("trtwidgets.core.calibration.cache", fromlist=["x"])
     .write_cache({"x": 1.0}, "/dev/null")),
    ("write-cache-through-a-symlink-to-dev-null", lambda ws, user: __import__(
        "trtwidgets.core.calibration.cache", fromlist=["x"]).write_cache({"x": 1.0}, ws / "special" / "null_link.cache")),
    ("save-recipe-to-a-fifo", lambda ws, user: __import__("trtwidgets.core.recipe.recipe", fromlist=["x"]).save_recipe(
        __import__("trtwidgets.core.recipe.recipe", fromlist=["x"]).load_recipe(user / "recipe.json"),
        ws / "special" / "fifo")),
    ("write-text-to-dev-zero", lambda ws, user: write_text_atomic("/dev/zero", "x")),
    ("file-set-over-a-file", lambda ws, user: replace_file_set(user / "old.cache", PLAN_SET, lambda d: None)),
    ("file-set-over-a-fifo", lambda ws, user: replace_file_set(ws / "special" / "fifo", PLAN_SET, lambda d: None)),
    # issue 45: an input folder's files are inputs (the rule in one place: refuse_inputs)
    ("refuse-a-sample-of-an-input-folder", lambda ws, user: __import__(
        "trtwidgets.core.common.write_rule", fromlist=["x"]).refuse_inputs(
        ws / "special" / "samples_link" / "s001.npy", {"data": user / "samples"})),
    ("refuse-a-hard-link-of-a-sample", lambda ws, user: __import__(
        "trtwidgets.core.common.write_rule", fromlist=["x"]).refuse_inputs(user / "sample_hard.npy",
                                                                           {"data": str(user / "samples")})),
    ("write-text-over-a-long-name", lambda ws, user: write_text_atomic(ws / ("w" * 256), "x")),
    ("save-a-calibration-over-a-sample-of-its-data", lambda ws, user: __import__("trtwidgets").calibrate(
        ws / "stack.onnx", str(user / "samples"), progress=False).save(user / "samples" / "s002.npy")),
    ("save-a-calibration-over-a-hard-link-of-a-sample", lambda ws, user: __import__("trtwidgets").calibrate(
        ws / "stack.onnx", str(user / "samples"), progress=False).save(user / "sample_hard.npy")),
]


def test_new_files_beside_the_samples_and_the_toolkits_own_statistics_there_may_be_written(ws, user, capsys):
    """The rule refuses what the run reads, not a folder: `calibrate --data D --stats D/stats.npz` runs again."""
    argv = ["calibrate", str(ws / "stack.onnx"), "--data", str(user / "samples"), "--no-progress",
            "--stats", str(user / "samples" / "stats.npz"), "--out", str(user / "samples" / "cal.npz")]
    samples = {k: v for k, v in fingerprint(user / "samples").items()}
    assert run_cli(argv) == 0 and run_cli(argv) == 0, capsys.readouterr().err
    err = capsys.readouterr().err
    assert "is trtwidgets statistics (written by calibrate --stats), not a calibration sample" in err
    after = fingerprint(user / "samples")
    assert {k: after[k] for k in samples} == samples and {"stats.npz", "cal.npz"} <= set(after)


def test_a_report_written_into_a_build_folder_may_be_written_there_again(ws, user, capsys):
    """A build folder's engine and records are inputs; a table written beside them is not: `inspect BUILD --csv
    BUILD/layers.csv` runs again (issue 45's folder rule refused the second run)."""
    argv = ["inspect", str(user / "build"), "--csv", str(user / "build" / "layers.csv")]
    assert run_cli(argv) == 0 and run_cli(argv) == 0, capsys.readouterr().err
    assert (user / "build" / "layers.csv").is_file()


@pytest.mark.parametrize("call", [pytest.param(c[1], id=c[0]) for c in API_CASES])
def test_the_api_writers_follow_the_write_rule(ws, user, call):
    before, special = fingerprint(user), _special_state(ws)
    with pytest.raises(UserError) as info:
        call(ws, user)
    err = info.value
    assert err.what and err.why and err.fix, err.message
    assert fingerprint(user) == before and _special_state(ws) == special
    assert not _leftovers(ws)


def test_the_api_writers_keep_the_earlier_file_on_a_full_disk(ws, user, monkeypatch):
    from trtwidgets.core.calibration.stats import save_stats

    stats = _stats(user)
    before = fingerprint(user)
    monkeypatch.setattr(os, "fdopen", _FullDisk())
    with pytest.raises(UserError) as info:
        save_stats(stats, user / "stats.npz")
    with pytest.raises(OSError):  # code that catches write failures as OSError still does
        write_bytes_atomic(user / "old.cache", b"x")
    assert "No space left" in info.value.what and info.value.why and info.value.fix
    assert fingerprint(user) == before and not _leftovers(ws)


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit, RuntimeError])
def test_no_temporary_file_survives_any_way_out(tmp_path, exc):
    target = tmp_path / "out.bin"
    target.write_bytes(b"earlier")

    def write(f):
        f.write(b"half")
        raise exc()

    with pytest.raises(exc):
        atomic_write(target, write)
    def write_set(folder):
        write_text_atomic(folder / "plan.json", "{}")
        atomic_write(folder / "plan.html", write)

    with pytest.raises(exc):
        replace_file_set(tmp_path / "set", PLAN_SET, write_set)
    assert target.read_bytes() == b"earlier" and sorted(p.name for p in tmp_path.iterdir()) == ["out.bin"]


def test_stale_temporary_files_of_a_dead_run_are_removed_and_a_live_ones_kept(ws, user, capsys):
    dead, alive = _dead_pid(), os.getppid()
    stale = user / f".old.cache.{dead}.abc123.tmp"
    stale.write_bytes(b"")  # what a kill -9 between creating and writing leaves
    live = user / f".old.cache.{alive}.def456.tmp"
    live.write_bytes(b"")
    rc = run_cli(["calibrate", M, "--data", "demo", "--max-samples", "2", "--no-progress", "--cache",
               str(user / "old.cache")])
    assert rc == 0, capsys.readouterr().err
    assert not stale.exists() and live.exists()
    live.unlink()


# ---- a set of files is replaced as one ----------------------------------------------------------------------------

def _plan_set_is_whole(folder: Path, old: dict) -> str:
    """``"old"`` or ``"new"``: ``folder`` holds the earlier plan exactly, or a new plan whose files agree."""
    now = fingerprint(folder)
    if now == old:
        return "old"
    doc = json.loads((folder / "plan.json").read_text())
    assert "candidates" in doc and (folder / "plan.html").read_text().lstrip().lower().startswith("<")
    quantized = bool(doc["candidates"][doc["recommended"]]["quantized"])
    assert (folder / "model.qdq.onnx").exists() == quantized, "plan.json and model.qdq.onnx disagree"
    if quantized:
        onnx.checker.check_model(onnx.load(folder / "model.qdq.onnx"))
    assert (folder / "notes.txt").read_text() == "the user's own notes beside the plan"
    return "new"


def _signal_at(call, n, sig, watch, argv, timeout=300):
    return subprocess.run([sys.executable, "-m", "tests.bad_input.signal_at", call, str(n), sig, str(watch), "--"]
                          + argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))


def _plan_argv(ws, fp16=False):
    return (["plan", str(ws / "stack.onnx"), "--data", str(ws / "data"), "--out", str(ws / "user" / "plan"),
             "--no-progress", "--trt-version", "10.16"] + ([] if fp16 else ["--batch", "32"]))


#: Where a SIGKILL lands in plan's writing: (call, n) for the INT8 set (3 files) and the FP16 set (2 files).
KILL_POINTS = [("fdopen", 1), ("replace", 2), ("replace", 3), ("rename", 1), ("rename", 2), ("rmtree", 1)]


@pytest.mark.parametrize("fp16", [False, True], ids=["int8-replan", "fp16-replan"])
def test_a_plan_killed_anywhere_in_its_writing_leaves_one_whole_set(ws, user, fp16):
    watch = ws
    for call, n in KILL_POINTS:
        if fp16 and (call, n) == ("replace", 3):
            continue  # the FP16 set has two files
        shutil.rmtree(ws / "user")
        make_write_workspace_user_only(ws)
        old = fingerprint(user / "plan")
        proc = _signal_at(call, n, "KILL", watch, _plan_argv(ws, fp16))
        assert proc.returncode == -signal.SIGKILL, (call, n, proc.returncode, proc.stderr[-2000:])
        # Killed between the two renames, the folder is briefly missing: both sets sit under hidden names.
        if (call, n) != ("rename", 2):
            assert _plan_set_is_whole(user / "plan", old) in ("old", "new"), (call, n)
        # The next write of the folder tidies up (and puts the earlier set back if it was left aside).
        clean_leftovers(user / "plan")
        state = _plan_set_is_whole(user / "plan", old)
        assert state == ("new" if (call, n) == ("rmtree", 1) else "old"), (call, n, state)
        assert not _leftovers(ws), (call, n, _leftovers(ws))
        assert fingerprint(user / "elsewhere") and (user / "old.cache").exists()


def make_write_workspace_user_only(ws: Path) -> None:
    """Only the user folder again (the data and special files stay)."""
    tmp = ws / "rebuild"
    if tmp.exists():
        shutil.rmtree(tmp)
    make_write_workspace(tmp)
    shutil.move(str(tmp / "user"), str(ws / "user"))
    shutil.rmtree(tmp)
    for name in ("hard.onnx", "model_hard.onnx"):  # hard links must stay hard links after the move
        assert (ws / "user" / name).stat().st_nlink == 2


def test_an_fp16_replan_replaces_the_int8_set_whole(ws, user, capsys):
    rc = run_cli(_plan_argv(ws, fp16=True))
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert _plan_set_is_whole(user / "plan", {}) == "new" and not (user / "plan" / "model.qdq.onnx").exists()
    assert "went with it" in err and not _leftovers(ws)


@pytest.mark.parametrize("sig", ["INT", "TERM"])
def test_a_plan_interrupted_while_writing_keeps_the_earlier_set(ws, user, sig):
    old = fingerprint(user / "plan")
    proc = _signal_at("replace", 2, sig, ws, _plan_argv(ws))
    assert proc.returncode == 130, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "interrupted" in proc.stderr
    assert fingerprint(user / "plan") == old and not _leftovers(ws)


# ---- interrupted runs write under their own name ------------------------------------------------------------------

@pytest.mark.parametrize("call, n", [("fdopen", 1), ("replace", 1)])
@pytest.mark.parametrize("sig", ["INT", "TERM"])
def test_export_qdq_interrupted_while_writing_keeps_the_earlier_model(ws, user, sig, call, n):
    before = fingerprint(user)
    proc = _signal_at(call, n, sig, user, ["export-qdq", M, "--stats", str(user / "stats.npz"), "--out",
                                           str(user / "old.qdq.onnx")])
    assert proc.returncode == 130, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "as it was before this run" in proc.stderr
    assert fingerprint(user) == before and not _leftovers(ws)


#: Ctrl-C in the first seconds (issue 45): (how the command line is started, the import it comes at).
STARTUP_INTERRUPTS = [
    ("python-m-loading-the-package", ["-m", "trtwidgets"], "trtwidgets.cli"),
    ("python-m-building-the-parser", ["-m", "trtwidgets"], "trtwidgets.cli.export_qdq"),
    ("console-script-building-the-parser", [], "trtwidgets.cli.lint"),
    ("console-script-importing-numpy", [], "numpy"),
]


@pytest.mark.parametrize("start, module", [pytest.param(c[1], c[2], id=c[0]) for c in STARTUP_INTERRUPTS])
def test_ctrl_c_while_the_command_line_starts_is_one_line_and_exit_130(ws, user, start, module):
    """A real SIGINT at the first import of ``module``: once a KeyboardInterrupt traceback of 20 lines."""
    before = fingerprint(user)
    proc = _signal_at("import", 1, "INT", module, start + ["export-qdq", M, "--stats", str(user / "stats.npz"),
                                                           "--out", str(user / "old.qdq.onnx")])
    assert proc.returncode == 130, proc.stderr[-2000:]
    assert proc.stderr == "trtwidgets: interrupted before the command started; nothing was written.\n", proc.stderr
    assert proc.stdout == "" and fingerprint(user) == before and not _leftovers(ws)


def test_a_killed_export_leaves_a_temporary_file_that_the_next_run_removes(ws, user):
    before = fingerprint(user)
    proc = _signal_at("fdopen", 1, "KILL", user, ["export-qdq", M, "--stats", str(user / "stats.npz"), "--out",
                                                  str(user / "old.qdq.onnx")])
    assert proc.returncode == -signal.SIGKILL
    left = _leftovers(user)
    assert [p.name.startswith(".old.qdq.onnx.") and p.stat().st_size == 0 for p in left] == [True]
    assert {k: v for k, v in fingerprint(user).items() if not LEFTOVER.search(k)} == before
    rc = run_cli(["export-qdq", M, "--stats", str(user / "stats.npz"), "--out", str(user / "old.qdq.onnx")])
    assert rc == 0 and not _leftovers(ws)


def _calibrate_until(ws, user, sig, samples=60, after=5):
    """A real calibration of ``samples`` samples, sent ``sig`` once its progress bar has counted ``after``."""
    many = ws / "many"
    if not many.exists():
        many.mkdir()
        from trtwidgets import demo

        x = demo.sample_inputs(1)[0]["x"]
        for i in range(samples):
            np.save(many / f"s{i:04d}.npy", x)
    return _signal_when_counted(["calibrate", M, "--data", str(many), "--stats", str(user / "stats.npz"),
                                 "--cache", str(user / "old.cache")], sig, after)


def _signal_when_counted(argv, sig, after):
    """Run the real CLI; send ``sig`` once its calibration progress bar has counted ``after`` samples."""
    proc = subprocess.Popen([sys.executable, "-m", "trtwidgets"] + argv, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    seen = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        chunk = proc.stderr.read1(4096)
        if not chunk:
            break
        seen += chunk
        counts = [int(c) for c in re.findall(rb"calibration statistics:\s+(?:\d+%\|[^|]*\|\s*)?(\d+)", seen)]
        if counts and max(counts) >= after:
            proc.send_signal(sig)
            break
    out, err = proc.communicate(timeout=300)
    return proc.returncode, out.decode(), (seen + err).decode(errors="replace")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_calibration_never_replaces_the_complete_cache(ws, user, sig):
    from trtwidgets.core.calibration.cache import read_cache
    from trtwidgets.core.calibration.stats import load_stats

    before = fingerprint(user)
    rc, out, err = _calibrate_until(ws, user, sig)
    assert rc == 130, err[-3000:]
    assert "Traceback" not in err
    assert fingerprint(user) == {**before, **{k: v for k, v in fingerprint(user).items() if ".partial" in k}}, \
        "the complete cache or statistics were changed"
    partial = load_stats(user / "stats.partial.npz")
    assert partial.interrupted and 5 <= partial.samples < 60
    assert read_cache(user / "old.partial.cache").amax  # a whole cache file, of those samples, under its own name
    assert f"interrupted after {partial.samples} samples" in err and "old.cache (kept as it was)" in err
    assert f"--resume {user / 'stats.partial.npz'}" in err
    assert not [p for p in _leftovers(ws) if ".partial." not in p.name]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_plan_interrupted_while_searching_keeps_the_earlier_plan(ws, user, sig):
    before = fingerprint(user)
    rc, out, err = _signal_when_counted(["plan", M, "--data", "demo", "--out", str(user / "plan")], sig, 5)
    assert rc == 130, err[-3000:]
    assert "Traceback" not in err and "interrupted" in err
    assert fingerprint(user / "plan") == before_plan(before)
    partial = user / "plan.partial"
    if partial.exists():  # interrupted late in the search: what it measured, as a whole set of its own
        doc = json.loads((partial / "plan.json").read_text())
        assert doc["interrupted"] and (partial / "plan.html").exists()
        assert (partial / "model.qdq.onnx").exists() == bool(doc["candidates"][doc["recommended"]]["quantized"])
    assert not [p for p in _leftovers(ws) if p != partial and partial not in p.parents]


def before_plan(before: dict) -> dict:
    """The part of a user-folder fingerprint that lies in ``plan/``, relative to it."""
    return {k[len("plan/"):]: v for k, v in before.items() if k.startswith("plan/")}


def test_run_and_the_next_plan_clean_what_a_killed_swap_left(ws, user, capsys):
    # A dead process's half-written set and the set it had put aside when it died between the two renames.
    dead = _dead_pid()
    plan = user / "plan"
    aside = user / f".plan.old-{dead}-x1"
    os.rename(plan, aside)
    half = user / f".plan.new-{dead}-x2"
    half.mkdir()
    (half / "plan.json").write_text("{")
    old = fingerprint(aside)
    assert clean_leftovers(plan) and fingerprint(plan) == old and not _leftovers(ws)
    os.rename(plan, aside)
    rc = run_cli(_plan_argv(ws))
    assert rc == 0, capsys.readouterr().err
    assert _plan_set_is_whole(plan, old) == "new" and not _leftovers(ws)


# ---- the widgets --------------------------------------------------------------------------------------------------

def test_the_plan_step_never_exports_over_its_own_model(tmp_path):
    from trtwidgets.widgets.plan_step import PlanStep
    from trtwidgets.widgets.session import Session

    out = tmp_path / "out"
    out.mkdir()
    onnx.save(conv_stack(), out / "model.qdq.onnx")  # the float model, under the name the export writes
    before = fingerprint(out)
    session = Session()
    assert session.load(out / "model.qdq.onnx")
    step = PlanStep(session, data=feeds(), out_dir=out)
    step.batch.value = 256  # compute bound: INT8 pays, so there is a Q/DQ model to write
    assert step.run(), step.status.value
    assert step.plan.pick.quantized
    assert step.export() is None
    assert "own input" in step.status.value and "Why:" in step.status.value and "Traceback" not in step.status.value
    assert fingerprint(out) == before and not _leftovers(tmp_path)


def test_the_plan_step_replaces_an_earlier_plan_as_a_set(tmp_path):
    from trtwidgets.widgets.plan_step import PlanStep
    from trtwidgets.widgets.session import Session

    out = tmp_path / "out"
    out.mkdir()
    (out / "plan.html").write_text("<html>an earlier plan's page</html>")  # would not match the new plan.json
    (out / "notes.txt").write_text("mine")
    onnx.save(conv_stack(), tmp_path / "stack.onnx")
    session = Session()
    assert session.load(tmp_path / "stack.onnx")
    step = PlanStep(session, data=feeds(), out_dir=out)
    step.batch.value = 256
    assert step.run(), step.status.value
    assert step.export() == out / "model.qdq.onnx"
    # The plan's set, held-back check included (what `plan measure` judges the engines by); the user's file kept.
    assert sorted(p.name for p in out.iterdir()) == ["held_back.npz", "model.qdq.onnx", "notes.txt", "plan.json"]
    assert not _leftovers(tmp_path)


def test_run_interrupted_while_calibrating_keeps_the_complete_cache(ws, user, capsys, monkeypatch):
    import trtwidgets.core.calibration.data as data_mod
    from trtwidgets.core.calibration.cache import read_cache

    calls = []

    def samples(source, names, spec, *rest):  # rest: the rows still wanted (bounded reads)
        calls.append(1)  # the first reading only looks at the shapes (profiles); the second calibrates
        feeds = InterruptAfter(3) if len(calls) > 1 else InterruptAfter(3).feeds
        return ((f"sample {k}", f) for k, f in enumerate(feeds))

    monkeypatch.setattr(data_mod, "_raw_samples", samples)
    before = fingerprint(user)
    rc = run_cli(["run", str(user / "recipe.json"), "--data", "demo", "--no-build", "--report", str(user / "report.html"),
               "--build-dir", str(user / "bd")])
    out, err = capsys.readouterr()
    assert rc == 130, err
    assert "Traceback" not in err and "interrupted after 3 samples" in err
    assert read_cache(user / "bd" / "calibration.partial.cache").amax
    assert {k: v for k, v in fingerprint(user).items() if k != "bd/calibration.partial.cache"} == before
