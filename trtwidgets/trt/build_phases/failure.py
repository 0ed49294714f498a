"""A failed build as a :class:`~trtwidgets.core.common.errors.BuildError`: TensorRT's decisive lines, the cause."""

from __future__ import annotations

from typing import Optional, Sequence

from ...core.common.errors import BuildError
from ..diagnose import diagnose, summarize_causes
from ..logger import LogLine, decisive_lines


def build_failure(what: str, lines: Sequence[LogLine], lint_findings: Sequence = (), extra_messages: Sequence[str] = (),
                  fix: Optional[str] = None, codes: Sequence[str] = ()) -> BuildError:
    """The BuildError for a failed build: decisive lines (errors first), causes as lint codes, what to do.

    Parameters
    ----------
    what : str
        One line: what failed.
    lines : sequence of LogLine
        The build's log; ``err.log`` keeps all of it.
    lint_findings : sequence of Finding
        Lint's findings before the build; its errors count as causes.
    extra_messages : sequence of str
        Messages from outside the log (e.g. an exception in the calibrator), shown first.
    fix : str, optional
        Overrides the fix derived from the causes.
    codes : sequence of str
        Codes known beforehand (e.g. ``PARSE_FAILED``), listed first.
    """
    lines = tuple(lines)
    decisive = list(extra_messages) + [d for d in decisive_lines(lines) if d not in extra_messages]
    # TensorRT's own words only: lint's notes quote TensorRT texts and would match causes that did not occur
    # (lint's error findings are passed to diagnose() separately).
    trt_lines = [line for line in lines if line.source != "trtwidgets"]
    texts = list(extra_messages) + [line.message for line in trt_lines if line.is_error] \
        + [line.message for line in trt_lines if line.severity == "WARNING"]
    causes = diagnose(texts, lint_findings)
    why, cause_fix = summarize_causes(causes)
    if why is None:
        why = "TensorRT's messages below say what it stopped at." if decisive else \
            "TensorRT logged no error; run again with verbose_log=True for its full log."
    err = BuildError(what, why, fix or cause_fix, log_lines=decisive[:12],
                     codes=tuple(dict.fromkeys(list(codes) + [c.code for c in causes])))
    err.log = lines  # the whole log, for the panel's "show log"
    return err
