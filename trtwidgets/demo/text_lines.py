"""Text lines rendered as the demo classifier's 48x192 crops: how ``text_lines.npz`` is made.

The demo model (PaddleOCR's direction classifier) reads cropped text lines and says
whether they are upright or turned by 180 degrees. Lines rendered from known text
carry that label for free. The text is the standard library's own (the Zen of Python
and module docstrings, so nothing is downloaded); the font is the one Pillow ships
(``ImageFont.load_default(size)``, Aileron Regular). Each line varies as crops from a
detector do: 6 to 24 characters, font size 16 to 40 pixels, a margin of 5 to 25% of
the font size above and below, dark ink on light paper at least 80 grey levels apart.

A crop is made as PaddleOCR's classifier preprocessing makes it: the line image is
scaled to 48 pixels high keeping its aspect ratio, squeezed to at most 192 wide, and
padded on the right. A turned line is the line image turned by 180 degrees *before*
the padding, as a detector's crop of upside-down text would be.

Rendering needs Pillow; reading the bundled result (:mod:`.labelled_set`) needs only
numpy. ``scripts/make_demo_text_lines.py`` regenerates the file with :func:`render_set`.
"""

from __future__ import annotations

import codecs
import contextlib
import importlib
import io
from typing import Dict, List, Set, Tuple

import numpy as np

#: Modules whose docstrings (module, and public functions and classes) give the words, in this order.
CORPUS_MODULES = ("json", "unittest", "argparse", "collections", "functools", "itertools", "pathlib", "re",
                  "string", "textwrap", "csv", "heapq", "bisect", "random", "statistics", "fractions", "decimal",
                  "datetime", "calendar", "difflib", "shutil", "tempfile", "glob", "fnmatch", "copy", "pprint",
                  "enum", "dataclasses", "contextlib", "abc", "inspect", "logging", "sched", "queue", "threading",
                  "subprocess", "html", "zipfile", "tarfile", "gzip", "base64", "hashlib", "hmac", "struct",
                  "codecs", "locale", "gettext", "optparse", "getopt", "timeit", "doctest", "ast", "tokenize",
                  "operator", "weakref", "types", "numbers", "math", "array", "zlib", "configparser", "uuid",
                  "ipaddress", "mimetypes", "colorsys", "cmd", "shlex", "selectors", "io", "os", "platform")
#: The crop the model reads, and the padding value PaddleOCR's preprocessing leaves (0 after scaling to [-1, 1]).
HEIGHT, WIDTH, PAD = 48, 192, 128
#: What varies from line to line (inclusive ranges).
CHARS = (6, 24)
FONT_SIZE = (16, 40)
MARGIN = (0.05, 0.25)
INK = (0, 90)
PAPER = (170, 255)
MIN_CONTRAST = 80


def corpus_words() -> List[str]:
    """The words of the Zen of Python and of :data:`CORPUS_MODULES` ' docstrings, printable ASCII only."""
    with contextlib.redirect_stdout(io.StringIO()):  # `import this` prints the poem
        import this
    texts = [codecs.decode(this.s, "rot13")]
    for name in CORPUS_MODULES:
        mod = importlib.import_module(name)
        texts.append(mod.__doc__ or "")
        for attr in sorted(vars(mod)):
            obj = vars(mod)[attr]
            if (not attr.startswith("_") and callable(obj) and getattr(obj, "__module__", None) == name
                    and isinstance(getattr(obj, "__doc__", None), str)):
                texts.append(obj.__doc__)
    words = []
    for text in texts:
        for raw in text.splitlines():
            raw = " ".join(raw.split())
            if raw and raw.isascii() and raw.isprintable() and not raw.startswith((">>>", "...")):
                words.extend(raw.split())
    return words


def line_texts(n: int, seed: int) -> List[str]:
    """``n`` lines of consecutive corpus words, each of 6 to 24 characters (never two the same)."""
    words = corpus_words()
    rng = np.random.default_rng(seed)
    pos = int(rng.integers(len(words)))
    seen: Set[str] = set()
    lines: List[str] = []
    while len(lines) < n:
        target = int(rng.integers(CHARS[0], CHARS[1] + 1))
        line: List[str] = []

        while len(" ".join(line)) < target:
            line.append(words[pos % len(words)])
            pos += 1
        text = " ".join(line)[:CHARS[1] + 16]
        if text not in seen:
            seen.add(text)
            lines.append(text)
    return lines


def render_line(text: str, rng: np.random.Generator) -> np.ndarray:
    """One line drawn with Pillow's own font, scaled to 48 high and at most 192 wide: uint8 ``(48, w)``."""
    from PIL import Image, ImageDraw, ImageFont

    size = int(rng.integers(FONT_SIZE[0], FONT_SIZE[1] + 1))
    font = ImageFont.load_default(size=size)
    ink = int(rng.integers(INK[0], INK[1] + 1))
    paper = max(int(rng.integers(PAPER[0], PAPER[1] + 1)), min(255, ink + MIN_CONTRAST))
    left, top, right, bottom = font.getbbox(text)
    mx, my = int(rng.integers(2, 10)), int(size * rng.uniform(*MARGIN))
    img = Image.new("L", (int(right - left) + 2 * mx, int(bottom - top) + 2 * my), paper)
    ImageDraw.Draw(img).text((mx - left, my - top), text, fill=ink, font=font)
    w = min(WIDTH, int(np.ceil(HEIGHT * img.width / img.height)))
    return np.asarray(img.resize((w, HEIGHT), Image.Resampling.BILINEAR), dtype=np.uint8)



def render_set(lines: int, seed: int) -> Dict[str, np.ndarray]:
    """The arrays of ``text_lines.npz``: ``lines`` rendered lines (upright, padded) and what they say.

    Returns
    -------
    dict
        ``strips`` uint8 ``(lines, 48, 192)`` (the line in its first ``widths[i]`` columns,
        :data:`PAD` after), ``widths`` int16, ``texts`` (unicode), ``seed``, and ``pillow``
        and ``python`` (the versions that drew them: docstrings and rasterizers change).
    """
    import platform

    import PIL

    texts = line_texts(lines, seed)
    rng = np.random.default_rng(seed + 1)
    strips = np.full((lines, HEIGHT, WIDTH), PAD, np.uint8)
    widths = np.zeros(lines, np.int16)
    for i, text in enumerate(texts):
        line = render_line(text, rng)
        strips[i, :, :line.shape[1]] = line
        widths[i] = line.shape[1]
    return {"strips": strips, "widths": widths, "texts": np.array(texts), "seed": np.array(seed),
            "pillow": np.array(PIL.__version__), "python": np.array(platform.python_version())}


def crops(strips: np.ndarray, widths: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Upright and turned crops, uint8 RGB ``(n, 48, 192, 3)`` each, from padded strips.

    The turned crop turns the line itself (its first ``widths[i]`` columns) and pads
    on the right again, as a detector's crop of upside-down text is padded.
    """
    upright = np.asarray(strips, np.uint8)
    turned = np.full_like(upright, PAD)
    for i, w in enumerate(np.asarray(widths, int)):
        turned[i, :, :w] = upright[i, ::-1, :w][:, ::-1]
    rgb = lambda a: np.ascontiguousarray(np.repeat(a[..., None], 3, axis=-1))
    return rgb(upright), rgb(turned)
