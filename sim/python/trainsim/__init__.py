"""trainsim from Python (docs/python.md).

simulate, compare, plan and sweep run the library code of the `trainsim` commands of the same names
and return what their `--json` prints, as dicts and lists with the same fields. A scenario (or a
sweep grid) is a path or a dict with the keys of its YAML file. Bad input raises trainsim.Error
(a ValueError) with the message the CLI prints; to_pandas turns a result into a DataFrame.

    >>> import trainsim
    >>> r = trainsim.plan(model="llama2-70b", gpu="h100-sxm", gpus=64)
    >>> r["plans"][0]["days_to_train"]
"""

from ._trainsim import Error, InternalError, __version__, compare, plan, simulate, sweep

__all__ = ["Error", "InternalError", "__version__", "compare", "plan", "simulate", "sweep", "to_pandas"]


def _pandas():
    try:
        import pandas
    except ImportError as e:  # pandas is optional: only to_pandas needs it
        raise ImportError(
            "trainsim.to_pandas needs pandas (Debian: apt-get install python3-pandas; or pip install pandas); "
            "the results themselves are plain dicts and lists"
        ) from e
    return pandas


def _plans_of(result):
    """The plan objects of simulate / compare / plan results (one plan's object, or {'plans': [...]})."""
    if isinstance(result, dict) and isinstance(result.get("plans"), list):
        return result["plans"]
    if isinstance(result, dict) and "step_time_s" in result:
        return [result]
    raise TypeError("to_pandas: not a result of trainsim.simulate, compare, plan or sweep")


def to_pandas(result, what="plans"):
    """A DataFrame of a result, one row per plan (or sweep row), nested fields as dotted columns
    ("band.basis", "memory.weights_gib"), as the CLI's --csv names its columns.

    result: what simulate, compare, plan or sweep returned.
    what: for a plan result, "plans" (the ranked plans, default), "frontier" (one row per GPU count:
      its best plan's fields, num_gpus, pareto and excluded_by, as `plan --csv --frontier`) or
      "offload_plans"; ignored for the others.
    """
    pd = _pandas()
    if isinstance(result, list):  # sweep rows
        return pd.json_normalize(result)
    if what == "frontier":
        if not isinstance(result, dict) or "frontier" not in result:
            raise ValueError("to_pandas(..., what='frontier'): the result has no frontier (plan with several gpus)")
        rows = []
        for f in result["frontier"]:
            row = dict(f["best"] or {})
            row.update(num_gpus=f["num_gpus"], pareto=f["pareto"], excluded_by=f.get("excluded_by", []))
            rows.append(row)
        return pd.json_normalize(rows)
    if what == "offload_plans":
        return pd.json_normalize(result.get("offload_plans", []) if isinstance(result, dict) else [])
    if what != "plans":
        raise ValueError(f"to_pandas: what={what!r}: one of 'plans', 'frontier', 'offload_plans'")
    return pd.json_normalize(_plans_of(result))
