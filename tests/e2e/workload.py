"""Workloads and stop moments that do not depend on the machine's speed.

Tests that stop a run (a kill, a signal, a time limit) need it to be still running when the stop
comes, and should not take much longer on a slow machine than on a fast one. They used to size
their sweeps for one machine. Instead:

- `sized(name, template, unit, target_s)` returns a sweep whose `unit` (replicates or depth) is
  chosen so that its tasks take about `target_s` seconds of computation on one core of this
  machine. The rate is measured once per process: a short single-process run of the same sweep
  (`unit` small, then larger until its tasks take a measurable time), from the store's per-task
  wall_s (computation only: not MPI start-up nor store creation).
- `Watched` runs rcsweep with rank 0's events (`--progress json`, progress every 50 ms) and reads them as they come, so
  that a test can stop the run once it has done a given share of its work (`wait_until`), instead
  of after a fixed sleep.

RCSWEEP_TEST_SPEED (to check the tests, not for normal runs): take the machine for this many times
faster than measured, e.g. 3 (workloads 3x longer than meant: a machine 3x slower than the
measurement) or 1/3 (3x shorter: a machine 3x faster).
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from fractions import Fraction
from pathlib import Path

import h5py
import numpy as np

SOURCE = Path(os.environ.get("RCSWEEP_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BIN = os.environ.get("RCSWEEP_BIN", str(SOURCE / "build" / "rcsweep"))
SPEED = float(Fraction(os.environ.get("RCSWEEP_TEST_SPEED", "1")))
PROBE_MIN_S = 0.3  # a probe's tasks must take at least this long to be measured

_rates = {}  # name -> (unit, seconds per unit on one core)


def set_unit(template, unit, value):
    """`template` (sweep TOML text) with its `unit = ...` line (replicates, depth) set to `value`."""
    text, n = re.subn(rf"^{unit} = \d+$", f"{unit} = {int(value)}", template, count=1, flags=re.M)
    assert n == 1, f"no '{unit} = N' line in the sweep"
    return text


def compute_seconds(store):
    """Seconds the done tasks of `store` computed (the sum of their wall_s)."""
    with h5py.File(store, "r") as f:
        tasks = f["tasks"][...]
    return float(np.sum(tasks["wall_s"][tasks["status"] == 1]))


def seconds_per_unit(name, template, unit, probe=4):
    """One core's computing time per `unit` of the sweep `template`, measured here once per process
    (and divided by RCSWEEP_TEST_SPEED)."""
    if name not in _rates:
        with tempfile.TemporaryDirectory(prefix="rcsweep-probe-") as d:
            n = probe
            for _ in range(6):
                sweep, store = Path(d) / f"{name}.toml", Path(d) / f"{name}.h5"
                sweep.write_text(set_unit(template, unit, n))
                proc = subprocess.run([BIN, "run", sweep, "-o", store, "-q", "--overwrite"], capture_output=True,
                                      text=True, timeout=600)
                assert proc.returncode == 0, f"probe of {name}: exit {proc.returncode}\n{proc.stderr}"
                s = compute_seconds(store)
                if s >= PROBE_MIN_S:
                    break
                n = int(np.ceil(n * min(16.0, 1.5 * PROBE_MIN_S / max(s, 1e-3))))
        _rates[name] = s / n / SPEED
        print(f"[workload] {name}: {_rates[name]:.4g} s per {unit} on one core "
              f"(measured {s:.2f} s for {n}, RCSWEEP_TEST_SPEED={SPEED:g})", file=sys.stderr)
    return _rates[name]


def units_for(name, template, unit, target_s, lo=1, hi=None, probe=4):
    """How many `unit`s make the sweep take about `target_s` seconds on one core here."""
    n = max(lo, int(round(target_s / seconds_per_unit(name, template, unit, probe))))
    return min(n, hi) if hi else n


def sized(name, template, unit, target_s, lo=1, hi=None, probe=4):
    """The sweep `template` with `unit` set for about `target_s` seconds on one core here."""
    n = units_for(name, template, unit, target_s, lo, hi, probe)
    print(f"[workload] {name}: {unit} = {n} for about {target_s:g} s on one core", file=sys.stderr)
    return set_unit(template, unit, n)


PROGRESS = re.compile(r"\[rcsweep\] (\d+)/(\d+) tasks, +([0-9.]+)% of work")


class Watched:
    """rcsweep run started in its own session with `--progress json` (rank 0's events on stdout,
    progress every `interval` seconds: RCSWEEP_PROGRESS_INTERVAL, docs/EVENTS.md) and both streams
    read as they come: `events` so far, `done`/`total` tasks and `work` (the fraction of this
    run's work) of the last progress event, `opened` once the store is open (the `started` event),
    `finished` (the `finished` event, None before), `err` stderr so far."""

    def __init__(self, cmd, env=None, interval=0.05):
        env = {**os.environ, "RCSWEEP_PROGRESS_INTERVAL": str(interval), **(env or {})}
        self.started = time.monotonic()
        self.proc = subprocess.Popen([str(c) for c in cmd] + ["--progress", "json"], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, start_new_session=True, env=env)
        self.pid = self.proc.pid
        self.lines = []
        self.events = []
        self.done = self.total = 0
        self.work = 0.0
        self.opened = None  # seconds from the start to the `started` event
        self.finished = None
        self._cond = threading.Condition()
        self._open = 2  # streams not yet at their end
        self._readers = [threading.Thread(target=self._read_events, daemon=True),
                         threading.Thread(target=self._read_err, daemon=True)]
        for r in self._readers:
            r.start()

    def _read_events(self):
        for line in self.proc.stdout:
            ev = json.loads(line)
            with self._cond:
                self.events.append(ev)
                if ev["event"] == "progress":
                    self.done, self.total, self.work = ev["tasks_done"], ev["tasks_total"], ev["fraction"]
                elif ev["event"] == "started" and self.opened is None:
                    self.opened = time.monotonic() - self.started
                elif ev["event"] == "finished":
                    self.finished = ev
                self._cond.notify_all()
        self._closed()

    def _read_err(self):
        for line in self.proc.stderr:
            with self._cond:
                self.lines.append(line)
        self._closed()

    def _closed(self):
        with self._cond:
            self._open -= 1
            self._cond.notify_all()

    def named(self, name):
        """The events of this name so far."""
        with self._cond:
            return [e for e in self.events if e["event"] == name]

    @property
    def err(self):
        with self._cond:
            return "".join(self.lines)

    def wait_until(self, condition, timeout=300):
        """Wait until `condition(self)` holds (True) or rcsweep has closed its output, i.e. ended
        (False)."""
        end = time.monotonic() + timeout
        with self._cond:
            while not condition(self):
                if self._open == 0:
                    return False
                left = end - time.monotonic()
                assert left > 0, f"timed out after {timeout} s waiting for rcsweep\n{''.join(self.lines)}"
                self._cond.wait(min(left, 0.5))
            return True

    def send_signal(self, sig):
        self.proc.send_signal(sig)

    def poll(self):
        return self.proc.poll()

    def kill(self):
        self.proc.kill()

    @property
    def returncode(self):
        return self.proc.returncode

    def wait(self, timeout=None):
        """Wait for the end; return (exit code, stderr)."""
        code = self.proc.wait(timeout=timeout)
        for r in self._readers:
            r.join(timeout=30)
        return code, self.err


def run_seconds(stderr):
    """The wall time rcsweep reported ("finished after 3.2 s", "stopped after 1.1 min"), in seconds."""
    m = re.search(r"\] (?:finished|stopped) after ([\d.]+) (s|min|h):", stderr)
    assert m, stderr
    return float(m.group(1)) * {"s": 1, "min": 60, "h": 3600}[m.group(2)]
