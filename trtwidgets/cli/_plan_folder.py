"""A plan folder written as one set: what ``plan`` and ``plan measure`` leave behind."""

from __future__ import annotations

import sys

__all__ = ["plan_state", "still_the_plan", "write_plan_folder"]


def plan_state(folder) -> str:
    """The SHA-256 of ``folder``'s plan.json as it is now ("" when there is none): which plan the folder holds."""
    import hashlib
    from pathlib import Path

    try:
        return hashlib.sha256((Path(folder) / "plan.json").read_bytes()).hexdigest()
    except OSError:
        return ""


def still_the_plan(folder, state: str) -> None:
    """Refuse to replace ``folder``'s plan unless its plan.json is still the one read (``state``: :func:`plan_state`).

    Raises
    ------
    UserError
        Another run (``plan --out``) wrote the folder meanwhile: the newer plan is kept, nothing is written.
    """
    from ..core.common.errors import UserError

    if plan_state(folder) != state:
        raise UserError(f"{folder}/plan.json changed while this plan was measured (another run wrote the folder).",
                        "plan measure replaces the plan it read with that plan measured; writing now would replace "
                        "the newer plan with an older one. Nothing was written.",
                        f"Run `trtwidgets plan measure {folder}` again: engines are cached by model and placement, "
                        "so only what the new plan adds is built.")


def write_plan_folder(result, exported, out, check_bytes=None, partial=None, expect=None):
    """plan.json (+ held_back.npz), plan.html and the pick's model.qdq.onnx into ``out`` as one set; the folder.

    An interrupted search (``partial``, default: the plan's ``interrupted``) writes into ``out``'s partial
    sibling and leaves ``out`` as it was. A pick that is FP16 of the rewritten graph is written as
    model.rewritten.onnx (a float model) instead. A plan whose pick is FP16 has neither: an earlier one goes
    with the set (said on stderr). ``check_bytes``: the held-back check as read from the folder (``plan
    measure`` keeps it as it was). ``expect``: the state of ``out`` the result replaces (:func:`plan_state`,
    taken when it was read); checked once the new set is written, just before it is swapped in.
    """
    from ..core.common.atomic import write_bytes_atomic, write_text_atomic
    from ..core.common.file_set import replace_file_set
    from ..core.common.write_rule import partial_path
    from ..core.plan.engine_check import CHECK_FILE
    from ..core.plan.plan_export import PLAN_FILES, QDQ_FILE, REWRITTEN_FILE, pick_file
    from ..core.qdq.export import save_qdq_model
    from ..plots.pareto import plan_html

    final = partial_path(out) if (result.interrupted if partial is None else partial) else out
    had = [name for name in (QDQ_FILE, REWRITTEN_FILE) if (final / name).is_file()]
    html = plan_html(result)

    def write(folder):
        if exported is not None:
            save_qdq_model(exported, folder / pick_file(result))
        result.save_json(folder / "plan.json")  # and held_back.npz: what `plan measure` judges the engines by
        write_text_atomic(folder / "plan.html", html)
        if check_bytes is not None:
            write_bytes_atomic(folder / CHECK_FILE, check_bytes)
        if expect is not None:  # last, as close to the swap as the set allows: the folder may have moved on
            still_the_plan(final, expect)

    # One set: a kill or a full disk leaves the earlier plan's files or this plan's, never a mix.
    replace_file_set(final, PLAN_FILES, write)
    if exported is None and had:
        print(f"replaced the earlier plan in {final}; its {' and '.join(had)} went with it (FP16 is this plan's "
              "pick)", file=sys.stderr)
    return final
