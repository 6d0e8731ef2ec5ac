"""Finite-size extrapolation T -> infinity of a metric over a sweep's T axis.

At each layer (and every combination of the other grid dimensions), the per-T means y(T) of a
metric, scaled by T by default (e.g. sr_cov / T, the stable rank per token), are fitted by least
squares as a polynomial in x = T^(-p):

    y(T) = c_0 + c_1 x + ... + c_k x^k,     x = T^(-power), k = degree (1 by default, 2 optional)

and c_0 is the T -> infinity estimate (the "limit"), c_1 the "slope". Weights: 1/SE^2 with SE the
standard error of each mean over its done replicates (load.replicate_stats), when every fitted point
has a finite positive SE; otherwise the fit is unweighted. Uncertainties are the square roots of the
diagonal of the fit's covariance:
  - weighted: (X^T W X)^-1 with W = diag(1/SE^2), multiplied by max(1, chi^2/dof) when dof > 0
    (the Birge ratio: a scatter beyond the standard errors, e.g. from higher-order terms the
    polynomial lacks, widens the uncertainty; it never narrows it);
  - unweighted: s^2 (X^T X)^-1 with s^2 = RSS / dof, which needs dof = (distinct T) - (k + 1) >= 1.
A fit needs at least k + 1 distinct T values (ValueError otherwise, e.g. a sweep with one T).

    fit_limit(T, mean, se=None, degree=1, power=1.0) -> Fit          one series of means
    extrapolate(src, metric="sr_cov", ...)           -> xarray.Dataset every layer and point
    per_t_stats(src, metric, ...)                    -> xarray.Dataset the per-T means and SEs

Metrics: any per-replicate variable of load() (sr_cov, sr_x, mu_rel, ...) and the derived
`pr` = sr_x^2 / sr_cov = (tr Sigma)^2 / tr(Sigma^2), the participation ratio of Sigma = X X^T, computed
per task. docs/ANALYTIC.md gives the T -> infinity limits of sr_cov / T, sr_x / T and pr / T for
the Markov perp stack; docs/FIGURES.md (mtg-limits) which powers and degrees fit them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# name -> (long name, mathtext symbol); derived per task from the stored metrics
DERIVED = {
    "pr": ("participation ratio (tr Sigma)^2 / tr(Sigma^2)", r"$(\mathrm{tr}\,\Sigma_\ell)^2/\mathrm{tr}\,\Sigma_\ell^2$"),
}


@dataclass(frozen=True)
class Fit:
    """A polynomial fit y = sum_j coef[j] x^j, x = T^(-power) (see the module docstring)."""
    limit: float           # coef[0]: the T -> infinity estimate
    limit_se: float        # its standard uncertainty
    slope: float           # coef[1]
    slope_se: float
    coef: np.ndarray
    cov: np.ndarray        # covariance of coef (after the Birge factor)
    x: np.ndarray          # the fitted T^(-power)
    y: np.ndarray
    y_se: np.ndarray       # NaN where not given
    weighted: bool
    degree: int
    power: float
    chi2: float            # sum of squared residuals / SE^2 (weighted) or RSS (unweighted)
    dof: int
    birge: float = field(default=1.0)  # the factor applied to the weighted covariance

    def predict(self, T):
        """The fitted curve at T (array-like; T = inf gives the limit)."""
        x = np.asarray(T, dtype=float) ** (-self.power)
        return np.polynomial.polynomial.polyval(x, self.coef)


def fit_limit(T, mean, se=None, degree=1, power=1.0):
    """Fit means `mean` observed at context lengths `T` (see the module docstring) and return a Fit.
    Points whose mean is not finite are left out. Raises ValueError with fewer than degree + 1
    distinct T values (or, unweighted, fewer than degree + 2), and for T <= 0."""
    if degree not in (1, 2):
        raise ValueError(f"degree must be 1 (linear) or 2 (quadratic) in T^-{power:g}, got {degree}")
    if not power > 0:
        raise ValueError(f"power must be > 0, got {power}")
    T = np.asarray(T, dtype=float).ravel()
    y = np.asarray(mean, dtype=float).ravel()
    s = np.full_like(y, np.nan) if se is None else np.asarray(se, dtype=float).ravel()
    if not (T.shape == y.shape == s.shape):
        raise ValueError(f"T, mean and se must have one length, got {T.shape}, {y.shape}, {s.shape}")
    if np.any(~np.isfinite(T)) or np.any(T <= 0):
        raise ValueError(f"T must be finite and > 0, got {T.tolist()}")
    keep = np.isfinite(y)
    T, y, s = T[keep], y[keep], s[keep]
    distinct = len(np.unique(T))
    need = degree + 1
    if distinct < need:
        raise ValueError(f"extrapolating in 1/T^{power:g} with a degree-{degree} polynomial needs at least "
                         f"{need} distinct T values with a mean; got {distinct} ({sorted(set(T.tolist()))})")
    weighted = bool(len(s) and np.all(np.isfinite(s)) and np.all(s > 0))
    x = T ** (-power)
    X = np.vander(x, degree + 1, increasing=True)
    dof = len(y) - (degree + 1)
    if weighted:
        w = 1.0 / s
        coef, *_ = np.linalg.lstsq(X * w[:, None], y * w, rcond=None)
        cov = np.linalg.inv((X * (w ** 2)[:, None]).T @ X)
        chi2 = float(np.sum(((y - X @ coef) * w) ** 2))
        birge = max(1.0, chi2 / dof) if dof > 0 else 1.0
        cov = cov * birge
    else:
        if dof < 1:
            raise ValueError(f"an unweighted degree-{degree} fit needs at least {degree + 2} T values to "
                             f"estimate its uncertainty; got {len(y)} (give standard errors to weight it)")
        coef, *_ = np.linalg.lstsq(X, y, rcond=None)
        chi2 = float(np.sum((y - X @ coef) ** 2))
        cov = chi2 / dof * np.linalg.inv(X.T @ X)
        birge = 1.0
    err = np.sqrt(np.diag(cov))
    return Fit(limit=float(coef[0]), limit_se=float(err[0]), slope=float(coef[1]), slope_se=float(err[1]),
               coef=coef, cov=cov, x=x, y=y, y_se=s, weighted=weighted, degree=degree, power=float(power),
               chi2=chi2, dof=dof, birge=birge)


def _metric(ds, metric):
    """The per-task values of `metric` (a load() variable or a DERIVED name) as a DataArray."""
    if metric == "pr":
        da = ds["sr_x"] ** 2 / ds["sr_cov"]
        return da.rename("pr").assign_attrs(long_name=DERIVED["pr"][0], symbol=DERIVED["pr"][1], units="1")
    if metric not in ds.data_vars or "replicate" not in ds[metric].dims:
        choices = sorted([v for v in ds.data_vars if "replicate" in ds[v].dims and ds[v].dtype.kind == "f"]
                         + list(DERIVED))
        raise KeyError(f"unknown metric {metric!r}; choose one of: {', '.join(choices)}")
    return ds[metric]


def t_dim(ds):
    """The grid dimension T is swept along (an [axes] T or a [[zip]] with a T member)."""
    if "T" not in ds.coords or ds["T"].ndim != 1:
        raise ValueError(f"{ds.attrs.get('path', 'store')}: T is not swept (an [axes] or [[zip]] list of "
                         "several T values is needed to extrapolate in T)")
    return ds["T"].dims[0]


def per_t_stats(src, metric="sr_cov", per_T=True):
    """replicate_stats of `metric` (divided by T when per_T) as a Dataset with `mean`, `se`, `n`
    over (grid dims..., layer); only done replicates count (load.replicate_stats)."""
    import xarray as xr

    from .load import load, replicate_stats

    ds = src if isinstance(src, xr.Dataset) else load(src)
    tdim = t_dim(ds)
    da = _metric(ds, metric)
    name = f"{metric}/T" if per_T else metric
    if per_T:
        da = da / ds["T"].astype(float)
    work = ds[["status"]].assign({"y": da})
    st = replicate_stats(work, ["y"])
    out = xr.Dataset({"mean": st["y"], "se": st["y_se"], "n": st["y_n"]}, attrs=dict(ds.attrs))
    out.attrs.update(metric=name, t_dim=tdim)
    return out


def extrapolate(src, metric="sr_cov", per_T=True, degree=1, power=1.0):
    """Fit every layer and every combination of the grid dimensions other than T's (see the module
    docstring). Returns an xarray.Dataset over (other grid dims..., layer) with `limit`, `limit_se`,
    `slope`, `slope_se`, `chi2`, `dof`, `weighted` (bool), `n_T` (T values fitted), and the per-T
    `mean`, `se`, `n` it fitted (with T's dimension). Cells with too few T values that have a mean
    get NaN; a store whose T axis is too short for the degree raises ValueError."""
    import xarray as xr

    stats = per_t_stats(src, metric, per_T)
    tdim = stats.attrs["t_dim"]
    if stats.sizes[tdim] < degree + 1:
        raise ValueError(f"extrapolating in 1/T^{power:g} with a degree-{degree} polynomial needs at least "
                         f"{degree + 1} T values; the store has {stats.sizes[tdim]} "
                         f"({stats['T'].values.tolist()})")
    mean = stats["mean"]
    others = [d for d in mean.dims if d != tdim]
    shape = [mean.sizes[d] for d in others]
    res = {k: np.full(shape, np.nan) for k in ("limit", "limit_se", "slope", "slope_se", "chi2")}
    res["dof"] = np.zeros(shape, dtype=np.int64)
    res["n_T"] = np.zeros(shape, dtype=np.int64)
    res["weighted"] = np.zeros(shape, dtype=bool)
    m = mean.transpose(*others, tdim).values
    s = stats["se"].transpose(*others, tdim).values
    T = stats["T"].values.astype(float)
    for idx in np.ndindex(*shape):
        try:
            f = fit_limit(T, m[idx], s[idx], degree=degree, power=power)
        except ValueError:
            continue
        res["limit"][idx], res["limit_se"][idx] = f.limit, f.limit_se
        res["slope"][idx], res["slope_se"][idx] = f.slope, f.slope_se
        res["chi2"][idx], res["dof"][idx], res["n_T"][idx], res["weighted"][idx] = f.chi2, f.dof, len(f.x), f.weighted
    coords = {d: stats[d] for d in others if d in stats.coords}
    out = xr.Dataset({k: (others, v) for k, v in res.items()}, coords=coords)
    out = out.assign({"mean": stats["mean"], "se": stats["se"], "n": stats["n"]})
    out.attrs.update(stats.attrs)
    out.attrs.update(degree=degree, power=float(power), per_T=bool(per_T))
    return out
