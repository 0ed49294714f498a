"""A plan folder written as one set: what ``plan`` and ``plan measure`` leave behind."""

from __future__ import annotations

import sys

__all__ = ["write_plan_folder"]


def write_plan_folder(result, exported, out, check_bytes=None, partial=None):
    """plan.json (+ held_back.npz), plan.html and the pick's model.qdq.onnx into ``out`` as one set; the folder.

    An interrupted search (``partial``, default: the plan's ``interrupted``) writes into ``out``'s partial
    sibling and leaves ``out`` as it was. A plan whose pick is FP16 has no model.qdq.onnx: an earlier one goes
    with the set (said on stderr). ``check_bytes``: the held-back check as read from the folder (``plan
    measure`` keeps it as it was).
    """
    from ..core.common.atomic import write_bytes_atomic, write_text_atomic
    from ..core.common.file_set import replace_file_set
    from ..core.common.write_rule import partial_path
    from ..core.plan.engine_check import CHECK_FILE
    from ..core.plan.plan_export import PLAN_FILES
    from ..core.qdq.export import save_qdq_model
    from ..plots.pareto import plan_html

    final = partial_path(out) if (result.interrupted if partial is None else partial) else out
    had_qdq = (final / "model.qdq.onnx").is_file()
    html = plan_html(result)

    def write(folder):
        if exported is not None:
            save_qdq_model(exported, folder / "model.qdq.onnx")
        result.save_json(folder / "plan.json")  # and held_back.npz: what `plan measure` judges the engines by
        write_text_atomic(folder / "plan.html", html)
        if check_bytes is not None:
            write_bytes_atomic(folder / CHECK_FILE, check_bytes)

    # One set: a kill or a full disk leaves the earlier plan's files or this plan's, never a mix.
    replace_file_set(final, PLAN_FILES, write)
    if exported is None and had_qdq:
        print(f"replaced the earlier plan in {final}; its model.qdq.onnx went with it (FP16 is this plan's pick)",
              file=sys.stderr)
    return final
