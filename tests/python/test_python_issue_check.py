"""Issue #43's check: the one-liner prints the number the CLI prints.

    python3 -c "import trainsim; print(trainsim.plan(model='llama2-70b', gpu='h100-sxm', gpus=64)['plans'][0]['days_to_train'])"

against `trainsim plan --model llama2-70b --gpu h100-sxm --gpus 64 --json`, as text: the CLI's
digits of plans[0].days_to_train, and what Python prints. Two 70B searches (~7 s of CPU each on
this 2-core machine), so a test of its own; tests/python/test_python_module.py compares whole
results on cheap searches. Run by ctest with PYTHONPATH and TRAINSIM_EXE set.
"""

import json
import os
import re
import subprocess
import sys
import unittest

ONE_LINER = ("import trainsim; print(trainsim.plan(model='llama2-70b', gpu='h100-sxm', gpus=64)"
             "['plans'][0]['days_to_train'])")
CLI_ARGS = ["plan", "--model", "llama2-70b", "--gpu", "h100-sxm", "--gpus", "64", "--json"]


class IssueCheck(unittest.TestCase):
    def test_the_one_liner_prints_the_cli_number(self):
        cli = subprocess.run([os.environ["TRAINSIM_EXE"], *CLI_ARGS], capture_output=True, text=True, timeout=300,
                             check=True).stdout
        # plans[0] is the first plan object, and its days_to_train the first field of that name
        # (keys are sorted; its band's fields are named days_to_train_p10 / _p90).
        want = re.search(r'"days_to_train": ([^,\n]+)', cli).group(1)
        self.assertEqual(float(want), json.loads(cli)["plans"][0]["days_to_train"])
        got = subprocess.run([sys.executable, "-c", ONE_LINER], capture_output=True, text=True, timeout=300,
                             check=True).stdout
        self.assertEqual(got.strip(), want)


if __name__ == "__main__":
    unittest.main(verbosity=2)
