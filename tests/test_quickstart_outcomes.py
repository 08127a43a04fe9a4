"""tools/quickstart_outcomes.py: the integer outcomes README promises for `make run`, read
from a hand-made workdir whose answer is known; a workdir without them gets one line."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(ROOT, "tools", "quickstart_outcomes.py")


def test_outcomes_of_a_made_up_workdir(tmp_path):
  # depth 1: seeds reach n* 6 and 4 (best 6), k* 0 and 1 (best 1); depth 3: one seed
  rows = [("1", "6", "0"), ("1", "4", "1"), ("3", "20", "3")]
  (tmp_path / "results.csv").write_text(
      "depth,n_star,k_star,seed\n" + "".join(f"{d},{n},{k},0\n" for d, n, k in rows))
  (tmp_path / "claims.json").write_text(json.dumps([{"holds": True}, {"holds": None}]))
  p = subprocess.run([sys.executable, TOOL, str(tmp_path)], capture_output=True, text=True)
  assert p.returncode == 0, p.stderr
  assert p.stdout.strip() == ("best n* 6, 20; hardest k 1, 3 (depths 1, 3); "
                              "claims holds, undecided")


def test_a_workdir_without_results_is_one_line(tmp_path):
  p = subprocess.run([sys.executable, TOOL, str(tmp_path / "runs")], capture_output=True,
                     text=True)
  assert p.returncode == 2 and p.stdout == ""
  assert p.stderr.count("\n") == 1 and "no results.csv or claims.json" in p.stderr
