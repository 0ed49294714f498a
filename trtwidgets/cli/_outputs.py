"""Output options of every command, checked before the work and reported after it.

One rule for every option that names a file or folder to write (``--cache``,
``--stats``, ``--out``, ``--csv``, ``--report``, ``--save-reference``,
``--save-profile``, ...): a missing parent folder is created, and the command
says so in one line on stderr, so a typo in a path is seen rather than silently
becoming a new folder. What cannot work is refused with exit 2 before any work
starts (minutes of calibration should not end in "cannot write"):

- the path is a folder where a file is wanted, or a file where a folder is wanted;
- a file stands where a parent folder would have to be created;
- the nearest existing parent folder is not writable;
- two output options name the same file (one would overwrite the other);
- an output is the command's own input file (writing it would destroy the input).

A command declares its outputs as ``OUTPUTS = {"dest": "file" | "dir"}`` (argparse
``dest`` names); :func:`~trtwidgets.cli.main` does the rest.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, List, Mapping, Tuple

from ..core.common.errors import UserError
from ..core.common.paths import user_path

#: (input dest, output dest) pairs that may name the same file: continuing from statistics and saving the
#: merged result over them is a normal workflow (the write is atomic and holds the earlier samples too).
IN_PLACE = {("resume", "stats")}


def _option(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def _missing_folders(path: Path) -> Tuple[List[Path], Path]:
    """The folders that writing ``path`` would create (outermost first), and the nearest existing ancestor."""
    missing = []
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        missing.append(parent)
        parent = parent.parent
    return list(reversed(missing)), parent


def check_outputs(args, outputs: Mapping[str, str]) -> Dict[Path, str]:
    """Refuse output paths that cannot be written; return the folders that will be created.

    Parameters
    ----------
    args : argparse.Namespace
    outputs : mapping
        Argument dest -> ``"file"`` or ``"dir"``.

    Returns
    -------
    dict
        Folder that does not exist yet -> the option that needs it.

    Raises
    ------
    UserError
        Saying which option, what is in the way, and what to do.
    """
    to_create: Dict[Path, str] = {}
    seen: Dict[str, str] = {}
    inputs = {}
    for dest, value in vars(args).items():
        # Any other argument that names an existing file is an input the outputs must not overwrite.
        for item in (value if isinstance(value, list) else [value]):
            if dest not in outputs and isinstance(item, str) and item and os.path.isfile(os.path.expanduser(item)):
                inputs[os.path.realpath(os.path.expanduser(item))] = dest
    for dest, kind in outputs.items():
        value = getattr(args, dest, None)
        if value is None or value is False or value is True:
            continue
        option = _option(dest)
        if not str(value).strip():
            raise UserError(f"{option} is empty.", "It names the file to write.", f"Give a path, e.g. {option} out/{dest}.")
        path = user_path(str(value))
        real = os.path.realpath(path)
        if real in seen:
            raise UserError(f"{option} and {seen[real]} both name {value}.", "One would overwrite the other.",
                            f"Give {option} a path of its own.")
        if real in inputs and (inputs[real], dest) not in IN_PLACE:
            source = "the model" if inputs[real] == "model" else _option(inputs[real])
            raise UserError(f"{option} {value} is the command's own input ({source}).",
                            "Writing it would destroy the file it is read from.", f"Give {option} another path.")
        seen[real] = option
        if kind == "file" and path.is_dir():
            raise UserError(f"{option} {value} is a folder.", f"{option} names a file to write.",
                            f"Give a file path, e.g. {os.path.join(str(value), 'out' + (path.suffix or ''))}.")
        if kind == "dir" and path.exists() and not path.is_dir():
            raise UserError(f"{option} {value} is a file.", f"{option} names a folder to write into.",
                            "Give a folder path (one that does not exist yet, or an empty one).")
        missing, ancestor = _missing_folders(path)
        if not ancestor.is_dir():
            raise UserError(f"{option} {value}: {ancestor} is a file, so the folder {missing[0] if missing else path.parent} "
                            "cannot be created.", "A folder cannot be made inside a file.",
                            f"Give {option} a path inside a folder.")
        if not os.access(ancestor, os.W_OK | os.X_OK):
            raise UserError(f"{option} {value}: the folder {ancestor} is not writable.",
                            "The file is written beside its final place, then moved in; that needs write permission.",
                            f"Give {option} a path in a folder you can write to.")
        for folder in missing:
            to_create.setdefault(folder, option)
    return to_create


def created_notes(command: str, to_create: Mapping[Path, str]) -> List[str]:
    """One line per folder :func:`check_outputs` expected to be created that now exists (the outermost only)."""
    notes = []
    done = set()
    for folder, option in to_create.items():
        if folder.is_dir() and not any(parent in done for parent in folder.parents):
            done.add(folder)
            notes.append(f"trtwidgets {command}: created folder {folder} for {option}")
    return notes


__all__ = ["IN_PLACE", "check_outputs", "created_notes"]
