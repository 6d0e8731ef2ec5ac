"""The metric registry (src/metrics/registry.hpp) as the tests read it: its entries parsed from
the header, so a test that names the metrics follows the registry instead of keeping a copy."""
import re
from pathlib import Path

REGISTRY = Path(__file__).resolve().parents[2] / "src" / "metrics" / "registry.hpp"
ENTRY = re.compile(r'\{\s*"([a-z0-9_]+)",\s*"((?:[^"\\]|\\.)*)",\s*"([^"]*)",\s*Part::(\w+)(?:,\s*(true|false))?\s*\}')


def metric_registry(text=None):
    """[(name, description, units, part)] of layer_metrics, in storage order."""
    text = REGISTRY.read_text() if text is None else text
    body = re.search(r"std::array<MetricInfo,\s*(\d+)>\s*layer_metrics\s*=\s*\{\{(.*?)\}\};", text, re.S)
    entries = [m.groups()[:4] for m in ENTRY.finditer(body.group(2))]
    assert len(entries) == int(body.group(1)), f"{REGISTRY}: {len(entries)} entries parsed of {body.group(1)}"
    return entries


def default_metric_names():
    """The names of the default selection (also "all" of [output] metrics): every entry but the
    opt-in ones (MetricInfo::opt_in true)."""
    body = re.search(r"layer_metrics\s*=\s*\{\{(.*?)\}\};", REGISTRY.read_text(), re.S).group(1)
    return [m.group(1) for m in ENTRY.finditer(body) if m.group(5) != "true"]


def metric_names():
    return [name for name, _, _, _ in metric_registry()]
