"""Import real TensorRT Python bindings on a machine without TensorRT's libraries.

NVIDIA publishes the Python bindings (``tensorrt-cuXX-bindings``) as wheels
separate from the libraries (``tensorrt-cuXX-libs``, ~1 GB, needing CUDA). The
bindings' extension module only needs the libraries' *symbols* to load: its
classes, enums and properties are defined by pybind11 in the extension itself.
So we generate tiny C stubs that define every symbol the extension imports
from ``libnvinfer.so.N``, ``libnvinfer_plugin.so.N`` and ``libnvonnxparser.so.N``
(functions returning 0 / NULL, data as zero-filled arrays, with the symbol
versions the extension asks for), compile them under the right sonames, and
import the bindings in a subprocess with ``LD_LIBRARY_PATH`` pointing there.
Reading enums and class attributes works; creating a Builder does not (the
stub returns NULL), which is exactly the API surface ``features()`` reads.

Used by ``tests/trtapi/conftest.py``; see DEVELOPERS.md, "API-surface tests
against TensorRT bindings".
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

#: key -> (distribution, version) of the bindings wheels under test.
WHEELS = {
    "10": ("tensorrt-cu12-bindings", "10.16.1.11"),
    "11": ("tensorrt-cu13-bindings", "11.4.0.106"),
}

#: Bump when the generated stubs change, so that cached ones are rebuilt.
STUB_FORMAT = 1

#: TensorRT libraries the bindings link against, by soname prefix.
TRT_LIBS = ("libnvinfer", "libnvinfer_plugin", "libnvonnxparser")

REPO = Path(__file__).resolve().parents[2]


def cache_dir() -> Path:
    """Where wheels and compiled stubs are kept between test sessions."""
    root = os.environ.get("TRTWIDGETS_TEST_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "trtwidgets-tests")
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _norm(dist: str) -> str:
    return re.sub(r"[-_.]+", "_", dist).lower()


def download_wheel(dist: str, version: str, dest: Optional[Path] = None, timeout: int = 300) -> Path:
    """The wheel of ``dist==version`` for this Python, downloaded with pip once.

    Raises
    ------
    RuntimeError
        When pip cannot download it (no network, no wheel for this Python).
    """
    dest = Path(dest or cache_dir() / "wheels")
    dest.mkdir(parents=True, exist_ok=True)
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    pattern = f"{_norm(dist)}-{version}-{tag}-*.whl"
    found = sorted(dest.glob(pattern))
    if found:
        return found[0]
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
           "-d", str(dest), f"{dist}=={version}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    found = sorted(dest.glob(pattern))
    if proc.returncode != 0 or not found:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"pip could not download {dist}=={version}: {' | '.join(tail)}")
    return found[0]


def extract_wheel(wheel: Path, dest: Path) -> Path:
    """Unzip ``wheel`` into ``dest`` (once); returns ``dest``, the folder to put on ``sys.path``."""
    marker = dest / ".extracted"
    if not marker.exists():
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(dest)
        marker.write_text(wheel.name)
    return dest


@dataclass(frozen=True)
class UndefinedSymbol:
    name: str
    kind: str  # FUNC, OBJECT or NOTYPE (as readelf prints)
    size: int
    version: Optional[str]  # "NVINFER_10" for name@NVINFER_10, else None
    weak: bool


def needed_libraries(so: Path) -> List[str]:
    """The NEEDED entries of ``so`` (``readelf -d``)."""
    out = subprocess.run(["readelf", "-d", "-W", str(so)], capture_output=True, text=True, check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def undefined_symbols(so: Path) -> List[UndefinedSymbol]:
    """The dynamic symbols ``so`` imports (``readelf --dyn-syms -W``)."""
    out = subprocess.run(["readelf", "--dyn-syms", "-W", str(so)], capture_output=True, text=True, check=True).stdout
    syms = []
    for line in out.splitlines():
        parts = line.split()
        # Num: Value Size Type Bind Vis Ndx Name [(verindex)]
        if len(parts) < 8 or parts[6] != "UND" or not parts[0].rstrip(":").isdigit():
            continue
        raw = parts[7]
        name, _, version = raw.partition("@")
        if not name:
            continue
        syms.append(UndefinedSymbol(name=name, kind=parts[3], size=int(parts[2], 0) if parts[2].isdigit() else 0,
                                    version=version.lstrip("@") or None, weak=parts[4] == "WEAK"))
    return syms


def _version_owners(so: Path) -> Dict[str, str]:
    """Symbol version name -> the library file it is required from (``readelf -V``)."""
    out = subprocess.run(["readelf", "-V", "-W", str(so)], capture_output=True, text=True, check=True).stdout
    owners, current = {}, None
    for line in out.splitlines():
        m = re.search(r"File: (\S+)", line)
        if m:
            current = m.group(1)
            continue
        m = re.search(r"Name: (\S+)", line)
        if m and current:
            owners[m.group(1)] = current
    return owners


def _system_library_path(name: str) -> Optional[str]:
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    except OSError:
        out = ""
    m = re.search(rf"^\s*{re.escape(name)} \([^)]*x86-64[^)]*\) => (\S+)", out, re.M) or \
        re.search(rf"^\s*{re.escape(name)} \(.*\) => (\S+)", out, re.M)
    if m:
        return m.group(1)
    # No ldconfig cache (some containers): ask the compiler where it would link from.
    path = subprocess.run(["gcc", f"-print-file-name={name}"], capture_output=True, text=True).stdout.strip()
    return path if os.path.isabs(path) and os.path.exists(path) else None


def _defined_in(paths: List[str]) -> set:
    names = set()
    for path in paths:
        out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) >= 3:
                names.add(parts[2].split("@")[0])
    return names


def _owner_lib(symbol: str, trt_sonames: Dict[str, str]) -> str:
    # The bindings import few symbols; their names say which library exports them.
    if "OnnxParser" in symbol and "libnvonnxparser" in trt_sonames:
        return trt_sonames["libnvonnxparser"]
    if symbol.startswith("initLibNvInferPlugins") and "libnvinfer_plugin" in trt_sonames:
        return trt_sonames["libnvinfer_plugin"]
    return trt_sonames["libnvinfer"]


def stub_plan(so: Path) -> Dict[str, List[UndefinedSymbol]]:
    """Soname -> the symbols its stub must define, for the extension module ``so``.

    Symbols required with a version are attributed to the library that version
    belongs to; unversioned ones that no system library (libc, libstdc++, ...)
    defines and that are not Python's C API are TensorRT's, attributed by name.
    """
    needed = needed_libraries(so)
    trt_sonames = {}
    for lib in needed:
        base = lib.split(".so")[0]
        if base in TRT_LIBS:
            trt_sonames[base] = lib
    if "libnvinfer" not in trt_sonames:
        raise RuntimeError(f"{so} does not link against libnvinfer (NEEDED: {needed})")
    owners = _version_owners(so)
    system = [p for p in (_system_library_path(lib) for lib in needed if lib not in trt_sonames.values()) if p]
    system_defined = _defined_in(system)
    plan: Dict[str, List[UndefinedSymbol]] = {lib: [] for lib in trt_sonames.values()}
    for sym in undefined_symbols(so):
        if sym.version:
            owner = owners.get(sym.version)
            if owner in plan:
                plan[owner].append(sym)
            continue
        if sym.weak or sym.name.startswith(("Py", "_Py")) or sym.name in system_defined:
            continue
        plan[_owner_lib(sym.name, trt_sonames)].append(sym)
    return plan


def _c_source(symbols: List[UndefinedSymbol]) -> str:
    lines = ["/* generated by tests/trtapi/stubs.py: load-time stubs, never called for real */"]
    for sym in symbols:
        if sym.kind == "OBJECT":
            lines.append(f"char {sym.name}[{max(sym.size, 64)}] __attribute__((aligned(16))) = {{0}};")
        else:
            lines.append(f"void *{sym.name}(void) {{ return 0; }}")
    return "\n".join(lines) + "\n"


def _version_script(symbols: List[UndefinedSymbol]) -> Optional[str]:
    by_version: Dict[str, List[str]] = {}
    for sym in symbols:
        if sym.version:
            by_version.setdefault(sym.version, []).append(sym.name)
    if not by_version:
        return None
    blocks = [f"{v} {{ global: {' '.join(n + ';' for n in names)} }};" for v, names in by_version.items()]
    unversioned = [s.name for s in symbols if not s.version]
    if unversioned:
        # A library with a version script exports only what the script lists.
        blocks.append(f"STUB_BASE {{ global: {' '.join(n + ';' for n in unversioned)} local: *; }};")
    return "\n".join(blocks) + "\n"


def build_stubs(so: Path, out_dir: Path) -> Path:
    """Compile stub libraries for ``so`` into ``out_dir`` (once); returns ``out_dir``."""
    marker = out_dir / ".built"
    if marker.exists():
        return out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    for soname, symbols in stub_plan(so).items():
        src = out_dir / (soname.split(".so")[0] + "_stub.c")
        src.write_text(_c_source(symbols))
        cmd = ["gcc", "-shared", "-fPIC", "-O0", "-o", str(out_dir / soname), f"-Wl,-soname,{soname}", str(src)]
        script = _version_script(symbols)
        if script:
            vs = src.with_suffix(".map")
            vs.write_text(script)
            cmd.append(f"-Wl,--version-script={vs}")
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"gcc failed for {soname}: {proc.stderr.strip()[-500:]}")
    marker.write_text("ok")
    return out_dir


@dataclass(frozen=True)
class Bindings:
    """Real TensorRT bindings, importable over stubs (see :func:`prepare`)."""

    key: str
    dist: str
    version: str
    site: Path
    lib_dir: Path

    def env(self) -> Dict[str, str]:
        env = dict(os.environ)
        env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(self.lib_dir), env.get("LD_LIBRARY_PATH", "")) if p)
        env["PYTHONPATH"] = os.pathsep.join([str(self.site), str(REPO)])
        env.pop("PYTHONHOME", None)
        return env

    def run_json(self, code: str, timeout: int = 120):
        """Run ``code`` in a fresh Python with these bindings importable; it prints one JSON value last."""
        return run_json([sys.executable, "-c", code], self.env(), timeout)


def run_json(cmd: List[str], env: Dict[str, str], timeout: int = 120):
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"subprocess failed (rc {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def prepare(key: str) -> Bindings:
    """Download (once), extract and stub the bindings wheel ``WHEELS[key]``.

    The cache is shared by every test process (pytest-xdist's workers too): one prepares at a time, the
    others wait on a file lock and find its result.
    """
    import fcntl

    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".prepare.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _prepare(key, root)


def _prepare(key: str, root: Path) -> Bindings:
    dist, version = WHEELS[key]
    wheel = download_wheel(dist, version, root / "wheels")
    site = extract_wheel(wheel, root / "site" / wheel.stem)
    so_files = sorted((site / "tensorrt_bindings").glob("tensorrt*.so"))
    if not so_files:
        raise RuntimeError(f"{wheel.name} has no tensorrt_bindings/tensorrt*.so")
    lib_dir = build_stubs(so_files[0], root / f"stubs-v{STUB_FORMAT}" / wheel.stem)
    return Bindings(key=key, dist=dist, version=version, site=site, lib_dir=lib_dir)


#: Code run in the subprocess: the features of the bindings, as JSON.
FEATURES_CODE = """
import json, warnings
warnings.simplefilter("ignore", DeprecationWarning)
import tensorrt_bindings.tensorrt as trt
from trtwidgets.trt.features import features
print(json.dumps(features(trt).to_dict()))
"""


def local_trt86() -> Optional[Tuple[List[str], Dict[str, str]]]:
    """Command prefix and environment of the local Python 3.9 + TensorRT 8.6 bundle, if present.

    Looks at ``$TRTWIDGETS_TRT86_ENV`` (an env.sh) or ``/work/trtb/env.sh``.
    """
    env_sh = os.environ.get("TRTWIDGETS_TRT86_ENV", "/work/trtb/env.sh")
    if not os.path.isfile(env_sh):
        return None
    out = subprocess.run(["bash", "-c", f'source "{env_sh}" >/dev/null && env -0'], capture_output=True)
    if out.returncode != 0:
        return None
    env = dict(item.split("=", 1) for item in out.stdout.decode().split("\0") if "=" in item)
    py = env.get("PY39")
    if not py or not os.path.exists(py):
        return None
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH", ""), str(REPO)) if p)
    return [py], env


_FEATURES: Dict[str, object] = {}


def real_features(key: str) -> dict:
    """``features().to_dict()`` of the real bindings ``WHEELS[key]``, read in a subprocess (cached per session).

    Skips the calling test when the wheel cannot be prepared, or fails it where
    ``TRTWIDGETS_REQUIRE_TRT_BINDINGS`` is set (CI).
    """
    from tests.conftest import require_or_skip

    if key not in _FEATURES:
        try:
            _FEATURES[key] = prepare(key).run_json(FEATURES_CODE)
        except Exception as exc:
            _FEATURES[key] = exc
    result = _FEATURES[key]
    if isinstance(result, Exception):
        dist, version = WHEELS[key]
        require_or_skip("TRTWIDGETS_REQUIRE_TRT_BINDINGS", f"{dist}=={version} could not be prepared: {result}")
    return result


def local_features86() -> Optional[dict]:
    """``features().to_dict()`` of the local TensorRT 8.6 (Python 3.9 bundle), or None when there is none."""
    if "8.6" not in _FEATURES:
        local = local_trt86()
        if local is None:
            _FEATURES["8.6"] = None
        else:
            cmd, env = local
            code = FEATURES_CODE.replace("import tensorrt_bindings.tensorrt as trt", "import tensorrt as trt")
            _FEATURES["8.6"] = run_json(cmd + ["-c", code], env)
    return _FEATURES["8.6"]
