#!/usr/bin/env python
"""The embedded models (each GGUF behind llama-cpp-python's server) on a fixed set of eval instances,
each instance's time against the model's own floor; several models side by side (`--models`).

1. The floor: a server with the suite's own settings measures this machine's prompt speed (the
   set's median prompt, max_tokens 1, a fresh prefix each time so nothing is reused) and
   generation speed (a short prompt, 64 free tokens), both unconstrained.
2. The run: `apibank-bench run --only IDS --no-cache` (cold: nothing is answered from a cache
   another checkout filled), as a user types it; its process tree (the server included) is
   sampled every 0.25 s for the resident set. Requests may take 600 s (`--timeout`): on a loaded
   machine a slow instance is a time to report, not an error row.
3. The floor again, after the run; the two are averaged (the machine is shared: the load is
   printed with every figure).

An instance's floor is prompt tokens / prompt speed + completion tokens / generation speed; its
ratio is its time (results.jsonl `latency_s`) over that floor. Prefix reuse can bring a ratio
below 1 (the server keeps the previous prompt's cache, and the system prompt comes first).

    python benchmarks/bench_embedded.py [--ids ID,ID,...] [--limit N] [--models M,M] [--topologies T,T]
                                        [--concurrency N] [--keep DIR] [--json]

The default set: the eval manifest's first 10 and the two instances that used to hang
(issue 32). `--limit N` takes the manifest's first N instead (0 = the whole eval set).
`--models`: `--model` values run one after the other, each with its own floor (default: the default
embedded model; e.g. `embedded:smollm2,embedded:gemma` or `local:PATH.gguf`). `--topologies`: each model
runs each topology (default `single`; a team with the CLI's default size 4 and, decentralized, 2 rounds),
between its two floors; a team's time per instance (the run's wall time, less the server's start as the floors'
servers took it, over its instances, as instances overlap) is set against the single agent's, and its floor is that of its requests without prefix reuse (the
embedded server keeps the previous prompt's KV cache, and an instance's requests go to it back to back:
llm/one_slot.py `OneSlotQueue`). Its floor with perfect prefix reuse counts, of each request's prompt, only the
tokens not shared with the previous request's prompt and answer (the traces' messages in the model's own
template and tokens, in the order the server got them), plus every generated token: the time the server must
spend even if every request reused all it shares with the previous one, set against the single agent's floor
and time. Beside it, what the server itself evaluated (its log: llama-cpp-python's `prefix-match hit` and
llama.cpp's prompt evaluation count and times per request). `--keep DIR` keeps each run's results folder
(DIR/<n>-<model>[-<topology>]) for `apibank-bench compare`. `--concurrency N`: instances in flight (the
embedded model's default is 1, and then no other instance's request comes between an instance's).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import BinaryIO

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))

from apibank_bench.agents.prompts import role_prompt, task_prompt  # noqa: E402
from apibank_bench.data.manifests import manifest_ids  # noqa: E402
from apibank_bench.data.tasks import get_task  # noqa: E402
from apibank_bench.llm.client import fold_system  # noqa: E402
from apibank_bench.llm.embedded_models import check_local, choose  # noqa: E402
from apibank_bench.llm.embedded_launcher import SERVER_MODULE, _post, server_for  # noqa: E402
from apibank_bench.runs.results import TRACES, trace_name  # noqa: E402

#: The instances issue 32 found hanging: 142 s for 86 tokens, and six 60 s timeouts.
SLOW_BEFORE = ["level-1::AddAgenda-AddMeeting-GetUserToken-level-2-3.jsonl::2",
               "level-2::DeleteAccount-level-3-2.jsonl::0"]


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def messages(task_id: str, fold: bool) -> list[dict]:
    task = get_task(task_id)
    sent = [{"role": "system", "content": role_prompt("single", "solver")}, {"role": "user", "content": task_prompt(task)}]
    return fold_system(sent) if fold else sent


def floor_speeds(model: str, prompt: list[dict], prompts: list[str], repeats: int = 2) -> dict:
    """Prompt and generation tokens per second of the embedded model, unconstrained."""
    choice = check_local(choose(model))
    starting = time.perf_counter()
    with server_for(choice, prompts=prompts) as server:
        start_s = time.perf_counter() - starting
        url = server.base_url + "/chat/completions"

        def ask(msgs: list[dict], max_tokens: int) -> tuple[float, dict]:
            body = {"model": server.model, "messages": msgs, "max_tokens": max_tokens, "temperature": 0.0,
                    "seed": 0}
            started = time.perf_counter()
            out = _post(url, body, timeout=3600)
            return time.perf_counter() - started, out["usage"]

        prompt_rates = []
        for _ in range(repeats):  # a new first line each time: no prefix of an earlier prompt is reused
            msgs = [{**prompt[0], "content": f"[{uuid.uuid4().hex}]\n" + prompt[0]["content"]}, *prompt[1:]]
            seconds, usage = ask(msgs, 1)
            prompt_rates.append(usage["prompt_tokens"] / seconds)
        prompt_speed = statistics.median(prompt_rates)
        gen_rates = []
        for _ in range(repeats):
            msgs = [{"role": "user", "content": f"[{uuid.uuid4().hex}] Write a long story about a lighthouse."}]
            seconds, usage = ask(msgs, 64)
            generating = seconds - usage["prompt_tokens"] / prompt_speed
            gen_rates.append(usage["completion_tokens"] / generating)
    return {"prompt_tok_s": prompt_speed, "gen_tok_s": statistics.median(gen_rates), "load": load(), "start_s": start_s}


class TreeMemory(threading.Thread):
    """Peak resident set of a process tree (summed), and of its server (VmHWM)."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak_tree_mb, self.server_hwm_mb = pid, 0, 0
        self.done = threading.Event()
        self.logs: dict[tuple[int, int], BinaryIO] = {}  #: the server's log (its stdout), opened while it runs
        self.log_pids: set[int] = set()

    def run(self) -> None:
        while not self.done.wait(0.25):
            total = 0
            for pid in self.tree():
                rss, hwm, server = self.status(pid)
                total += rss
                if server:
                    self.server_hwm_mb = max(self.server_hwm_mb, hwm)
                    self.keep_log(pid)
            self.peak_tree_mb = max(self.peak_tree_mb, total)

    def keep_log(self, pid: int) -> None:
        """Open the server's log through its stdout: the launcher deletes the file when it stops the server,
        an open file stays readable (the launcher and its server share one file: opened once)."""
        if pid in self.log_pids:
            return
        self.log_pids.add(pid)
        try:
            handle = open(f"/proc/{pid}/fd/1", "rb")  # noqa: SIM115 (read when the run is over)
        except OSError:
            return
        stat = os.fstat(handle.fileno())
        if (stat.st_dev, stat.st_ino) in self.logs:
            handle.close()
        else:
            self.logs[(stat.st_dev, stat.st_ino)] = handle

    def server_log(self) -> str:
        text = ""
        for handle in self.logs.values():
            text += handle.read().decode("utf-8", "replace")
            handle.close()
        return text

    def tree(self) -> list[int]:
        children: dict[int, list[int]] = {}
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    stat = Path(f"/proc/{name}/stat").read_text()
                except OSError:
                    continue
                children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(name))
        found, todo = [], [self.pid]
        while todo:
            pid = todo.pop()
            found.append(pid)
            todo += children.get(pid, [])
        return found

    @staticmethod
    def status(pid: int) -> tuple[int, int, bool]:
        try:
            lines = Path(f"/proc/{pid}/status").read_text().splitlines()
            server = SERVER_MODULE.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return 0, 0, False
        kb = {line.split(":")[0]: int(line.split()[1]) for line in lines if line.startswith(("VmRSS", "VmHWM"))}
        return kb.get("VmRSS", 0) // 1024, kb.get("VmHWM", 0) // 1024, server


