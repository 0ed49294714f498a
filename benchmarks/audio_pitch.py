"""An audio transcription network the toolkit was not written for: Spotify's basic-pitch (a CQT front end, a small CNN).

Issue 42's case: ``nmp.onnx`` from the ``basic-pitch`` wheel (Apache-2.0; input ``[N, 43844, 1]`` at
22,050 Hz, three posteriorgrams: contour ``[N, 172, 264]``, note and onset ``[N, 172, 88]``). Its
``normalized_log`` adds ``1e-10`` before a ``Log``: 0 in FP16, so an FP16 engine writes NaN for quiet
windows. The data are synthesized here (no recording ships in a wheel found here): piano-like tones
(a harmonic series with a decaying envelope), chords, noise, a speech-like formant buzz, and quiet
windows (a tone at -70 dB). The metric is the user's own: the lower of note-frame F1 and onset F1
against FP32 (``benchmarks.audio_pitch:pitch_f1`` on a command line, with ``benchmarks/`` on PYTHONPATH).

    python benchmarks/audio_pitch.py prepare            # the model and 80 + 80 windows under $TRTWIDGETS_ZOO/audio
    python benchmarks/audio_pitch.py plan [--out DIR]   # trtwidgets plan --metric audio_pitch:pitch_f1, timed
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Dict, Mapping

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
ZOO = Path(os.environ.get("TRTWIDGETS_ZOO", "/work/zoo"))
FOLDER = ZOO / "audio"
RATE, SAMPLES = 22050, 43844
#: Output names of nmp.onnx (tf2onnx's): contour, note, onset.
CONTOUR, NOTE, ONSET = "StatefulPartitionedCall:0", "StatefulPartitionedCall:1", "StatefulPartitionedCall:2"
#: basic-pitch's own thresholds: a frame is a note above 0.3, an onset above 0.5.
NOTE_THRESHOLD, ONSET_THRESHOLD = 0.3, 0.5


def _f1(ref: np.ndarray, cand: np.ndarray) -> float:
    tp = float(np.sum(ref & cand))
    fp = float(np.sum(~ref & cand))
    fn = float(np.sum(ref & ~cand))
    return 1.0 if tp + fp + fn == 0 else 2 * tp / (2 * tp + fp + fn)


def pitch_f1(reference: Mapping[str, np.ndarray], candidate: Mapping[str, np.ndarray]) -> float:
    """The lower of note-frame F1 and onset F1 of ``candidate`` against FP32's ``reference`` (higher is better)."""
    notes = _f1(np.asarray(reference[NOTE]) > NOTE_THRESHOLD, np.asarray(candidate[NOTE]) > NOTE_THRESHOLD)
    onsets = _f1(np.asarray(reference[ONSET]) > ONSET_THRESHOLD, np.asarray(candidate[ONSET]) > ONSET_THRESHOLD)
    return min(notes, onsets)


def model_path() -> Path:
    """nmp.onnx, unpacked from the basic-pitch wheel (``pip download --no-deps basic-pitch==0.4.0``)."""
    out = FOLDER / "nmp.onnx"
    if out.is_file():
        return out
    FOLDER.mkdir(parents=True, exist_ok=True)
    wheels = sorted(FOLDER.glob("basic_pitch-*.whl"))
    if not wheels:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(FOLDER),
                        "basic-pitch==0.4.0"], check=True)
        wheels = sorted(FOLDER.glob("basic_pitch-*.whl"))
    with zipfile.ZipFile(wheels[0]) as z:
        out.write_bytes(z.read("basic_pitch/saved_models/icassp_2022/nmp.onnx"))
    return out


def _tone(rng, t, f0: float, harmonics: int = 6) -> np.ndarray:
    amps = 0.6 ** np.arange(harmonics)
    return sum(a * np.sin(2 * np.pi * f0 * (k + 1) * t + rng.uniform(0, 2 * np.pi)) for k, a in enumerate(amps))


def _window(rng, kind: str) -> np.ndarray:
    t = np.arange(SAMPLES) / RATE
    if kind == "noise":
        x = rng.normal(0, 0.1, SAMPLES)
    elif kind == "speech":  # a buzz at a varying pitch through two moving formants (bandpass by FFT)
        f0 = 110 + 30 * np.sin(2 * np.pi * 0.7 * t)
        buzz = np.sign(np.sin(2 * np.pi * np.cumsum(f0) / RATE))
        spec = np.fft.rfft(buzz)
        freqs = np.fft.rfftfreq(SAMPLES, 1 / RATE)
        shape = np.exp(-((freqs - 700) / 200) ** 2) + 0.6 * np.exp(-((freqs - 1200) / 300) ** 2)
        x = 0.3 * np.fft.irfft(spec * shape, SAMPLES)
    else:
        x = np.zeros(SAMPLES)
        notes = {"piano": 1, "chord": 3, "quiet": 1}[kind]
        for _ in range(int(rng.integers(1, 4))):
            start = int(rng.integers(0, SAMPLES // 2))
            env = np.zeros(SAMPLES)
            env[start:] = np.exp(-(np.arange(SAMPLES - start) / RATE) * rng.uniform(1.5, 4.0))
            for _ in range(notes):
                midi = int(rng.integers(40, 84))
                x += env * _tone(rng, t, 440.0 * 2 ** ((midi - 69) / 12))
        x *= (10 ** (-70 / 20) if kind == "quiet" else 0.2) / max(1e-9, np.abs(x).max())
    return x.astype(np.float32)


def windows(split: str, n: int) -> np.ndarray:
    """``n`` windows ``[n, 43844, 1]``: piano, chords, noise, speech and quiet windows in turn (seeded per split)."""
    rng = np.random.default_rng(11 if split == "calib" else 12)
    kinds = ("piano", "chord", "noise", "speech", "quiet")
    return np.stack([_window(rng, kinds[i % len(kinds)]) for i in range(n)])[..., None]


def prepare(n: int = 80) -> Dict[str, str]:
    """The model and one ``.npz`` per window under ``$TRTWIDGETS_ZOO/audio/{calib,heldback}``."""
    path = model_path()
    out = {"model": str(path)}
    for split in ("calib", "heldback"):
        folder = FOLDER / split
        if not any(folder.glob("*.npz")):
            folder.mkdir(parents=True, exist_ok=True)
            for i, w in enumerate(windows(split, n)):
                np.savez(folder / f"{i:04d}.npz", **{"serving_default_input_2:0": w[None]})
        out[split] = str(folder)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("prepare", "plan"))
    ap.add_argument("--n", type=int, default=80)
    ap.add_argument("--out", default=str(FOLDER / "plan"))
    ap.add_argument("--extra", nargs=argparse.REMAINDER, default=[])
    args = ap.parse_args(argv)
    files = prepare(args.n)
    print(files)
    if args.what == "plan":
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "benchmarks"), str(ROOT)]))
        cmd = [sys.executable, "-m", "trtwidgets", "plan", files["model"], "--data", files["calib"], "--held-back",
               files["heldback"], "--metric", "audio_pitch:pitch_f1", "--out", args.out, "--no-progress", *args.extra]
        t = time.perf_counter()
        rc = subprocess.run(cmd, env=env).returncode
        print(f"plan: exit {rc} in {time.perf_counter() - t:.0f} s")
        return rc
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
