"""A loopback OTLP/HTTP endpoint that writes what it receives as Collector file-exporter JSON lines.

Accepts `POST .../v1/traces` and `POST .../v1/logs` with protobuf bodies (optionally gzip or deflate)
and appends each export request to a file as one line of OTLP/JSON: lowerCamelCase keys, enums
as integers, int64 as decimal strings and `traceId`/`spanId`/`parentSpanId` as lowercase hex.
"""

from __future__ import annotations

import base64
import json
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

_ROUTES: dict[str, tuple[type[Message], type[Message]]] = {
    "/v1/traces": (ExportTraceServiceRequest, ExportTraceServiceResponse),
    "/v1/logs": (ExportLogsServiceRequest, ExportLogsServiceResponse),
}
_ID_KEYS = {"traceId", "spanId", "parentSpanId"}
# Stack traces name files by absolute path; keep them relative to the repository in committed files.
_REPO_PREFIX = str(Path(__file__).resolve().parents[1]) + "/"


def ids_to_hex(node: Any) -> Any:
    """Rewrite base64 trace/span ids (protobuf's JSON mapping) to hex (OTLP/JSON), in place."""
    if isinstance(node, dict):
        for key, val in node.items():
            if key in _ID_KEYS and isinstance(val, str):
                node[key] = base64.b64decode(val).hex()
            else:
                ids_to_hex(val)
    elif isinstance(node, list):
        for item in node:
            ids_to_hex(item)
    return node


def to_otlp_json(message: Message) -> str:
    """One export request as a single OTLP/JSON line, the way the Collector's file exporter writes it."""
    obj = json_format.MessageToDict(message, use_integers_for_enums=True)
    return json.dumps(ids_to_hex(obj), separators=(",", ":"), ensure_ascii=False).replace(_REPO_PREFIX, "")


def _decompress(body: bytes, encoding: str) -> bytes:
    encoding = encoding.strip().lower()
    if encoding == "gzip":
        return zlib.decompress(body, 16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        return zlib.decompress(body)
    return body


class CaptureEndpoint:
    """OTLP/HTTP receiver on 127.0.0.1 that appends every export request to `path` (traces and logs)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.requests = 0
        self.gzipped = 0
        self._lock = threading.Lock()
        self._file = path.open("w", encoding="utf-8")
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="otlp-capture", daemon=True)

    @property
    def endpoint(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def _write(self, line: str, gzipped: bool) -> None:
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()
            self.requests += 1
            self.gzipped += gzipped

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        capture = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server naming)
                # any prefix: Langfuse's SDK posts to `<host>/api/public/otel/v1/traces`
                route = next((r for path, r in _ROUTES.items() if self.path.endswith(path)), None)
                if route is None:
                    return self._answer(404, b"", "text/plain")
                request_cls, response_cls = route
                encoding = self.headers.get("Content-Encoding", "")
                raw = self._body()
                msg = request_cls()
                try:
                    msg.ParseFromString(_decompress(raw, encoding))
                except (DecodeError, zlib.error) as exc:
                    return self._answer(400, str(exc).encode(), "text/plain")
                capture._write(to_otlp_json(msg), encoding.lower() == "gzip")
                self._answer(200, response_cls().SerializeToString(), "application/x-protobuf")

            def _body(self) -> bytes:
                """The request body, by Content-Length or chunked (Node's exporters send chunks)."""
                if self.headers.get("Transfer-Encoding", "").strip().lower() != "chunked":
                    return self.rfile.read(int(self.headers.get("Content-Length", 0)))
                chunks = []
                while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()  # the CRLF after each chunk
                while self.rfile.readline().strip():  # trailers, up to the empty line
                    pass
                return b"".join(chunks)

            def _answer(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib signature)
                pass

        return Handler

    def __enter__(self) -> CaptureEndpoint:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
        self._file.close()