def run_cli(ids: list[str], out: Path, model: str, topology: str = "single", concurrency: int = 0) -> dict:
    argv = [sys.executable, "-m", "apibank_bench", "run", "--only", ",".join(ids), "--limit", "0",
            "--no-cache", "--timeout", "600", "--out-dir", str(out), *(["--model", model] if model else []),
            "--topology", topology, *(["--concurrency", str(concurrency)] if concurrency else [])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PROJECT), os.environ.get("PYTHONPATH", "")])}
    started_load = load()
    started = time.perf_counter()
    process = subprocess.Popen(argv, cwd=PROJECT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    memory = TreeMemory(process.pid)
    memory.start()
    output = process.communicate()[0]
    wall = time.perf_counter() - started
    memory.done.set()
    memory.join()
    if process.returncode not in (0, 1):  # 1: some instance wrong, as pytest reports failures
        raise RuntimeError(f"{' '.join(argv)} exited {process.returncode}:\n{output[-3000:]}")
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line]
    summary = json.loads((out / "summary.json").read_text())
    traces = [json.loads((out / TRACES / trace_name(row["id"])).read_text()) for row in rows]
    return {"wall_s": wall, "run_s": summary["wall_time_s"], "rows": rows, "traces": traces,
            "served": served_requests(memory.server_log()), "peak_tree_mb": memory.peak_tree_mb,
            "server_hwm_mb": memory.server_hwm_mb, "load_before": started_load, "load_after": load(),
            "closing": [line for line in output.splitlines() if "correct" in line or "overall" in line][-3:]}


