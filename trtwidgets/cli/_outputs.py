"""Output options of every command, checked before the work and reported after it.

One rule for every option that names a file or folder to write (``--cache``,
``--stats``, ``--out``, ``--csv``, ``--report``, ``--save-reference``,
``--save-profile``, ...): a missing parent folder is created, and the command
says so in one line on stderr, so a typo in a path is seen rather than silently
becoming a new folder. What cannot work is refused with exit 2 before any work
starts (minutes of calibration should not end in "cannot write"):

- a name in the path is longer than the file system allows (255 bytes a name);
- the path is a folder where a file is wanted, or a file where a folder is wanted;
- a file stands where a parent folder would have to be created;
- the nearest existing parent folder is not writable;
- a file output names a folder, a named pipe, a device or a socket (only regular files
  are replaced: ``--cache /dev/null`` is refused, never turned into a file);
- two output options name the same file (one would overwrite the other);
- an output is the command's own input file (writing it would destroy the input): this
  covers the files a command writes inside an output folder (``plan``'s ``plan.json``,
  ``plan.html``, ``model.qdq.onnx``) and the ``*.partial*`` names an interrupted run
  writes to, and compares resolved paths and the files themselves (hard and symbolic
  links to an input are the input);
- an output is a file of an input folder: a sample of ``--data`` or ``--held-back`` (the
  files their reader reads: ``.npy``/``.npz``/images at the top, not the toolkit's own
  statistics), any file of another folder the command reads (a plan or build folder: its engine, records,
  recipe and caches, not a report written there: ``.csv``, ``.html``, ``.txt``, ``.log``, ``.md``).

A command declares its outputs as ``OUTPUTS = {"dest": "file" | "dir"}`` (argparse
``dest`` names), and the files it writes inside an output folder as
``OUTPUT_FILES = {"dest": ("name", ...)}``; :func:`~trtwidgets.cli.main` does the rest.
The write rule itself lives in :mod:`trtwidgets.core.common.write_rule`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

from ..core.common.errors import UserError
from ..core.common.paths import user_path
from ..core.common.file_set import check_set_folder
from ..core.common.write_rule import (check_name_length, check_replaceable, file_identity, folder_member,
                                      partial_path)

#: (input dest, output dest) pairs that may name the same file: continuing from statistics (or a calibration) and
#: saving the merged result over them is a normal workflow (the write is atomic and holds the earlier samples too).
IN_PLACE = {("resume", "stats"), ("resume", "out")}
#: Input folders of samples: only the files their reader reads are inputs (``sources.reads_as_sample``).
SAMPLE_FOLDERS = ("data", "held_back")


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


def _inputs(args, outputs) -> Tuple[Dict[object, str], Dict[str, str]]:
    """Every argument that names an existing file, by resolved path and by (device, inode) -> its dest; and
    every argument that names an existing folder: dest -> the folder."""
    inputs: Dict[object, str] = {}
    folders: Dict[str, str] = {}
    for dest, value in vars(args).items():
        # Any other argument that names an existing file or folder is an input the outputs must not overwrite.
        for item in (value if isinstance(value, list) else [value]):
            if dest in outputs or dest.startswith("_") or not isinstance(item, str) or not item:
                continue
            if os.path.isfile(os.path.expanduser(item)):
                inputs[os.path.realpath(os.path.expanduser(item))] = dest
                ident = file_identity(item)  # (device, inode): a hard link to an input is the input
                if ident is not None:
                    inputs[ident] = dest
            elif os.path.isdir(os.path.expanduser(item)):
                folders[dest] = item
    return inputs, folders


def _folder_label(dest: str, positionals) -> str:
    if dest in positionals:
        return dest[:-4] if dest.endswith("_dir") else dest.replace("_", " ")
    return _option(dest)


def _refuse_members(option, value, path, kind, inside, folders, positionals) -> None:
    """Refuse an output that would replace a file of an input folder (a sample of --data, a plan's file)."""
    from ..core.calibration.sources import reads_as_sample

    for dest, folder in folders.items():
        samples = dest in SAMPLE_FOLDERS
        for target, note in _written(path, kind, inside):
            member = folder_member(target, folder, reads_as_sample if samples else _read_from_folder,
                                   recursive=not samples)
            if member is not None:
                label = _folder_label(dest, positionals)
                raise UserError(f"{option} {value}{note} is a file of the {label} folder {folder}, the run's own "
                                f"input ({member.name}).",
                                "Writing it would replace a file this command reads" + (
                                    " (a sample: later runs would read what was written in its place)."
                                    if samples else "."),
                                f"Give {option} a path outside {folder}.")


#: What a command writes as a report and never reads back from a plan or build folder: a table, a page, a log.
REPORT_SUFFIXES = (".csv", ".html", ".htm", ".txt", ".log", ".md")


def _read_from_folder(member: Path) -> bool:
    """Whether a file of a plan or build folder is one the toolkit reads (its engine, records, recipe, caches):
    a report written there (``inspect BUILD --csv BUILD/layers.csv``) may be written there again."""
    return member.suffix.lower() not in REPORT_SUFFIXES


def _written(path: Path, kind: str, inside) -> List[Tuple[Path, str]]:
    """The files an output writes: ``(path, how the message names it)``, partial names included."""
    if kind == "file":
        return [(path, ""), (partial_path(path), " (where an interrupted run writes)")]
    out = []
    for folder, note in ((path, ""), (partial_path(path), " (where an interrupted run writes)")):
        out += [(folder / name, f" (it writes {name} there{note})") for name in inside]
    return out


def _refuse_inputs(option, value, path, kind, inside, inputs, dest) -> None:
    for target, note in _written(path, kind, inside):
        hit = inputs.get(os.path.realpath(target))
        if hit is None:
            ident = file_identity(target)
            hit = inputs.get(ident) if ident is not None else None
        if hit is not None and (hit, dest) not in IN_PLACE:
            source = "the model" if hit == "model" else _option(hit)
            raise UserError(f"{option} {value}{note} would replace the command's own input ({source}: {target}).",
                            "Writing it would destroy the file it is read from.",
                            f"Give {option} another path, or move the input elsewhere first.")


def _check_kind(option, value, path: Path, kind, inside) -> None:
    if kind == "file":
        if path.is_dir():
            raise UserError(f"{option} {value} is a folder.", f"{option} names a file to write.",
                            f"Give a file path, e.g. {os.path.join(str(value), 'out' + (path.suffix or ''))}.")
        check_replaceable(path, f"{option} {value}")
        return
    if os.path.lexists(path) and not path.is_dir():
        if path.is_file():
            raise UserError(f"{option} {value} is a file.", f"{option} names a folder to write into.",
                            "Give a folder path (one that does not exist yet, or an empty one).")
        check_replaceable(path, f"{option} {value}")  # a pipe or device: says which
    for name in inside:
        if path.is_dir():
            check_replaceable(path / name, f"{option} {value}: {name} there")
    if inside:
        check_set_folder(path, inside)  # the set is swapped in as a new folder: refuse one that cannot be


def check_outputs(args, outputs: Mapping[str, str], inside: Optional[Mapping[str, Tuple[str, ...]]] = None
                  ) -> Dict[Path, str]:

    """Refuse output paths that cannot be written; return the folders that will be created.

    Parameters
    ----------
    args : argparse.Namespace
    outputs : mapping
        Argument dest -> ``"file"`` or ``"dir"``.
    inside : mapping, optional
        Argument dest of a ``"dir"`` output -> the names of the files written inside it.

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
    seen: Dict[object, str] = {}
    inside = inside or {}
    inputs, folders = _inputs(args, outputs)
    positionals = args._positionals
    for dest, kind in outputs.items():
        value = getattr(args, dest)  # every OUTPUTS dest is an option add_arguments defines
        if value is None or value is False or value is True:
            continue
        option = _option(dest)
        if not str(value).strip():
            raise UserError(f"{option} is empty.", "It names the file to write.", f"Give a path, e.g. {option} out/{dest}.")
        path = user_path(str(value))
        check_name_length(path, f"{option} {value}")  # before any OS call on it: each would fail, some after the work
        real, ident = os.path.realpath(path), file_identity(path)
        other = seen.get(real) or (seen.get(ident) if ident is not None else None)
        if other:
            raise UserError(f"{option} and {other} both name {value}.", "One would overwrite the other.",
                            f"Give {option} a path of its own.")
        if real in inputs and (inputs[real], dest) not in IN_PLACE:
            source = "the model" if inputs[real] == "model" else _option(inputs[real])
            raise UserError(f"{option} {value} is the command's own input ({source}).",
                            "Writing it would destroy the file it is read from.", f"Give {option} another path.")
        _refuse_inputs(option, value, path, kind, tuple(inside.get(dest, ())), inputs, dest)
        _refuse_members(option, value, path, kind, tuple(inside.get(dest, ())), folders, positionals)
        seen[real] = option
        if ident is not None:
            seen[ident] = option
        _check_kind(option, value, path, kind, tuple(inside.get(dest, ())))
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
