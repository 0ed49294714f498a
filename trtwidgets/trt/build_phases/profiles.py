"""The profiles phase: optimization profiles on the config, and the input shapes calibration runs at."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence, Tuple

from ..dtypes import nptype
from .state import BuildState


def opt_shapes(recipe) -> Dict[str, Tuple[int, ...]]:
    """Input name -> opt shape of the recipe's calibration profile ({} without profiles)."""
    if not recipe.profiles:
        return {}
    return {k: tuple(v) for k, v in recipe.profiles[recipe.calibration_profile].opt_shapes().items()}


def feed_opt_shapes(specs: Mapping[str, Tuple[Sequence[int], object]]) -> Dict[str, List[int]]:
    """Input name -> opt shape as a list of ints, from ``{name: (shape, numpy dtype)}`` input specs.

    :func:`~trtwidgets.core.calibration.data.iter_feeds` wants shapes only; the specs
    also carry each input's dtype (handing it the pairs failed on the GPU with
    ``int() argument must be ... not 'tuple'`` inside TensorRT's ``get_batch``).
    """
    return {name: [int(d) for d in shape] for name, (shape, _dtype) in specs.items()}


def add_profiles(state: BuildState) -> None:
    """Add the recipe's optimization profiles to the config (``state.profiles``, in recipe order)."""
    state.profiles = []
    for k, prof in enumerate(state.recipe.profiles):
        p = state.builder.create_optimization_profile()
        for name, rng in prof.shapes.items():
            p.set_shape(name, tuple(rng.min), tuple(rng.opt), tuple(rng.max))
        idx = state.config.add_optimization_profile(p)
        if idx < 0:
            raise state.fail(f"TensorRT rejected optimization profile {k}.")
        state.profiles.append(p)


def input_specs(state: BuildState) -> Dict[str, Tuple[Tuple[int, ...], Any]]:

    """Input name -> (shape, numpy dtype) of the network's inputs; a dynamic input at its calibration opt shape."""
    trt = state.trt
    opt = opt_shapes(state.recipe)
    specs = {}
    for i in range(state.network.num_inputs):
        t = state.network.get_input(i)
        shape = tuple(int(d) for d in t.shape)
        if any(d < 0 for d in shape):
            shape = tuple(opt[t.name])
        specs[t.name] = (shape, nptype(trt, t.dtype))
    return specs