#: llama-cpp-python (verbose, the server's default) before a request's prompt, when it reuses a prefix of the cache
HIT = re.compile(r"Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt tokens to eval")
#: llama.cpp's timings after each completion: the prompt tokens it evaluated, then the tokens it decoded one by one
PROMPT_EVAL = re.compile(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens")
EVAL = re.compile(r"(?<!prompt )eval time =\s*([\d.]+) ms /\s*(\d+) runs")


def served_requests(log: str) -> list[dict]:
    """Each completion the server ran, in order (its warm-up first): the prefix it reused (None: none reported,
    the whole prompt evaluated) and llama.cpp's prompt evaluation and decoding, tokens and ms."""
    served, reused = [], None
    for line in log.splitlines():
        if hit := HIT.search(line):
            reused = int(hit.group(1))
        elif match := PROMPT_EVAL.search(line):
            served.append({"reused": reused, "prompt_ms": float(match.group(1)), "evaluated": int(match.group(2)),
                           "eval_ms": 0.0, "decoded": 0})
            reused = None
        elif (match := EVAL.search(line)) and served:
            served[-1].update(eval_ms=float(match.group(1)), decoded=int(match.group(2)))
    return served


def tokenizer(choice):
    """The model's prompt as its server builds it (its chat format, or the file's own template, then its tokens),
    and an answer's tokens; None when the format is not one this knows."""
    import llama_cpp
    from llama_cpp import llama_chat_format as formats

    path = choice.path or server_for(choice).model_path
    vocab = llama_cpp.Llama(str(path), vocab_only=True, verbose=False)
    if choice.template:
        formatter = getattr(formats, "format_" + choice.template.replace("-", "_"), None)
    else:
        special = [vocab._model.token_get_text(i) if i != -1 else "" for i in (vocab.token_eos(), vocab.token_bos())]
        formatter = formats.Jinja2ChatFormatter(vocab.metadata["tokenizer.chat_template"], *special)
    if formatter is None:
        return None

    def prompt(msgs: list[dict]) -> list[int]:  # as llama_chat_format.chat_formatter_to_chat_completion_handler
        result = formatter(messages=fold_system(msgs) if choice.fold_system else msgs)
        return vocab.tokenize(result.prompt.encode("utf-8"), add_bos=not result.added_special, special=True)

    def answer(text: str) -> list[int]:
        return vocab.tokenize(text.encode("utf-8"), add_bos=False, special=False)

    return prompt, answer


def shared(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def new_prompt_tokens(traces: list[dict], tokens) -> list[int]:
    """Per instance: its prompt tokens not shared with the previous request's prompt and answer (perfect reuse),
    the requests in the order the one-slot server takes them (instance after instance, turns in order)."""
    prompt, answer = tokens
    previous: list[int] = []
    per = []
    for trace in traces:
        new = 0
        for turn in trace.get("agents") or []:
            if turn.get("cached"):
                continue
            sent = prompt(turn["messages"])
            new += len(sent) - shared(sent, previous)
            previous = sent + answer(turn.get("answer") or "")
        per.append(new)
    return per


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[-1] if len(values) > 1 else values[0]


def measure(model: str, ids: list[str], out: Path, topologies: list[str] | None = None, concurrency: int = 0) -> dict:
    """One model: its floor before and after, the runs (one per topology) in between, each instance against the
    floor. The report is the first topology's, with every topology's under `topologies`."""
    choice = check_local(choose(model))
    prompts = sorted((messages(tid, choice.fold_system) for tid in ids), key=lambda msgs: len(msgs[-1]["content"]))
    typical = prompts[len(prompts) // 2]  # the median prompt: a long one costs minutes on a loaded machine
    texts = ["\n\n".join(m["content"] for m in msgs) for msgs in prompts]
    topologies = topologies or ["single"]
    before = floor_speeds(model, typical, texts)
    runs = {topology: run_cli(ids, out if len(topologies) == 1 else out.with_name(f"{out.name}-{topology}"), model,
                              topology, concurrency) for topology in topologies}
    after = floor_speeds(model, typical, texts)
    prompt_speed = (before["prompt_tok_s"] + after["prompt_tok_s"]) / 2
    gen_speed = (before["gen_tok_s"] + after["gen_tok_s"]) / 2
    tokens = tokenizer(choice)
    reports = [run_report(model, choice, ids, runs[topology], topology, prompt_speed, gen_speed, before, after, tokens)
               for topology in topologies]
    compare_to_single(reports)
    return {**reports[0], "topologies": reports}


def compare_to_single(reports: list[dict]) -> None:
    """Each topology's time per instance against the single agent's, and its floor with perfect reuse against the
    single agent's floor and against the single agent's time (a team at its floor would be that many times it)."""
    single = next((r for r in reports if r["topology"] == "single"), None)
    for report in reports:
        floor = report["reuse_floor_s"]
        report["vs_single"] = report["per_instance_s"] / single["per_instance_s"] if single else None
        single_floor = single["reuse_floor_s"] if single else None
        report["reuse_vs_single"] = floor / single_floor if floor and single_floor else None
        report["reuse_vs_single_time"] = floor / single["per_instance_s"] if single and floor else None


def run_report(model: str, choice, ids: list[str], run: dict, topology: str, prompt_speed: float, gen_speed: float,
               before: dict, after: dict, tokens=None) -> dict:
    rows = run["rows"]
    n = max(1, len(rows))
    new = new_prompt_tokens(run["traces"], tokens) if tokens else None
    generated = sum(row.get("completion_tokens") or 0 for row in rows)
    # the server's completions less its warm-up (the first); with the cache off every agent turn is one
    served = run["served"][1:]
    calls = sum(1 for trace in run["traces"] for turn in trace.get("agents") or [] if not turn.get("cached"))
    server = {"requests": len(served), "turns": calls, "reused": sum(1 for r in served if r["reused"]),
              "evaluated": sum(r["evaluated"] for r in served) / n, "decoded": sum(r["decoded"] for r in served) / n,
              "prompt_s": sum(r["prompt_ms"] for r in served) / 1000 / n,
              "eval_s": sum(r["eval_ms"] for r in served) / 1000 / n} if served else None
    per = []
    for row in rows:
        floor = (row.get("prompt_tokens") or 0) / prompt_speed + (row.get("completion_tokens") or 0) / gen_speed
        per.append({"id": row["id"], "s": row["latency_s"], "floor_s": floor, "ratio": row["latency_s"] / floor if floor else None,
                    "prompt": row.get("prompt_tokens"), "completion": row.get("completion_tokens"),
                    "calls": row.get("model_calls"), "stage": row.get("stage"), "correct": row.get("correct"),
                    "answer": row.get("predicted_call")})
    times = [p["s"] for p in per]
    ratios = [p["ratio"] for p in per if p["ratio"]]
    return {
        "model": model or "(default)", "name": choice.name, "sha256": choice.sha256, "topology": topology,
        "instances": len(rows), "missing": sorted(set(ids) - {row["id"] for row in rows}),
        "errors": sum(row.get("stage") == "error" for row in rows),
        "unparsed": sum(row.get("stage") == "parse" for row in rows),
        "correct": sum(bool(row.get("correct")) for row in rows),
        "calls": sum(p["calls"] or 0 for p in per),
        "floor": {"prompt_tok_s": round(prompt_speed, 1), "gen_tok_s": round(gen_speed, 1),
                  "before": before, "after": after},
        "time_s": {"median": statistics.median(times), "p95": p95(times), "max": max(times)},
        "ratio": {"median": statistics.median(ratios), "p95": p95(ratios), "max": max(ratios)},
        "max_over_median": max(times) / statistics.median(times),
        # instances overlap (the pool keeps several in flight): the run's time (less its server's start, timed
        # as the floors' servers start) over its instances is one's cost
        "per_instance_s": (run["run_s"] - (before["start_s"] + after["start_s"]) / 2) / max(1, len(rows)),
        "no_reuse_floor_s": sum(p["floor_s"] for p in per) / max(1, len(per)),
        "prompt_per_instance": sum(row.get("prompt_tokens") or 0 for row in rows) / n,
        "generated_per_instance": generated / n,
        "new_prompt_per_instance": sum(new) / n if new is not None else None,
        # perfect reuse: only the prompt tokens not shared with the previous request, and every generated token
        "reuse_floor_s": (sum(new) / prompt_speed + generated / gen_speed) / n if new is not None else None,
        "server": server,
        "wall_s": run["wall_s"], "run_s": run["run_s"], "peak_tree_mb": run["peak_tree_mb"],
        "server_hwm_mb": run["server_hwm_mb"], "load_before": run["load_before"], "load_after": run["load_after"],
        "per_instance": per,
    }


def show(report: dict) -> None:
    floor = report["floor"]
    print(f"== {report['model']}: {report['name']}, {report['topology']}")
    print(f"floor: prompt {floor['prompt_tok_s']:.1f} tok/s, generation {floor['gen_tok_s']:.1f} tok/s "
          f"(before: load {floor['before']['load']}; after: load {floor['after']['load']})")
    print(f"{'instance':<66} {'s':>7} {'floor':>6} {'ratio':>6} {'prompt':>6} {'compl':>5} stage")
    for p in report["per_instance"]:
        ratio = f"{p['ratio']:6.2f}" if p["ratio"] else "     -"
        print(f"{p['id'][:66]:<66} {p['s']:7.1f} {p['floor_s']:6.1f} {ratio} {p['prompt'] or 0:>6} "
              f"{p['completion'] or 0:>5} {p['stage']}")
    print(f"per instance: median {report['time_s']['median']:.1f} s (ratio {report['ratio']['median']:.2f}), "
          f"p95 {report['time_s']['p95']:.1f} s ({report['ratio']['p95']:.2f}), "
          f"max {report['time_s']['max']:.1f} s ({report['ratio']['max']:.2f}); max/median {report['max_over_median']:.1f}")
    print(f"run: {report['instances']} instances in {report['wall_s']:.0f} s, {report['correct']} correct, "
          f"{report['errors']} errors, {report['unparsed']} unparsed, missing {len(report['missing'])}; peak RSS: "
          f"server {report['server_hwm_mb']} MB, run with server {report['peak_tree_mb']} MB; "
          f"load {report['load_before']} -> {report['load_after']}")


def show_topologies(reports: list[dict]) -> None:
    """Each model's topologies: the time per instance against the single agent's (markdown)."""
    print("| model | topology | correct | model calls | per instance (run / instances) | vs single | "
          "floor without reuse | floor, perfect reuse | over single's floor / time | prompt / new / generated tokens | "
          "server evaluated / decoded tokens, its model time | server peak | load before -> after |")
    print("|" + " --- |" * 13)
    for report in reports:
        for r in report["topologies"]:
            vs = f"{r['vs_single']:.2f}x" if r["vs_single"] else "-"
            reuse = f"{r['reuse_floor_s']:.1f} s" if r["reuse_floor_s"] is not None else "-"
            reuse_vs = (f"{r['reuse_vs_single']:.2f}x / {r['reuse_vs_single_time']:.2f}x"
                        if r["reuse_vs_single"] and r["reuse_vs_single_time"] else "-")
            new = f"{r['new_prompt_per_instance']:.0f}" if r["new_prompt_per_instance"] is not None else "-"
            s = r["server"]
            served = (f"{s['evaluated']:.0f} / {s['decoded']:.0f}, {s['prompt_s'] + s['eval_s']:.1f} s"
                      + ("" if s["requests"] == s["turns"] else f" ({s['requests']} requests, {s['turns']} turns)")
                      if s else "-")
            print(f"| {r['name']} | {r['topology']} | {r['correct']}/{r['instances']} ({r['errors']} errors) | "
                  f"{r['calls']} | {r['per_instance_s']:.1f} s | {vs} | {r['no_reuse_floor_s']:.1f} s | {reuse} | "
                  f"{reuse_vs} | {r['prompt_per_instance']:.0f} / {new} / {r['generated_per_instance']:.0f} | "
                  f"{served} | {r['server_hwm_mb']} MB | {r['load_before']} -> {r['load_after']} |")
    print("(per instance; prompt: all its requests' prompt tokens; new: those not shared with the previous request's "
          "prompt and answer; server: the prompt tokens llama.cpp evaluated and the tokens it decoded, and the time "
          "it spent on them, from its log)")


def side_by_side(reports: list[dict]) -> None:
    """The models in one table (markdown), as docs/embedded-model.md shows them."""
    print("| " + " | ".join(["2 CPU cores, cold cache", *(r["name"] for r in reports)]) + " |")
    print("|" + " --- |" * (len(reports) + 1))
    lines = [
        ("correct", lambda r: f"{r['correct']}/{r['instances']} ({r['errors']} errors, {r['unparsed']} unparsed)"),
        ("floor: prompt / generation tok/s", lambda r: f"{r['floor']['prompt_tok_s']:.0f} / {r['floor']['gen_tok_s']:.0f}"),
        ("run wall time", lambda r: f"{r['wall_s']:.0f} s"),
        ("per instance median / p95 / max", lambda r: "{median:.1f} / {p95:.1f} / {max:.1f} s".format(**r["time_s"])),
        ("max over the floor", lambda r: f"{r['ratio']['max']:.2f}x"),
        ("slowest / median", lambda r: f"{r['max_over_median']:.1f}x"),
        ("server / run peak resident set", lambda r: f"{r['server_hwm_mb']} / {r['peak_tree_mb']} MB"),
        ("load before -> after", lambda r: f"{r['load_before']} -> {r['load_after']}"),
    ]
    for label, cell in lines:
        print("| " + " | ".join([label, *(cell(r) for r in reports)]) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ids", help="comma-separated task IDs (default: the eval set's first 10 + the two slow ones)")
    parser.add_argument("--limit", type=int, help="the eval manifest's first N instead (0 = all 100)")
    parser.add_argument("--models", default="", help="comma-separated --model values (default: the default model)")
    parser.add_argument("--topologies", default="single",
                        help="comma-separated --topology values each model runs (default: single)")
    parser.add_argument("--concurrency", type=int, default=0,
                        help="instances in flight (default: the run's, 1 for the embedded model)")
    parser.add_argument("--keep", type=Path, help="keep each run's results folder under this folder")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    manifest = manifest_ids("all")
    if args.ids:
        ids = [part.strip() for part in args.ids.split(",") if part.strip()]
    elif args.limit is not None:
        ids = manifest[:args.limit] if args.limit else manifest
    else:
        ids = manifest[:10] + [tid for tid in SLOW_BEFORE if tid not in manifest[:10]]
    models = [part.strip() for part in args.models.split(",")] if args.models else [""]
    reports = []
    with tempfile.TemporaryDirectory(prefix="bench-embedded-") as scratch:
        for index, model in enumerate(models):
            slug = "".join(c if c.isalnum() or c in "-_." else "_" for c in model or "default")
            out = (args.keep or Path(scratch)) / f"{index}-{slug}"
            topologies = [t.strip() for t in args.topologies.split(",") if t.strip()]
            reports.append(measure(model, ids, out, topologies, args.concurrency))
    if args.json:
        print(json.dumps(reports if len(reports) > 1 else reports[0], indent=2))
        return
    for report in reports:
        for run in report["topologies"]:
            show(run)
    if len(reports) > 1:
        side_by_side(reports)
    if any(len(report["topologies"]) > 1 for report in reports):
        show_topologies(reports)


if __name__ == "__main__":
    main()
