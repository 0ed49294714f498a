"""``trtwidgets build RECIPE.json [--out DIR]``: re-run a saved recipe headless."""

from __future__ import annotations

import json
import sys

NAME = "build"
OUTPUTS = {"out": "dir", "builds_root": "dir"}  # files it writes: checked and reported by cli._outputs
HELP = "build the TensorRT engine a saved recipe describes, into a new build folder"
DESCRIPTION = (
    "Build the engine described by RECIPE.json (saved from the notebook or with save_recipe) and write the engine, "
    "the DETAILED engine-inspector JSON, the recipe, the build log and the calibration cache into a new folder: "
    "DIR (which must not exist or be empty) or builds/<time>-<recipe hash>/. Needs TensorRT and a GPU."
)


def add_arguments(parser):
    parser.add_argument("recipe", help="path of the recipe .json file")
    parser.add_argument("--out", metavar="DIR", default=None, help="build folder (must not exist, or be empty)")
    parser.add_argument("--builds-root", metavar="DIR", default=None,
                        help="parent of the default build folder (default: ./builds or $TRTWIDGETS_BUILDS)")
    parser.add_argument("--quiet", action="store_true", help="no progress display")
    parser.add_argument("--verbose-log", action="store_true", help="keep TensorRT's VERBOSE lines in the build log")
    parser.add_argument("--json", action="store_true", help="print the result (or the error) as JSON")


def run(args) -> int:
    from ..core.common.errors import BuildError
    from ..core.recipe.recipe import load_recipe
    from ..trt.build import build

    recipe = load_recipe(args.recipe)

    def echo_error(line):
        if line.is_error and not args.json:
            print(line.format(), file=sys.stderr)

    try:
        result = build(recipe, out_dir=args.out, progress=not args.quiet and not args.json, on_log=echo_error,
                       verbose_log=args.verbose_log, builds_root=args.builds_root)
    except BuildError as err:
        if args.json:
            print(json.dumps(err.to_dict(), indent=2))
            return 1
        raise
    if args.json:
        print(json.dumps({
            "out_dir": result.out_dir, "engine_path": result.engine_path,
            "inspector_json_path": result.inspector_json_path, "recipe_path": result.recipe_path,
            "log_path": result.log_path, "calibration_cache_path": result.calibration_cache_path,
            "build_seconds": result.build_seconds, "trt_version": result.trt_version, "gpu_name": result.gpu_name,
            "engine_bytes": result.engine_bytes, "calibration_batches": result.calibration_batches,
            "lint_codes": list(result.lint_codes),
        }, indent=2))
    else:
        print(result.summary())
    return 0
