"""The worked example of docs/mixed-teams.md, on local stand-ins (tests/openai_stub.py): a centralized team
with its manager on one endpoint and its workers on another, then the frontier over three configurations.

    python docs/mixed_team_example.py OUT_DIR   (from the project's root)

The stand-ins are scripted, not models: endpoint B (model `big`) answers the gold call on 5 of the 6
instances, endpoint A (model `small`) on 2 of them, and a wrong call otherwise; each answer reports
11 prompt and 7 completion tokens. The prices are made up for the example.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the stand-in, as the tests import it

from apibank_bench.data.manifests import manifest_ids
from openai_stub import OpenAIStub, Reply
from test_run_reliability import task_of

IDS = manifest_ids("all")[:6]
RIGHT_ON = {"big": 5, "small": 2}  #: each model answers the first N instances of IDS right
PRICES = ["--price", "small=0.10/0.40", "--price", "big=3.00/15.00"]


def respond(body: dict) -> Reply:
    task = task_of(body)
    right = IDS.index(task.combined_id) < RIGHT_ON.get(body["model"], 0)
    return Reply(text=f"[{task.gold_call[1:-1]}]" if right else "[GetToday(when='now')]")


def apibank(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "apibank_bench", *args], capture_output=True, text=True)
    return done.stdout + done.stderr


def main(out: Path) -> None:
    common = ["--only", *IDS, "--limit", "0", "--no-cache", "--toolsearcher-scorer", "keyword", "--topology", "centralized",
              "--team-size", "4", *PRICES]
    with OpenAIStub(default=respond) as a, OpenAIStub(default=respond) as b:
        print(f"$ apibank-bench run --model small --base-url {a.url} --model-role manager=big@{b.url} ...")
        output = apibank("run", "--model", "small", "--base-url", a.url, "--model-role", f"manager=big@{b.url}",
                         "--out-dir", str(out / "mixed"), *common)
        print("\n".join(output.splitlines()[-17:]))
        for name, stub in (("A", a), ("B", b)):
            print(f"endpoint {name} received:", dict(Counter(body["model"] for body in stub.chat_requests)))
        team = " ".join(f"{role}=big@{b.url}" for role in ("manager", "inspector_worker", "caller_worker",
                                                             "validator_worker"))
        print(f"\n$ apibank-bench sweep --model small --base-url {a.url} --model-role 'manager=big@URL_B;"
              "<every role>=big@URL_B;-' ...")
        output = apibank("sweep", "--out", str(out / "sweep"), "--model", "small", "--base-url", a.url,
                         "--model-role", f"manager=big@{b.url};{team};-", *common)
        markdown = (out / "sweep" / "sweep.md").read_text()
        print(markdown[markdown.index("## Accuracy–cost frontier"):])
    print(apibank("report", str(out / "sweep"), "--out", str(out / "report"), *PRICES).strip())


if __name__ == "__main__":
    main(Path(sys.argv[1]))
