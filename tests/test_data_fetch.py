"""`data fetch` against a local raw-file host: clean, resumed after a kill, and each failure named."""

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from apibank_bench.cli import build_parser
from apibank_bench.core import settings
from raw_file_server import RawFileServer

from apibank_bench.data import lock as data
from apibank_bench.core.paths import PROJECT_ROOT

LOCK = data.Lock.load()
LEVEL3 = "test_data/level-3.json"
BASE_URL_ENV = settings.BY_NAME["data_base_url"].env_names[0]
PROXY_VARIABLES = ["http_proxy", "https_proxy", "all_proxy", "no_proxy"]


@pytest.fixture(autouse=True)
def no_proxies(monkeypatch):
    """The local server must be reached directly, whatever the machine's proxy settings."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.delenv(BASE_URL_ENV, raising=False)


@pytest.fixture
def server(apibank_root):
    with RawFileServer(apibank_root) as served:
        yield served


def cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "apibank_bench", "data", *args], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, env={**os.environ, **(env or {})})


def leftovers(dest: Path) -> list[Path]:
    return sorted(dest.rglob(f"*{data.PART_SUFFIX}"))


def only(*paths: str) -> data.Lock:
    return data.Lock(LOCK.sources, tuple(item for item in LOCK.files if item.path in paths))


def test_clean_fetch_downloads_each_locked_file_once(server, tmp_path, apibank_root):
    dest = tmp_path / "api-bank"
    result = cli("fetch", "--dest", str(dest), env={BASE_URL_ENV: server.url})
    assert result.returncode == 0, result.stderr
    size = sum((apibank_root / item.path).stat().st_size for item in LOCK.files)
    assert f"downloaded {len(LOCK.files)} files ({size / 1e6:.1f} MB) from {server.url}" in result.stdout
    assert sorted(server.requests) == sorted(item.path for item in LOCK.files)
    assert leftovers(dest) == []
    checked = cli("verify", "--root", str(dest))
    assert checked.returncode == 0, checked.stderr
    # Level 3 comes from the other repository, at its own commit.
    level3 = next(item for item in LOCK.files if item.path == LEVEL3)
    assert LOCK.sources[level3.source]["repository"] == "juyangbai/MAS-PromptBench"
    assert data.file_url(server.url, LOCK.sources[level3.source], level3.source_path) == (
        f"{server.url}/juyangbai/MAS-PromptBench/{LOCK.sources[level3.source]['commit']}/{level3.source_path}")


def test_killed_fetch_resumes_with_only_the_missing_files(server, tmp_path):
    dest = tmp_path / "api-bank"
    server.stall_after = 40  # later responses send half their body, then hang
    proc = subprocess.Popen([sys.executable, "-m", "apibank_bench", "data", "fetch", "--data-base-url", server.url,
                             "--dest", str(dest)], cwd=PROJECT_ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):  # until a download is half written (bounded so a broken fetch cannot hang the suite)
            if (len(server.requests) > server.stall_after and leftovers(dest)) or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert proc.poll() is None and leftovers(dest), "the fetch should be stalled mid-download"
    finally:
        proc.kill()
        proc.wait()
    present = [item for item in LOCK.files if (dest / item.path).exists()]
    assert 0 < len(present) <= 40
    assert all(data.sha256_of(dest / item.path) == item.sha256 for item in present)  # no torn file in place

    server.stall_after = None
    server.release.set()
    server.requests.clear()
    result = data.fetch_from_web(dest, base=server.url)
    missing = sorted(item.path for item in LOCK.files if item not in present)
    assert sorted(server.requests) == missing
    assert (result.downloaded, result.kept) == (len(missing), len(present))
    assert data.verify(dest) == []
    assert leftovers(dest) == []


def test_altered_download_is_named_and_not_installed(server, tmp_path):
    dest = tmp_path / "api-bank"
    server.corrupt = {"init_database/Alarm.json"}
    with pytest.raises(data.FetchError, match="init_database/Alarm.json") as failure:
        data.fetch_from_web(dest, base=server.url)
    assert "not installed" in str(failure.value)
    assert not (dest / "init_database" / "Alarm.json").exists()
    assert leftovers(dest) == []
    assert server.count("init_database/Alarm.json") == 1  # an altered file is not asked for again
    assert data.verify(dest) == [f"missing: {item.path}" for item in LOCK.files if not (dest / item.path).exists()]


def test_missing_file_is_named_in_one_line(server, tmp_path):
    dest = tmp_path / "api-bank"
    server.missing = {LEVEL3}
    result = cli("fetch", "--data-base-url", server.url, "--dest", str(dest))
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert LEVEL3 in result.stderr and "HTTP 404" in result.stderr and "again to resume" in result.stderr
    assert server.count(LEVEL3) == 1
    assert not (dest / LEVEL3).exists()


def test_server_errors_are_retried_then_reported(server, tmp_path):
    dest = tmp_path / "api-bank"
    bank, alarm = "init_database/Bank.json", "init_database/Alarm.json"
    server.errors = {bank: 2, alarm: 100}
    result = data.fetch_from_web(dest, lock=only(bank), base=server.url, backoff=0)
    assert result.downloaded == 1 and server.count(bank) == 3  # two 500s, then the file
    with pytest.raises(data.FetchError, match=rf"^{alarm}: .* failed 4 times \(last: HTTP 500"):
        data.fetch_from_web(dest, lock=only(alarm), base=server.url, backoff=0)
    assert server.count(alarm) == data.ATTEMPTS
    assert not (dest / alarm).exists() and leftovers(dest) == []


def test_unreachable_host_is_retried_then_reported(tmp_path):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(data.FetchError, match=rf"{LEVEL3}: .* failed 4 times \(last: .*refused"):
        data.fetch_from_web(tmp_path, lock=only(LEVEL3), base=f"http://127.0.0.1:{port}", backoff=0)


def test_base_url_precedence_flag_then_environment_then_github():
    def base(argv, env):
        args = build_parser("data").parse_args(["data", "fetch", *argv])
        return settings.command_values(args, "data", environ=env).data_base_url

    assert base([], {}) == data.DEFAULT_BASE_URL == "https://raw.githubusercontent.com"
    assert base([], {BASE_URL_ENV: "http://mirror.example/raw/"}) == "http://mirror.example/raw/"
    assert base(["--data-base-url", "http://flag.example"], {BASE_URL_ENV: "http://m/"}) == "http://flag.example"


def test_https_proxy_carries_the_download(monkeypatch, tmp_path):
    """With HTTPS_PROXY set, the default GitHub URL is asked of the proxy (which here refuses it)."""
    seen = []
    listener = socket.create_server(("127.0.0.1", 0))

    def refuse_all():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                seen.append(conn.recv(4096).split(b"\r\n")[0].decode())
                conn.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")

    threading.Thread(target=refuse_all, daemon=True).start()
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{listener.getsockname()[1]}")
    try:
        with pytest.raises(data.FetchError, match=LEVEL3):
            data.fetch_from_web(tmp_path, lock=only(LEVEL3), attempts=1)
    finally:
        listener.close()
    assert [line.rsplit(" ", 1)[0] for line in seen] == ["CONNECT raw.githubusercontent.com:443"]
