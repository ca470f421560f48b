"""A local stand-in for GitHub's raw-file host, serving the locked API-Bank files.

`GET /<owner>/<repo>/<commit>/<path>` answers with the data-root file the lock pins
to that source and path, so `apibank-bench data fetch --base-url` can run against it.
Faults for tests: serve a file altered, answer 404 or 500s for it, or stall every
response after the first N halfway through its body (to kill a fetch mid-download).

Serve a data root from the project folder:  python -m tests.raw_file_server ROOT [--port N]
"""

from __future__ import annotations

import argparse
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from apibank_bench.data.lock import Lock, file_url


class RawFileServer:
    def __init__(self, root: Path, lock: Lock | None = None, port: int = 0):
        lock = lock or Lock.load()
        self.root = Path(root)
        #: URL path -> path under the data root
        self.routes = {urllib.parse.urlsplit(file_url("http://x", lock.sources[item.source], item.source_path)).path:
                       item.path for item in lock.files}
        self.requests: list[str] = []  #: data-root path (or raw URL path if unknown) of each GET
        self.corrupt: set[str] = set()
        self.missing: set[str] = set()
        self.errors: dict[str, int] = {}  #: path -> how many 500s to answer before serving it
        self.stall_after: int | None = None
        self.release = threading.Event()
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def count(self, path: str) -> int:
        with self._lock:
            return self.requests.count(path)

    def _answer(self, url_path: str) -> tuple[int, bytes, bool]:
        """(status, body, stall) for one request; counts it."""
        with self._lock:
            path = self.routes.get(url_path, url_path)
            self.requests.append(path)
            if url_path not in self.routes or path in self.missing:
                return 404, b"404: Not Found", False
            if self.errors.get(path, 0) > 0:
                self.errors[path] -= 1
                return 500, b"500: Internal Server Error", False
            stall = self.stall_after is not None and len(self.requests) > self.stall_after
        body = (self.root / path).read_bytes()
        if path in self.corrupt:
            body = bytes([body[0] ^ 1]) + body[1:]
        return 200, body, stall

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                status, body, stall = server._answer(urllib.parse.urlsplit(self.path).path)
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if stall:  # half the body, then hang until released (the client gets killed meanwhile)
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    server.release.wait()
                    self.close_connection = True
                    return
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        return Handler

    def __enter__(self) -> "RawFileServer":
        threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.release.set()
        self._httpd.shutdown()
        self._httpd.server_close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", help="an API-Bank data root holding the locked files")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    with RawFileServer(Path(args.root), port=args.port) as served:
        print(f"serving {args.root} at {served.url}", flush=True)
        threading.Event().wait()
