"""Run docs/ci.md's GitHub Actions workflow here, less the model server (scripts/check-wheel): every step
with a `run:` in a fresh folder, with the workflow's `env:` under what the caller sets (the package to
install, the stand-in endpoint's URL and model). The gate's baseline is made first, by a run of the same
endpoint, so the workflow's gate judges a run that matches it.

    python scripts/ci_workflow.py docs/ci.md WORK_DIR
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

SKIPPED = ("Serve the model",)  #: needs the team's model; the caller's endpoint stands in for it


def workflow(page: Path) -> dict:
    text = page.read_text(encoding="utf-8")
    block = text.split("<!-- workflow: start -->", 1)[1].split("<!-- workflow: end -->", 1)[0]
    return yaml.safe_load(re.search(r"```yaml\n(.*?)```", block, re.S).group(1))


def main(page: Path, work: Path) -> int:
    job = next(iter(workflow(page)["jobs"].values()))
    env = {**os.environ, **{key: str(value) for key, value in job.get("env", {}).items()}}
    env.update({key: os.environ[key] for key in job.get("env", {}) if key in os.environ})  # the caller's win
    work.mkdir(parents=True, exist_ok=True)
    baseline = subprocess.run(["apibank-bench", "run", "--base-url", env["APIBANK_BASE_URL"], "--model",
                               env["APIBANK_MODEL"], "--limit", env["APIBANK_LIMIT"], "--no-cache", "--out-dir", env["BASELINE"]],
                              cwd=work, env=env, capture_output=True, text=True)
    if baseline.returncode not in (0,):
        print(baseline.stdout[-3000:], baseline.stderr[-3000:], file=sys.stderr)
        return 1
    ran = 0
    for step in job["steps"]:
        if "run" not in step or step.get("name") in SKIPPED:
            continue
        print(f"ci_workflow: step {step['name']!r}", flush=True)
        done = subprocess.run(["bash", "-eo", "pipefail", "-c", step["run"]], cwd=work, env=env,
                              capture_output=True, text=True)
        if done.returncode != 0:
            print(f"ci_workflow: step {step['name']!r} exited {done.returncode}\n{done.stdout[-3000:]}\n"
                  f"{done.stderr[-3000:]}", file=sys.stderr)
            return 1
        ran += 1
    report = work / "apibank-report.json"
    if ran < 4 or not report.is_file() or not (work / "apibank-report" / "index.html").is_file():
        print(f"ci_workflow: {ran} steps ran; the JSON report or the HTML report is missing", file=sys.stderr)
        return 1
    import json

    gate = json.loads(report.read_text(encoding="utf-8"))["apibank"].get("gate") or {}
    if gate.get("worse") is not False:
        print(f"ci_workflow: the gate did not judge the run against the baseline: {gate}", file=sys.stderr)
        return 1
    print(f"ci_workflow: {ran} steps ran; gate: {gate.get('verdict')}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
