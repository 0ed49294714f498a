"""Before TensorRT: the model the recipe names, what lint says about it, and the GPU."""

from __future__ import annotations

from ...core.common.errors import RecipeError, TensorRTUnavailable, UserError
from .. import cuda, version_of
from .state import BuildState


def load_model_checked(state: BuildState) -> None:
    """Load the recipe's model, refuse a recipe that no longer fits it, and log lint's warnings and errors."""
    from ...core.model.load import load_model
    from ...core.recipe.profiles import profile_problems

    model = load_model(state.recipe.model_path)
    s = model.summary
    if state.recipe.model_sha256 and s.sha256 and state.recipe.model_sha256 != s.sha256:
        raise RecipeError(f"The model {state.recipe.model_path} has changed since the recipe was made.",
                          f"Recipe: sha256 {state.recipe.model_sha256[:12]}..., file: {s.sha256[:12]}....",
                          "Re-create the recipe for this model (its profiles and calibration may no longer fit), "
                          "or restore the model the recipe was made for.")
    problems = profile_problems(state.recipe.profiles, s)
    if problems:
        raise RecipeError(f"The recipe's optimization profiles do not fit the model: {problems[0]}",
                          "\n".join(f"- {p}" for p in problems), "Fix the profiles in the profile editor.")
    missing = [t.name for t in s.dynamic_inputs if not state.recipe.profiles]
    if missing:
        raise RecipeError(f"Input(s) {', '.join(map(repr, missing))} have dynamic dimensions, but the recipe has no "
                          "optimization profile.", "TensorRT needs min/opt/max shapes for every dynamic dimension.",
                          "Add a profile (Recipe.for_model pre-fills one from the model and data).")
    state.model = model
    state.lint_findings = lint_for_build(model, state.recipe, state.trt)
    for f in state.lint_findings:
        if f.severity in ("error", "warning"):
            state.note("WARNING", f"lint {f.code}: {f.message}")


def lint_for_build(model, recipe, trt) -> tuple:
    """Lint's findings for the model as the recipe builds it on this TensorRT; () when lint cannot judge."""
    try:
        from ...core.model.lint import lint
    except ImportError:
        return ()
    cal = recipe.calibrator.kind
    try:
        return tuple(lint(model, flags=recipe.flags, trt_version=str(version_of(trt)),
                          calibrator=None if cal == "none" else cal, profiles=list(recipe.profiles) or None))
    except UserError:
        return ()


def check_gpu(state: BuildState) -> None:
    """Refuse to build without a GPU; note its name and compute capability (None where libcudart is absent)."""
    state.gpu_name, state.cc = None, None
    try:
        cuda.library()
    except TensorRTUnavailable:
        state.note("WARNING", "libcudart not found: the GPU name is unknown and the GPU check is left to TensorRT.")
        return
    cuda.require_gpu()
    try:
        state.gpu_name = cuda.device_name()
        state.cc = cuda.compute_capability()
    except cuda.CudaError as exc:
        state.note("WARNING", f"could not read the GPU's name: {exc}")
