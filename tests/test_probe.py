"""One GET /models per endpoint per run (llm/probe.py): asked once, remembered, any HTTP answer is an endpoint."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from apibank_bench.llm.probe import EndpointUnreachable, endpoint_models, forget_probes, probe_models


class Models(BaseHTTPRequestHandler):
    status = 200
    asked: list[str] = []

    def do_GET(self):  # noqa: N802 (http.server's name)
        type(self).asked.append(self.path)
        body = json.dumps({"object": "list", "data": [{"id": "m"}]}).encode()
        self.send_response(self.status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    forget_probes()
    handler = type("Handler", (Models,), {"asked": []})
    with ThreadingHTTPServer(("127.0.0.1", 0), handler) as httpd:
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        yield handler, f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        httpd.shutdown()
    forget_probes()


def test_the_reachability_check_and_the_summary_share_one_request(server):
    handler, url = server
    endpoint_models(url, require=True)
    assert endpoint_models(url + "/") == {"object": "list", "data": [{"id": "m"}]}
    assert probe_models(url).status == 200
    assert handler.asked == ["/v1/models"]
    forget_probes()  # the next run asks again
    probe_models(url)
    assert handler.asked == ["/v1/models", "/v1/models"]


def test_any_http_answer_is_an_endpoint_and_nothing_listening_is_not(server):
    handler, url = server
    handler.status = 401
    assert probe_models(url).reachable and probe_models(url).status == 401
    endpoint_models(url, require=True)  # no exception: something answers
    assert "401" in endpoint_models(url)["error"]
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{unused.getsockname()[1]}/v1"
    with pytest.raises(EndpointUnreachable, match="cannot reach the model endpoint"):
        endpoint_models(dead, require=True)
    assert not probe_models(dead).reachable and "refused" in endpoint_models(dead)["error"]
