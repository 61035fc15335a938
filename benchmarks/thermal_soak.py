"""Does a power-limited GPU keep slowing down as it heats up over minutes of load?

    python benchmarks/thermal_soak.py [--phases prefill:8,rest:20,prefill:180,rest:5,prefill:8,decode:60,prefill:8]
                                      [--tokens 8192] [--tp 1] [--dtype fp8] [--out DIR]

The sustained fractions in the GPU catalog (docs/fidelity.md item 16) were measured over
6-8 s of back-to-back load that started from an idle, cool GPU. A benchmark run loads the
GPU for minutes. Silicon leaks more as it warms, so at the same board power limit less
power is left for switching and the clock may settle lower than it did in the first
seconds. This script runs one Llama-3.1-70B layer per GPU (calibration/power.py's
`layer_parts`) through a list of phases and records, beside each timing window, what
nvidia-smi reports every 250 ms: GPU and memory temperature, SM clock, board power and the
clock-event reasons.

Phases (comma-separated `kind:seconds`): `prefill` runs the prefill layer on `--tokens`
prompt tokens back to back, `decode` a decode step's layer (`--sequences` over
`--context` cached tokens), `rest` idles. Every `--split-every` seconds of a load phase one
pass is split into its kernels with CUDA events. Fractions are against the kernels' times
at the very start (after `--rest` s idle, out of the idle power state, before the limit
bites), as `calibration.sustained.measure_sequence` takes them.

It prints a summary per phase (first and last windows, and every `--report-every` s) and
writes `windows.csv`, `splits.csv` and `smi.csv` under `--out` where given.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import itertools
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from calibration.bench import fp8_supported, pick_device, require_torch
from calibration.power import layer_parts
from calibration.sustained import back_to_back, split_pass

SMI_FIELDS = ("timestamp,temperature.gpu,temperature.memory,clocks.sm,clocks.mem,power.draw,"
              "clocks_event_reasons.active")


class SmiLog:
    """nvidia-smi sampling in the background; nothing where it is absent."""

    def __init__(self, path: Path | None, period_ms: int = 250):
        self.rows: list[tuple[float, list[str]]] = []
        self._proc = None
        self._path = path
        self.fields = SMI_FIELDS
        try:  # older drivers name the last field clocks_throttle_reasons; drop it where refused
            subprocess.run(["nvidia-smi", f"--query-gpu={self.fields}", "--format=csv", "-i", "0"],
                           capture_output=True, timeout=10, check=True)
        except subprocess.CalledProcessError:
            self.fields = SMI_FIELDS.rsplit(",", 1)[0]
        except (OSError, subprocess.SubprocessError):
            return
        # To a file, not a pipe: a pipe nobody reads fills after ~4 minutes of samples (64 KiB) and
        # stalls nvidia-smi: the first H200 run lost its last 90 s that way. Closed in stop().
        self._raw = tempfile.TemporaryFile("w+")  # noqa: SIM115
        try:
            self._proc = subprocess.Popen(
                ["nvidia-smi", f"--query-gpu={self.fields}", "--format=csv,noheader,nounits", "-lms",
                 str(period_ms), "-i", "0"], stdout=self._raw, stderr=subprocess.DEVNULL, text=True)
        except OSError:
            self._proc = None

    def stop(self) -> None:
        if self._proc is None:
            return
        self._proc.terminate()
        self._proc.wait(timeout=10)
        self._raw.seek(0)
        text = self._raw.read()
        self._raw.close()
        for line in text.splitlines():
            vals = [v.strip() for v in line.split(",")]
            try:
                stamp = datetime.strptime(vals[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            except (ValueError, IndexError):
                continue
            self.rows.append((stamp, vals[1:]))
        if self._path is not None:
            with self._path.open("w", newline="") as fh:
                w = csv.writer(fh)
                w.writerow(["unix_s", *self.fields.split(",")[1:]])
                for stamp, vals in self.rows:
                    w.writerow([f"{stamp:.3f}", *vals])

    def near(self, t0: float, t1: float) -> dict[str, float]:
        """Medians of the numeric samples taken between two wall-clock instants."""
        names = self.fields.split(",")[1:]
        # A window shorter than the sampling period takes the samples within 0.5 s of it;
        # none at all (nvidia-smi absent or stopped) reads as nan, never as a stale sample.
        picked = [vals for stamp, vals in self.rows if t0 - 0.5 <= stamp <= t1 + 0.5 and (
            t0 <= stamp <= t1 or t1 - t0 < 1.0)]
        out: dict[str, float] = {}
        for i, name in enumerate(names):
            nums = []
            for vals in picked:
                with contextlib.suppress(ValueError, IndexError):
                    nums.append(float(vals[i]))
            if nums:
                out[name] = statistics.median(nums)
        return out


def parse_phases(text: str) -> list[tuple[str, float]]:
    out = []
    for item in text.split(","):
        kind, _, secs = item.partition(":")
        if kind not in ("prefill", "decode", "rest") or not secs:
            raise SystemExit(f"--phases: '{item}' is not kind:seconds with kind prefill, decode or rest")
        out.append((kind, float(secs)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phases", default="prefill:8,rest:20,prefill:180,rest:5,prefill:8,decode:60,prefill:8")
    parser.add_argument("--tokens", type=int, default=8192, help="prompt tokens of the prefill layer")
    parser.add_argument("--sequences", type=int, default=64, help="sequences of the decode layer")
    parser.add_argument("--context", type=int, default=2048, help="cached tokens per decode sequence")
    parser.add_argument("--tp", type=int, default=1, choices=[1, 2, 4, 8])
    parser.add_argument("--dtype", default="fp8", choices=["fp8", "bf16"])
    parser.add_argument("--rest", type=float, default=10.0, help="idle seconds before the reference timing")
    parser.add_argument("--window", type=float, default=0.25, help="seconds per timing window")
    parser.add_argument("--split-every", type=float, default=2.0, help="seconds between per-kernel splits")
    parser.add_argument("--report-every", type=float, default=15.0, help="seconds between printed lines")
    parser.add_argument("--device", default=None)
    parser.add_argument("--out", type=Path, default=None, help="folder for windows.csv, splits.csv, smi.csv")
    args = parser.parse_args()
    phases = parse_phases(args.phases)

    torch = require_torch()
    dev = pick_device(torch, args.device)
    cuda = dev.type == "cuda"
    sync = torch.cuda.synchronize if cuda else torch.cpu.synchronize
    dtype = args.dtype = args.dtype if args.dtype != "fp8" or fp8_supported(torch, dev) else "bf16"  # as reported
    parts = {
        "prefill": layer_parts(torch, dev, "layer", args.tokens, args.tp, dtype, 0),
        "decode": layer_parts(torch, dev, "decode-layer", args.sequences, args.tp, dtype, args.context),
    }
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
    smi = SmiLog(args.out / "smi.csv" if args.out else None)

    def one_pass(fns):
        def run() -> None:
            for fn in fns:
                fn()
        return run

    passes = {k: one_pass([fn for _, fn in v]) for k, v in parts.items()}
    for run in passes.values():  # compile, allocate, pick algorithms
        run()
    sync()
    time.sleep(args.rest)
    reference: dict[str, list[float]] = {}
    for kind, kparts in parts.items():  # each from idle clocks, as measure_sequence takes its burst
        back_to_back(passes[kind], sync, 0.03, 0.01)
        reference[kind] = split_pass(torch, [fn for _, fn in kparts], sync, cuda)
        time.sleep(2.0)

    start = time.time()
    windows: list[tuple] = []  # (phase index, kind, seconds since start at the window's end, µs per pass)
    splits: list[tuple] = []  # (phase index, kind, t since start, kernel, µs)
    for index, (kind, seconds) in enumerate(phases):
        if kind == "rest":
            time.sleep(seconds)
            continue
        fns = [fn for _, fn in parts[kind]]
        labels = [label for label, _ in parts[kind]]
        end = time.perf_counter() + seconds
        next_split = 0.0
        while time.perf_counter() < end:
            now = time.time() - start
            if now >= next_split:
                for label, us in zip(labels, split_pass(torch, fns, sync, cuda, passes=1), strict=True):
                    splits.append((index, kind, now, label, us))
                next_split = now + args.split_every
            chunk = min(args.split_every, max(0.0, end - time.perf_counter()))
            if chunk <= 0:
                break
            began = time.time()
            for t, us in back_to_back(passes[kind], sync, chunk, args.window):
                windows.append((index, kind, began + t - start, us))
    smi.stop()
    report(phases, parts, reference, windows, splits, smi, start, args)


def report(phases, parts, reference, windows, splits, smi: SmiLog, start: float, args) -> None:
    totals = {k: sum(v) for k, v in reference.items()}
    print(f"Llama-3.1-70B layer at TP{args.tp}, {args.dtype}; prefill {args.tokens} tokens, decode "
          f"{args.sequences} x {args.context}")
    for kind, kparts in parts.items():
        ref = ", ".join(f"{label} {us:,.0f}" for (label, _), us in zip(kparts, reference[kind], strict=True))
        print(f"reference ({kind}, from idle): pass {totals[kind]:,.1f} µs [{ref}]")
    print("phase  kind     t0..t1 s   pass-fraction  attention  GEMMs  SM MHz  power W  GPU °C  HBM °C")
    for index, (kind, seconds) in enumerate(phases):
        if kind == "rest":
            continue
        rows = [w for w in windows if w[0] == index]
        if not rows:
            continue
        t_first = rows[0][2]
        edges = [t_first]
        while edges[-1] + args.report_every < rows[-1][2]:
            edges.append(edges[-1] + args.report_every)
        edges.append(rows[-1][2] + 1e-9)
        # short phases: first second and last quarter
        if seconds <= 3 * args.report_every:
            edges = [t_first, t_first + min(1.0, seconds / 4), rows[-1][2] - seconds / 4, rows[-1][2] + 1e-9]
        for lo, hi in itertools.pairwise(edges):
            sel = [w for w in rows if lo <= w[2] < hi]
            if not sel:
                continue
            frac = totals[kind] / statistics.median(w[3] for w in sel)
            ks = [s for s in splits if s[0] == index and lo - args.split_every <= s[2] < hi]
            att = _kernel_fraction(ks, parts[kind], reference[kind], lambda label: label == "attention")
            gem = _kernel_fraction(ks, parts[kind], reference[kind], lambda label: label.endswith("GEMM"))
            s = smi.near(start + lo, start + hi)
            print(f"{index:5d}  {kind:7s} {lo:6.1f}..{hi:6.1f}  {min(frac, 9.99):13.3f}  {att:9s}  {gem:5s}  "
                  f"{s.get('clocks.sm', float('nan')):6.0f}  {s.get('power.draw', float('nan')):7.0f}  "
                  f"{s.get('temperature.gpu', float('nan')):6.0f}  {s.get('temperature.memory', float('nan')):6.0f}")
    if args.out is not None:
        with (args.out / "windows.csv").open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["phase", "kind", "t_s", "us_per_pass", "fraction"])
            for row in windows:
                w.writerow([row[0], row[1], f"{row[2]:.3f}", f"{row[3]:.1f}", f"{totals[row[1]] / row[3]:.4f}"])
        with (args.out / "splits.csv").open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["phase", "kind", "t_s", "kernel", "us", "fraction"])
            for phase, kind, t, label, us in splits:
                ref = reference[kind][[lab for lab, _ in parts[kind]].index(label)]
                w.writerow([phase, kind, f"{t:.3f}", label, f"{us:.1f}", f"{ref / us:.4f}"])


def _kernel_fraction(splits, kparts, reference, pick) -> str:
    labels = [label for label, _ in kparts]
    ref = sum(r for label, r in zip(labels, reference, strict=True) if pick(label))
    by_t: dict[float, float] = {}
    for _, _, t, label, us in splits:
        if pick(label):
            by_t[t] = by_t.get(t, 0.0) + us
    if not by_t or ref <= 0:
        return "  -  "
    return f"{ref / statistics.median(by_t.values()):.3f}"


if __name__ == "__main__":
    main()
