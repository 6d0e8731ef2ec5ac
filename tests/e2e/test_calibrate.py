"""rcsweep calibrate and the calibrated time estimate of rcsweep plan."""
import os
import re

from conftest import SOURCE, rcsweep

SWEEP = SOURCE / "jobs" / "examples" / "quick.toml"


def plan_seconds(out):
    """The one-core time `plan` printed, in seconds, as (low, high): it is printed to one decimal."""
    m = re.search(r"^work .*about ([0-9.]+) (ms|s|min|h) on one core", out, re.M)
    assert m, out
    unit = {"ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0}[m.group(2)]
    return (float(m.group(1)) - 0.05) * unit, (float(m.group(1)) + 0.05) * unit


def test_calibrate_stores_rates_that_plan_then_uses(tmp_path):
    cal = tmp_path / "cal" / "calibration.toml"
    proc = rcsweep("calibrate", "-o", cal, check=0, timeout=120)
    assert re.search(r"dgemm 1024\^3 +[0-9.]+ GFLOP/s", proc.stdout)
    assert "stored in" in proc.stdout
    text = cal.read_text()
    rates = dict(re.findall(r"^(\w+_rate) = ([0-9.e+-]+)$", text, re.M))
    assert set(rates) == {"normal_rate", "exp_rate", "pass_rate", "conv_rate"}
    assert all(float(v) > 1e6 for v in rates.values())

    env = dict(os.environ, RCSWEEP_CALIBRATION=str(cal))
    calibrated = rcsweep("plan", SWEEP, check=0, env=env).stdout
    assert f"rates of this machine from {cal}" in calibrated

    # a machine ten times slower (rates / 10, times x 10): the estimate grows ten times
    def scaled(line, factor):
        if "[" in line:  # a table of [size, value] pairs: scale the values
            return re.sub(r"\[([0-9.e+-]+), ([0-9.e+-]+)\]", lambda m: f"[{m.group(1)}, {float(m.group(2)) * factor!r}]", line)
        name, value = line.split(" = ")
        return f"{name} = {float(value) * factor!r}"

    slow = tmp_path / "slow.toml"
    factors = {"gemm_rate": 0.1, "normal_rate": 0.1, "exp_rate": 0.1, "pass_rate": 0.1, "conv_rate": 0.1,
               "signal_s": 10, "mixer_s": 10, "svd_s": 10}
    slow.write_text("\n".join(scaled(line, factors[line.split(" ")[0]]) if line.split(" ")[0] in factors else line
                              for line in text.splitlines()) + "\n")
    est = plan_seconds(calibrated)
    est_slow = plan_seconds(rcsweep("plan", SWEEP, check=0, env=dict(os.environ, RCSWEEP_CALIBRATION=str(slow))).stdout)
    assert 8 * est[0] < est_slow[1] and est_slow[0] < 12 * est[1], (est, est_slow)


def test_calibration_of_another_machine_or_damaged_is_not_used(tmp_path):
    cal = tmp_path / "calibration.toml"
    rcsweep("calibrate", "-o", cal, check=0, timeout=120)
    other = tmp_path / "other.toml"
    other.write_text(re.sub(r"^machine = .*$", "machine = 'another machine'", cal.read_text(), flags=re.M))
    damaged = tmp_path / "damaged.toml"
    damaged.write_text(cal.read_text()[:40])
    for path in (other, damaged, tmp_path / "missing.toml"):
        out = rcsweep("plan", SWEEP, check=0, env=dict(os.environ, RCSWEEP_CALIBRATION=str(path))).stdout
        assert "not calibrated, run `rcsweep calibrate` once" in out, path


def test_calibrate_to_an_unwritable_place_fails_clearly(tmp_path):
    target = tmp_path / "file"
    target.write_text("")
    proc = rcsweep("calibrate", "-o", target / "cal.toml", timeout=120)  # parent is a file
    assert proc.returncode == 1
    assert "cannot write the calibration" in proc.stderr
