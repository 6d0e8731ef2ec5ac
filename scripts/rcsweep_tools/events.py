"""The events of a running sweep, as `rcsweep run --progress json` writes them: one JSON object
per line on stdout, {"event": NAME, ...fields} (docs/EVENTS.md). `Sweep.run(progress=True)` shows
them as a progress bar (tqdm's, a widget in a notebook, when tqdm is installed; a line on stderr
otherwise); `Sweep.run(on_event=f)` calls f with each event as a dict.

    for line in proc.stdout:            # a program reading `rcsweep run --progress json`
        ev = parse_event(line)
        if ev and ev["event"] == "progress":
            print(f"{100 * ev['fraction']:.0f}% done, {ev['eta_s']} s left")
"""
import json
import math
import sys


def parse_event(line):
    """The event of one line of `--progress json` output (a dict with "event"), or None. Bytes are
    read as UTF-8, a byte that is not as U+FFFD."""
    if isinstance(line, (bytes, bytearray)):
        line = bytes(line).decode("utf-8", "replace")
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        ev = json.loads(line)
    except ValueError:
        return None
    return ev if isinstance(ev, dict) and isinstance(ev.get("event"), str) else None


def _number(x):
    """`x` as a finite float, else None (a field an event lacks or holds something else in)."""
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _duration(s):
    if s is None or s < 0:
        return "?"
    if s < 90:
        return f"{s:.0f}s"
    if s < 5400:
        return f"{int(s) // 60}m{int(s) % 60:02d}s"
    return f"{s / 3600:.1f}h"


class ProgressBar:
    """Shows progress events as a bar of the run's work (cost-weighted, in %), with the tasks done
    and rcsweep's ETA: tqdm.auto's bar when tqdm is importable, else a line on `stream` (stderr)."""

    def __init__(self, stream=None, use_tqdm=True):
        self._stream = stream if stream is not None else sys.stderr
        self._bar = None
        self._tqdm = None
        if use_tqdm:
            try:
                from tqdm.auto import tqdm
                self._tqdm = tqdm
            except ImportError:
                pass

    def __call__(self, ev):
        if ev.get("event") != "progress":
            return
        text = (f"{ev.get('tasks_done', '?')}/{ev.get('tasks_total', '?')} tasks, ETA "
                f"{'at most ' if ev.get('eta_is_bound') else ''}{_duration(_number(ev.get('eta_s')))}")
        percent = 100.0 * min(max(_number(ev.get("fraction")) or 0.0, 0.0), 1.0)
        if self._tqdm is not None:
            if self._bar is None:
                self._bar = self._tqdm(total=100.0, desc="rcsweep", file=self._stream,
                                       bar_format="{desc}: {percentage:5.1f}%|{bar}| {postfix}")
            self._bar.n = percent
            self._bar.set_postfix_str(text, refresh=False)
            self._bar.refresh()
        else:
            self._stream.write(f"[rcsweep] {percent:5.1f}% of work, {text}\n")
            self._stream.flush()
        if ev.get("last"):
            self.close()

    def close(self):
        if self._bar is not None:
            self._bar.close()
            self._bar = None
