"""The trainsim Python module against the CLI it mirrors (docs/python.md).

Run by ctest (tests/CMakeLists.txt) with PYTHONPATH=<build>/python, TRAINSIM_EXE (the CLI) and
TRAINSIM_SOURCE_DIR set. Each result is compared with what the CLI prints for the same request:
the module must return the CLI's --json, field for field.
"""

import json
import os
import pathlib
import subprocess
import sys
import tempfile
import unittest

import trainsim

EXE = os.environ["TRAINSIM_EXE"]
SOURCE = pathlib.Path(os.environ["TRAINSIM_SOURCE_DIR"])

# A cheap search in the flag form (7B on one node): `plan --model M --gpu G --gpus N`. One thread,
# so that the search's counters (what was pruned by which bound) are the same in both runs; the
# issue's own check (70B on 64 GPUs) is test_python_issue_check.py.
FLAG_PLAN = dict(model="llama2-7b", gpu="h100-sxm", gpus=8, tokens="100B", threads=1)
FLAG_ARGS = ["plan", "--model", "llama2-7b", "--gpu", "h100-sxm", "--gpus", "8", "--tokens", "100B", "--threads", "1"]


def cli(*args, expect_rc=0):
    r = subprocess.run([EXE, *args], capture_output=True, text=True, timeout=120)
    if expect_rc is not None and r.returncode != expect_rc:
        raise AssertionError(f"trainsim {' '.join(args)}: exit {r.returncode}, expected {expect_rc}\n{r.stderr}")
    return r


def without_seconds(j):
    """The search's wall-clock time differs between two runs; everything else must not."""
    if isinstance(j, dict):
        return {k: without_seconds(v) for k, v in j.items() if k != "seconds"}
    if isinstance(j, list):
        return [without_seconds(v) for v in j]
    return j


# A two-plan scenario, once as YAML (block style, as people write it) and once as the dict with
# the same keys and values.
SCENARIO_YAML = """\
title: "7B on 8 H100: tp1 vs tp2"
model: llama2-7b
training:
  tokens: 300B
  seq_len: 4096
  global_batch: 512
  micro_batch: 1
parallel:
  tp: 2
  pp: 1
  dp: auto
  sharding: dist_opt
precision: bf16
cluster:
  gpu: h100-sxm
  nodes: 1
  gpus_per_node: 8
pricing:
  basis: gpu_hour
  rate: 2.99
  currency: USD
plans:
  - name: tp2
  - name: tp1
    parallel: {tp: 1}
"""
SCENARIO = {
    "title": "7B on 8 H100: tp1 vs tp2",
    "model": "llama2-7b",
    "training": {"tokens": "300B", "seq_len": 4096, "global_batch": 512, "micro_batch": 1},
    "parallel": {"tp": 2, "pp": 1, "dp": "auto", "sharding": "dist_opt"},
    "precision": "bf16",
    "cluster": {"gpu": "h100-sxm", "nodes": 1, "gpus_per_node": 8},
    "pricing": {"basis": "gpu_hour", "rate": 2.99, "currency": "USD"},
    "plans": [{"name": "tp2"}, {"name": "tp1", "parallel": {"tp": 1}}],
}

GRID_YAML = """\
models: [llama2-7b]
gpus: [h100-sxm]
counts: [8, 16]
tokens: [100B]
prices:
  - {name: list, basis: gpu_hour, rate: 2.99, currency: USD}
"""
GRID = {
    "models": ["llama2-7b"],
    "gpus": ["h100-sxm"],
    "counts": [8, 16],
    "tokens": ["100B"],
    "prices": [{"name": "list", "basis": "gpu_hour", "rate": 2.99, "currency": "USD"}],
}


class FlagPlan(unittest.TestCase):
    """plan(model=..., gpu=..., gpus=...) is `trainsim plan --model ... --json`."""

    @classmethod
    def setUpClass(cls):
        cls.module = trainsim.plan(**FLAG_PLAN)

    def test_same_json_as_the_cli(self):
        want = json.loads(cli(*FLAG_ARGS, "--json").stdout)
        self.assertEqual(without_seconds(self.module), without_seconds(want))
        self.assertGreater(len(self.module["plans"]), 0)
        self.assertEqual(self.module["plans"][0]["num_gpus"], 8)

    def test_to_pandas_columns_are_the_cli_csv_columns(self):
        try:
            import pandas  # noqa: F401
        except ImportError:
            self.skipTest("pandas not installed")
        header = cli(*FLAG_ARGS, "--csv").stdout.splitlines()[0].split(",")
        df = trainsim.to_pandas(self.module)
        self.assertEqual(len(df), len(self.module["plans"]))
        self.assertEqual(set(df.columns), set(header))
        self.assertEqual(list(df["days_to_train"]), [p["days_to_train"] for p in self.module["plans"]])


