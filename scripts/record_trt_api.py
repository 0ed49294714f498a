"""Record what the real TensorRT 10.16 and 11.4 Python modules offer, for notebook 12 (CPU, no GPU).

The bindings-only wheels of ``tests/trtapi/stubs.py`` are imported over load-time stubs (DEVELOPERS.md):
their enums and classes are the real ones. Per release this writes ``features().to_dict()`` and the
members of the enums a strongly typed build is about (``BuilderFlag``, ``NetworkDefinitionCreationFlag``,
``DataType``, ``TensorFormat``) to ``tests/fixtures/trtapi/api_surfaces.json``;
``tests/trtapi/test_api_record.py`` holds the record against the bindings, so it cannot go stale.

    python scripts/record_trt_api.py          # needs network once (pip download), gcc and binutils
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.trtapi import stubs  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "trtapi" / "api_surfaces.json"
#: Enums whose members the record lists.
ENUMS = ("BuilderFlag", "NetworkDefinitionCreationFlag", "DataType", "TensorFormat")

#: Run in the subprocess that imports the bindings: features() and the enum members, as JSON.
SURFACE_CODE = """
import json, warnings
warnings.simplefilter("ignore", DeprecationWarning)
import tensorrt_bindings.tensorrt as trt
from trtwidgets.trt.features import features
enums = {}
for name in %r:
    enum = getattr(trt, name, None)
    enums[name] = sorted(enum.__members__) if enum is not None else None
print(json.dumps({"features": features(trt).to_dict(), "enums": enums}))
""" % (ENUMS,)


def surface(key: str) -> dict:
    """What release ``stubs.WHEELS[key]`` offers: its distribution, version, features and enum members."""
    dist, version = stubs.WHEELS[key]
    doc = stubs.prepare(key).run_json(SURFACE_CODE)
    return {"distribution": dist, "version": version, **doc}


def main() -> int:
    record = {"source": "scripts/record_trt_api.py: the bindings-only wheels over load-time stubs (DEVELOPERS.md)",
              "releases": {key: surface(key) for key in sorted(stubs.WHEELS)}}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    tmp = OUT.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    tmp.replace(OUT)
    for rel in record["releases"].values():
        print(f"{rel['distribution']}=={rel['version']}: BuilderFlag {len(rel['enums']['BuilderFlag'])} members, "
              f"strongly typed only: {rel['features']['strongly_typed_only']}")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
