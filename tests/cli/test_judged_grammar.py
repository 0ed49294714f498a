"""One grammar for the judged commands (issue 42): a flag means the same on every command that has it."""

from __future__ import annotations

import argparse

import pytest

from trtwidgets.cli import build_parser
from trtwidgets.cli._judged import FLAGS

#: The judged commands and the shared flags each takes (the table the issue asks a test to walk).
TABLE = {
    "export-qdq": ("--data", "--held-back", "--target-cosine", "--target-snr", "--metric", "--max-metric-drop",
                   "--labels", "--max-samples", "--keep-fp32", "--no-progress", "--json"),
    "plan": ("--data", "--held-back", "--target-cosine", "--target-snr", "--metric", "--max-metric-drop", "--labels",
             "--max-samples", "--keep-fp32", "--no-progress", "--json"),
    "plan-measure": ("--metric", "--no-progress"),
    "compare": ("--held-back", "--target-cosine", "--target-snr", "--metric", "--max-metric-drop", "--labels",
                "--max-samples", "--json"),
    "run": ("--data", "--max-samples"),
}
#: What each flag parses to: (dest, a value to give it, what the namespace then holds).
VALUES = {"--data": ("data", "d/", "d/"), "--held-back": ("held_back", "h/", "h/"),
          "--target-cosine": ("target_cosine", "0.98", 0.98), "--target-snr": ("target_snr", "20", 20.0),
          "--metric": ("metric", "top1-agreement", "top1-agreement"),
          "--max-metric-drop": ("max_metric_drop", "0.02", 0.02), "--labels": ("labels", "l.npy", "l.npy"),
          "--max-samples": ("max_samples", "7", 7), "--keep-fp32": ("keep_fp32", "add_eps", ["add_eps"]),
          "--no-progress": ("no_progress", None, True), "--json": ("json", None, True)}
#: What each command needs besides the flag under test.
REQUIRED = {"export-qdq": ["m.onnx", "--out", "q.onnx"], "plan": ["m.onnx", "--data", "x/", "--out", "o/"],
            "plan-measure": ["plan/"], "compare": ["engine/"], "run": ["r.json", "--report", "r.html"]}


def _subparser(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def _action(parser: argparse.ArgumentParser, flag: str) -> argparse.Action:
    return next(a for a in parser._actions if flag in a.option_strings)


@pytest.mark.parametrize("command", sorted(TABLE))
def test_every_judged_flag_parses_to_the_same_value_on_every_command(command):
    parser = _subparser(command)
    for flag in TABLE[command]:
        action = _action(parser, flag)
        dest, given, parsed = VALUES[flag]
        assert action.dest == dest, (command, flag)
        shared = FLAGS[flag]
        assert action.type == shared.get("type") and action.metavar == shared.get("metavar"), (command, flag)
        assert action.nargs == shared.get("nargs", 0 if shared.get("action") == "store_true" else None), (command, flag)
        ns = parser.parse_args(REQUIRED[command] + [flag] + ([given] if given is not None else []))
        assert getattr(ns, dest) == parsed, (command, flag)


def test_the_shared_help_is_the_help_unless_a_command_says_more():
    # A command may say what --data is for it (plan: split into held-back samples); the rest read alike.
    for command, flags in TABLE.items():
        parser = _subparser(command)
        for flag in flags:
            if flag in ("--data", "--max-samples", "--metric"):
                continue
            assert _action(parser, flag).help == FLAGS[flag]["help"], (command, flag)


def test_old_spellings_still_work_and_say_so(capsys):
    parser = _subparser("export-qdq")
    ns = parser.parse_args(["m.onnx", "--stats", "s.npz", "--out", "q.onnx", "--min-cosine", "0.9", "--samples", "8"])
    assert ns.target_cosine == 0.9 and ns.max_samples == 8
    err = capsys.readouterr().err
    assert "--min-cosine is deprecated: use --target-cosine" in err and "--samples is deprecated" in err
    ns = _subparser("compare").parse_args(["engine/", "--data", "held/"])
    assert ns.held_back == "held/" and "--data is deprecated: use --held-back" in capsys.readouterr().err