class Scenarios(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.path = pathlib.Path(cls.dir.name) / "s.yaml"
        cls.path.write_text(SCENARIO_YAML)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    _plan = None

    @classmethod
    def plan(cls):
        """The dict scenario's plan search over 8 and 16 GPUs (once: two tests read it)."""
        if cls._plan is None:
            cls._plan = trainsim.plan(SCENARIO, gpus=[8, 16], top=3, threads=1)
        return cls._plan

    def test_simulate_path_is_the_cli(self):
        got = trainsim.simulate(self.path)  # os.PathLike
        self.assertEqual(got, json.loads(cli("simulate", str(self.path), "--json").stdout))
        self.assertEqual([p["name"] for p in got["plans"]], ["tp2", "tp1"])

    def test_numpy_scalars_are_plain_values(self):
        try:
            import numpy as np
        except ImportError:
            self.skipTest("numpy not installed")
        plain = json.loads(json.dumps(SCENARIO))
        plain["plans"][0]["parallel"] = {"sequence_parallel": True}  # the tp2 plan
        s = json.loads(json.dumps(plain))
        s["training"]["global_batch"] = np.int64(512)
        s["pricing"]["rate"] = np.float64(2.99)
        s["plans"][0]["parallel"]["sequence_parallel"] = np.bool_(True)
        self.assertEqual(trainsim.simulate(s), trainsim.simulate(plain))
        self.assertNotEqual(trainsim.simulate(plain), trainsim.simulate(SCENARIO))  # the bool was read

    def test_compare_dict_is_the_cli_on_the_yaml(self):
        got = trainsim.compare(SCENARIO)
        self.assertEqual(got, json.loads(cli("compare", str(self.path), "--json").stdout))
        self.assertEqual(got, trainsim.simulate(str(self.path)))

    def test_plan_on_a_dict_scenario_is_the_cli_on_the_yaml(self):
        got = self.plan()
        want = json.loads(cli("plan", str(self.path), "--gpus", "8,16", "--top", "3", "--threads", "1",
                              "--json").stdout)
        self.assertEqual(without_seconds(got), without_seconds(want))
        self.assertEqual([f["num_gpus"] for f in got["frontier"]], [8, 16])
        self.assertLessEqual(len(got["plans"]), 3)

    def test_to_pandas_of_simulate_and_frontier(self):
        try:
            import pandas  # noqa: F401
        except ImportError:
            self.skipTest("pandas not installed")
        df = trainsim.to_pandas(trainsim.simulate(SCENARIO))
        self.assertEqual(list(df["name"]), ["tp2", "tp1"])
        r = self.plan()
        fr = trainsim.to_pandas(r, what="frontier")
        self.assertEqual(list(fr["num_gpus"]), [8, 16])
        self.assertEqual(list(fr["pareto"]), [f["pareto"] for f in r["frontier"]])
        self.assertEqual(list(fr["days_to_train"]), [f["best"]["days_to_train"] for f in r["frontier"]])


class Sweeps(unittest.TestCase):
    def test_sweep_dict_is_the_cli_on_the_yaml(self):
        with tempfile.TemporaryDirectory() as d:
            path = pathlib.Path(d) / "g.yaml"
            path.write_text(GRID_YAML)
            want = [json.loads(line) for line in cli("sweep", str(path), "--json").stdout.splitlines()]
        got = trainsim.sweep(GRID)
        self.assertEqual(len(got), 2)  # one cell x two counts
        # "grid" is a fingerprint of the grid's text, which differs between the file and the dict.
        strip = lambda rows: [{k: v for k, v in r.items() if k != "grid"} for r in rows]  # noqa: E731
        self.assertEqual(strip(got), strip(want))
        self.assertEqual([r["num_gpus"] for r in got], [8, 16])


class Errors(unittest.TestCase):
    def test_error_is_a_value_error_with_the_cli_message(self):
        with tempfile.TemporaryDirectory() as d:
            path = pathlib.Path(d) / "bad.yaml"
            # line 9, column 3: the unknown key `tpp`
            path.write_text(SCENARIO_YAML.replace("  tp: 2\n", "  tpp: 2\n"))
            with self.assertRaises(trainsim.Error) as ctx:
                trainsim.simulate(path)
            err = ctx.exception
            self.assertIsInstance(err, ValueError)
            self.assertIn(f"{path}:9:3: parallel.tpp:", str(err))
            stderr = cli("simulate", str(path), "--json", expect_rc=2).stderr
            self.assertEqual(stderr, f"trainsim: {err}\n")
            self.assertEqual((err.diagnostics[0]["line"], err.diagnostics[0]["col"]), (9, 3))
            self.assertEqual(err.diagnostics[0]["key"], "parallel.tpp")

    def test_dict_errors_name_the_key_path(self):
        bad = json.loads(json.dumps(SCENARIO))
        bad["plans"][1]["parallel"] = {"tp": 3}
        with self.assertRaises(trainsim.Error) as ctx:
            trainsim.simulate(bad)
        msg = str(ctx.exception)
        self.assertIn("<dict>: plans[1]", msg)
        self.assertNotRegex(msg, r"<dict>:\d")  # no line:col into text the caller never wrote
        bad = dict(SCENARIO, cluster={"gpu": "h100-sxm", "nodes": 1, "gpus_per_node": 8, "extra": object()})
        with self.assertRaises(trainsim.Error) as ctx:
            trainsim.simulate(bad)
        self.assertEqual(ctx.exception.diagnostics[0]["key"], "cluster.extra")

    def test_keyword_errors(self):
        with self.assertRaises(trainsim.Error) as ctx:
            trainsim.plan(**FLAG_PLAN, rank="fastest")  # refused before any search
        self.assertIn("--rank: unknown ranking 'fastest'", str(ctx.exception))
        with self.assertRaises(trainsim.Error):
            trainsim.plan(model="llama2-7b", gpu="h100-sxm", gpus=0)
        with self.assertRaises(TypeError):
            trainsim.plan(model="llama2-7b", gpu="h100-sxm", gpus=[8, "16"])
        with self.assertRaises(TypeError):
            trainsim.plan(model="llama2-7b", gpu="h100-sxm", gpus=8, gpu_count=8)
        with self.assertRaises(TypeError):
            trainsim.simulate(42)

    def test_to_pandas_without_pandas_says_how_to_get_it(self):
        saved = sys.modules.get("pandas")
        sys.modules["pandas"] = None  # import pandas raises ImportError
        try:
            with self.assertRaises(ImportError) as ctx:
                trainsim.to_pandas({"plans": []})
            self.assertIn("python3-pandas", str(ctx.exception))
        finally:
            if saved is None:
                del sys.modules["pandas"]
            else:
                sys.modules["pandas"] = saved


class Example(unittest.TestCase):
    """docs/examples/sweep_frontier.py renders its table, frontier and plot."""

    def test_example_renders_the_frontier_plot(self):
        try:
            import matplotlib  # noqa: F401
            import pandas  # noqa: F401
        except ImportError as e:
            self.skipTest(f"the example needs pandas and matplotlib: {e}")
        import contextlib
        import io
        import runpy

        example = runpy.run_path(str(SOURCE / "docs" / "examples" / "sweep_frontier.py"))
        grid = example["GRID"]
        with tempfile.TemporaryDirectory() as d:
            png = pathlib.Path(d) / "frontier.png"
            with contextlib.redirect_stdout(io.StringIO()):
                table, front = example["main"](str(png))
            self.assertEqual(png.read_bytes()[:8], b"\x89PNG\r\n\x1a\n")
        cells = len(grid["models"]) * len(grid["gpus"])  # one price per GPU
        self.assertEqual(len(table), cells * len(grid["counts"]))
        # The frontier, checked against its definition on the table's rows.
        ok = table[table["status"] == "ok"]
        for model, plans in ok.groupby("model"):
            pts = list(zip(plans["expected_days"], plans["expected_cost"]))
            on = {(d, c) for d, c in pts
                  if not any(d2 <= d and c2 <= c and (d2 < d or c2 < c) for d2, c2 in pts)}
            mine = front[front["model"] == model]
            self.assertEqual(set(zip(mine["expected_days"], mine["expected_cost"])), on)
            self.assertGreater(len(on), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
