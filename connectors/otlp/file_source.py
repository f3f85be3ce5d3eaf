"""OTLP JSON-lines files, as the OpenTelemetry Collector's file exporter writes them.

Reads from the byte offset stored in the store and commits the new offset in the same
transaction as the spans it read, so a crash neither loses nor repeats a line. A span the store
refuses for its data is logged and skipped (with the offset moving on), never retried for ever.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import structlog

from tracing_eval.connectors.otlp.decode import OtlpDecodeError, decode_json_line
from tracing_eval.ingest import make_batch, store_isolating
from tracing_eval.model import Span, SpanEvent
from tracing_eval.sources import PullSource, SourceStore

log = structlog.get_logger(__name__)


@dataclass
class OtlpFileSource(PullSource):
    path: Path
    lines_per_batch: int = 200
    source: str = "otlp"
    complete: bool = False  # True when the file is finished: a last line without newline counts

    @property
    def name(self) -> str:
        return f"otlp-file:{self.path}"

    async def pull(self, store: SourceStore, now: float) -> int:
        if not self.path.is_file():
            raise FileNotFoundError(f"OTLP file {self.path} does not exist")
        state_key = f"otlp-file:{self.path.resolve()}"
        offset = int(await store.get_source_state(state_key) or 0)
        if offset > self.path.stat().st_size:  # file was truncated or replaced: start over
            log.warning("OTLP file shrank; reading it from the start", path=str(self.path))
            offset = 0
        stored = 0
        with self.path.open("rb") as f:
            f.seek(offset)
            while True:
                spans: list[Span] = []
                events: list[tuple[str, str, SpanEvent]] = []
                lines = 0
                while lines < self.lines_per_batch:
                    line = f.readline()
                    if not line or (not line.endswith(b"\n") and not self.complete):
                        break  # nothing more, or a line still being written
                    lines += 1
                    line_start, offset = offset, f.tell()
                    if not line.strip():
                        continue
                    try:
                        decoded = decode_json_line(line)
                    except OtlpDecodeError as exc:
                        log.error(
                            "skipping malformed OTLP line", path=str(self.path), byte_offset=line_start, error=str(exc)
                        )
                        continue
                    if decoded.rejected:
                        log.warning(
                            "rejected spans in OTLP line",
                            path=str(self.path),
                            byte_offset=line_start,
                            rejected=decoded.rejected,
                            errors=decoded.errors[:3],
                        )
                    spans += decoded.spans
                    events += [(e.trace_id, e.span_id, e.event) for e in decoded.logs]
                if not lines:
                    break
                batch = make_batch(spans, events, source=self.source, source_state={state_key: str(offset)})
                result = await store_isolating(store, batch, now)  # a span the store refuses cannot stall the file
                if result.errors:
                    log.warning(
                        "the store refused spans of an OTLP file", path=str(self.path), errors=result.errors[:3]
                    )
                stored += result.stats.spans
        return stored
