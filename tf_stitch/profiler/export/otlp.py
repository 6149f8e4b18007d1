"""A profile's span trees sent to an OpenTelemetry backend over OTLP/HTTP (Jaeger, Tempo and
the OpenTelemetry Collector accept it): one trace per step, spans with the explicit start and
end times measured, resource attributes naming the model and the device.

The endpoint is the backend's base URL (`http://host:4318`, as `OTEL_EXPORTER_OTLP_ENDPOINT`
is) or the full traces URL (`.../v1/traces`).
"""

from __future__ import annotations

import logging
import os
import platform
import warnings
from typing import Any

import pandas as pd

from tb_plugin.metadata import ProfileMeta

ENV_ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
TRACES_PATH = "/v1/traces"
TIMEOUT_S = 5.0


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL of a base URL or a traces URL."""
    url = endpoint.rstrip("/")
    return url if url.endswith(TRACES_PATH) else url + TRACES_PATH


def otlp_spans(spans: pd.DataFrame, meta: ProfileMeta, step_start_ns: list[int]) -> list[Any]:
    """The profile's spans as OpenTelemetry SDK spans (finished, not sent): one trace per step,
    parents before children, with the profile's columns as attributes."""
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    resource = Resource.create(
        {
            "service.name": "tf_stitch",
            "tf_stitch.model": str(meta.get("model", "")),
            "tf_stitch.device": str(meta.get("device", "")),
            "tf_stitch.run": str(meta.get("run", "")),
            "host.name": platform.node(),
            "tensorflow.version": str(meta.get("tensorflow", "")),
        }
    )
    provider = TracerProvider(resource=resource)
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tf_stitch.profiler")
    for step, rows in spans.groupby("step", sort=True):
        base = step_start_ns[int(step)] if int(step) < len(step_start_ns) else 0
        contexts: dict[int, Any] = {}
        for r in rows.sort_values("id").itertuples():
            parent = contexts.get(int(r.parent))
            ctx = trace.set_span_in_context(parent) if parent is not None else None
            span = tracer.start_span(
                str(r.name),
                context=ctx,
                start_time=base + int(r.start_ns),
                attributes={
                    "tf_stitch.level": str(r.level),
                    "tf_stitch.type": str(r.type),
                    "tf_stitch.step": int(step),
                    "tf_stitch.run": str(r.run),
                    "tf_stitch.raw_ns": float(r.raw_ns),
                    "tf_stitch.corrected_ns": float(r.corrected_ns),
                },
            )
            span.end(end_time=base + int(r.end_ns))
            contexts[int(r.id)] = span
    provider.shutdown()
    return list(memory.get_finished_spans())


def export_otlp(
    spans: pd.DataFrame,
    meta: ProfileMeta,
    step_start_ns: list[int],
    endpoint: str | None = None,
    timeout: float = TIMEOUT_S,
) -> int:
    """Sends the spans to `endpoint` (default: `$OTEL_EXPORTER_OTLP_ENDPOINT`); returns how many
    were sent. An unreachable or failing endpoint gives a warning and returns 0; nothing raises,
    so the profile's local files are never lost to a network problem."""
    endpoint = endpoint or os.environ.get(ENV_ENDPOINT)
    if not endpoint:
        return 0
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    finished = otlp_spans(spans, meta, step_start_ns)
    exporter = OTLPSpanExporter(endpoint=traces_url(endpoint), timeout=timeout)
    quiet = logging.getLogger("opentelemetry.exporter.otlp.proto.http")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)  # its own error log would repeat our warning
    try:
        result = exporter.export(finished)
    except Exception as e:  # the exporter is third-party: whatever it raises becomes a warning
        result, reason = SpanExportResult.FAILURE, str(e)
    else:
        reason = "the endpoint did not accept the spans"
    finally:
        quiet.setLevel(level)
        exporter.shutdown()
    if result is not SpanExportResult.SUCCESS:
        warnings.warn(
            f"tf_stitch: could not send the profile to {traces_url(endpoint)} over OTLP ({reason});"
            " the local files are written",
            RuntimeWarning,
            stacklevel=2,
        )
        return 0
    return len(finished)
