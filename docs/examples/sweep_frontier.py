"""A budget table and its days-vs-cost frontier, from Python (docs/python.md).

Notebook style: each block is a cell. Run it as a script with the module on the path:

    PYTHONPATH=build/python python3 docs/examples/sweep_frontier.py --out frontier.png

It sweeps Llama-2 7B over 8 to 32 H100 or A100 GPUs at list prices (one plan search per model and
GPU, the grid written as a dict with the keys of a sweep grid YAML; add models to the list for a
market table), tabulates the best plan of each count with pandas, finds each model's days-vs-cost
frontier (the plans no other plan of that model beats on both the expected days and the bill), and
plots it with matplotlib.
"""

import argparse

import matplotlib

matplotlib.use("Agg")  # no display: render to a file
import matplotlib.pyplot as plt

import trainsim

# Cell 1: the grid. Prices: public on-demand list prices per GPU-hour, Lambda GPU Cloud 2024-2025
# (8x H100 SXM $2.99, 8x A100 SXM 80GB $1.79), as in scenarios/examples/default.yaml.
GRID = {
    "title": "Llama-2 7B, 300B tokens, on 8 to 32 H100 or A100",
    "models": ["llama2-7b"],
    "gpus": ["h100-sxm", "a100-sxm-80gb"],
    "counts": [8, 16, 32],
    "tokens": ["300B"],
    "prices": [
        {"name": "h100-list", "gpu": "h100-sxm", "basis": "gpu_hour", "rate": 2.99, "currency": "USD"},
        {"name": "a100-list", "gpu": "a100-sxm-80gb", "basis": "gpu_hour", "rate": 1.79, "currency": "USD"},
    ],
}

COLUMNS = ["model", "gpu", "num_gpus", "tp", "pp", "dp", "micro_batch", "expected_days", "expected_cost", "pareto"]


def frontier(table):
    """Per model, the plans that no other plan of the model beats on both expected days and bill."""
    ok = table[table["status"] == "ok"]
    keep = []
    for _, plans in ok.groupby("model"):
        for i, p in plans.iterrows():
            beaten = (
                (plans["expected_days"] <= p["expected_days"])
                & (plans["expected_cost"] <= p["expected_cost"])
                & ((plans["expected_days"] < p["expected_days"]) | (plans["expected_cost"] < p["expected_cost"]))
            )
            if not beaten.any():
                keep.append(i)
    return ok.loc[keep].sort_values(["model", "expected_days"])


def plot(table, front, out):
    fig, ax = plt.subplots(figsize=(8, 5))
    ok = table[table["status"] == "ok"]
    for (model, gpu), cell in ok.groupby(["model", "gpu"]):
        ax.plot(cell["expected_days"], cell["expected_cost"] / 1e3, marker="o", linestyle=":",
                label=f"{model} on {gpu}")
        for _, p in cell.iterrows():
            ax.annotate(str(p["num_gpus"]), (p["expected_days"], p["expected_cost"] / 1e3), fontsize=7,
                        xytext=(3, 3), textcoords="offset points")
    for model, f in front.groupby("model"):
        ax.step(f["expected_days"], f["expected_cost"] / 1e3, where="post", linewidth=2, alpha=0.5,
                label=f"{model} frontier")
    ax.set_xscale("log")
    ax.set_xlabel("expected days to train (failures and restarts included)")
    ax.set_ylabel("bill, thousand USD")
    ax.set_title(GRID["title"], fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)


def main(out="sweep_frontier.png"):
    # Cell 2: the sweep: one row per model, GPU, price and count, the fields of `trainsim sweep --json`.
    rows = trainsim.sweep(GRID)
    # Cell 3: the table.
    table = trainsim.to_pandas(rows)
    print(table[COLUMNS].to_string(index=False))
    # Cell 4: each model's frontier across GPUs and counts, and the plot.
    front = frontier(table)
    print("\nfrontier (no other plan of the model is both faster and cheaper):")
    print(front[COLUMNS[:3] + ["expected_days", "expected_cost"]].to_string(index=False))
    plot(table, front, out)
    print(f"\nplot written to {out}")
    return table, front


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="sweep_frontier.png", help="the PNG to write")
    main(parser.parse_args().out)
