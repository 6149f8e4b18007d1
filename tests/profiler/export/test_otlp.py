"""OTLP export of a profile to an OTLP/HTTP receiver started here on 127.0.0.1, which decodes
the requests with the OpenTelemetry protobuf definitions; and an unreachable endpoint."""

from __future__ import annotations

import gzip
import threading
import warnings
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
import tensorflow as tf
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

import tf_stitch
from tf_stitch.profiler.export.otlp import traces_url
from tf_stitch.profiler.store.profile import STORE_DIR

STEPS = 3


class _Receiver(BaseHTTPRequestHandler):
    requests: ClassVar[list[tuple[str, trace_service_pb2.ExportTraceServiceRequest]]] = []

    def do_POST(self) -> None:  # the http.server API's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        request = trace_service_pb2.ExportTraceServiceRequest()
        request.ParseFromString(body)
        type(self).requests.append((self.path, request))
        reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[str]:
    _Receiver.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _model() -> tuple[object, tf.Tensor]:
    import keras

    keras.utils.set_random_seed(0)
    inp = keras.Input((32,))
    h = keras.layers.Dense(64, activation="relu", name="hidden")(inp)
    return keras.Model(inp, keras.layers.Dense(8, name="out")(h), name="mlp"), tf.ones([16, 32])


def test_one_trace_per_step_with_parent_links_and_times(receiver: str, tmp_path: Path) -> None:
    model, x = _model()
    p = tf_stitch.profile(
        model,
        x,
        steps=STEPS,
        warmup=1,
        logdir=tmp_path,
        run_name="r",
        otlp_endpoint=receiver,
        progress=None,
    )
    assert len(_Receiver.requests) == 1
    path, request = _Receiver.requests[0]
    assert path == "/v1/traces"
    (resource_spans,) = request.resource_spans
    attrs = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
    assert attrs["service.name"] == "tf_stitch" and attrs["tf_stitch.model"] == "mlp"
    spans = [s for scope in resource_spans.scope_spans for s in scope.spans]
    assert len(spans) == len(p.spans) == p.meta["otlp_spans_sent"]
    by_id = {s.span_id: s for s in spans}
    traces: dict[bytes, list] = {}
    for s in spans:
        traces.setdefault(s.trace_id, []).append(s)
    assert len(traces) == STEPS  # one trace per step
    for members in traces.values():
        roots = [s for s in members if not s.parent_span_id]
        assert len(roots) == 1 and roots[0].name == p.level("model").name.iloc[0]
        for s in members:
            assert s.start_time_unix_nano <= s.end_time_unix_nano
            if s.parent_span_id:
                parent = by_id[s.parent_span_id]
                assert parent.trace_id == s.trace_id
                assert parent.start_time_unix_nano <= s.start_time_unix_nano
                assert s.end_time_unix_nano <= parent.end_time_unix_nano
    levels = {
        a.value.string_value for s in spans for a in s.attributes if a.key == "tf_stitch.level"
    }
    assert {"model", "layer", "op"} <= levels
    first = min(s.start_time_unix_nano for s in spans)
    assert abs(first - p.meta["step_start_ns"][0]) < 1e6  # the traced clock, in epoch ns
    assert (tmp_path / STORE_DIR / "r" / "meta.json").is_file()


def test_an_unreachable_endpoint_warns_and_keeps_the_files(tmp_path: Path) -> None:
    model, x = _model()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p = tf_stitch.profile(
            model,
            x,
            steps=2,
            warmup=0,
            logdir=tmp_path,
            run_name="r",
            otlp_endpoint="http://127.0.0.1:9",
            progress=None,
        )
    assert any("could not send the profile" in str(w.message) for w in caught)
    assert "otlp_spans_sent" not in p.meta
    assert (tmp_path / STORE_DIR / "r" / "spans.jsonl.gz").is_file()


def test_endpoint_urls() -> None:
    assert traces_url("http://h:4318") == "http://h:4318/v1/traces"
    assert traces_url("http://h:4318/v1/traces/") == "http://h:4318/v1/traces"
