"""The tab's JSON routes, through TensorBoard's test client (werkzeug), against a logdir that
`tf_stitch.profile` and `tf-stitch bench` wrote: shapes of the answers, paging, and the bad
input the routes refuse (path tricks 400, unknown runs 404, a corrupt span file 500)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tensorboard.plugins import base_plugin
from werkzeug.test import Client

from tb_plugin.plugin import TfStitchPlugin
from tf_stitch.profiler.profile import COLUMNS


@pytest.fixture(scope="module")
def client(tab_logdir: Path) -> Any:
    logdir = tab_logdir
    plugin = TfStitchPlugin(base_plugin.TBContext(logdir=str(logdir)))
    apps = plugin.get_plugin_apps()

    def get(route: str, **params: Any) -> tuple[int, Any]:
        response = Client(apps[route]).get(route, query_string=params)
        assert response.content_type == "application/json"
        return response.status_code, json.loads(response.data)

    return get


def test_runs(client: Any) -> None:
    status, body = client("/runs")
    assert status == 200
    assert body["profiles"] == ["broken", "opt", "plain"]
    assert len(body["bench"]) == 1 and body["bench"][0].startswith("bench_")


def test_meta_spans_and_top(client: Any) -> None:
    status, meta = client("/meta", run="opt")
    assert status == 200 and meta["model"] and meta["xprof_trace"] is True
    assert {"model", "layer", "op", "kernel"} <= set(meta["levels"])
    assert set(meta["overheads"]) == set(meta["levels"]) - {"model"}
    status, page = client("/spans", run="opt", step=1, levels="model,layer", limit=2)
    assert status == 200 and page["step"] == 1 and page["steps"] == 3
    assert page["total"] >= 2 and len(page["spans"]) == 2
    assert all(set(s) == set(COLUMNS) for s in page["spans"])
    assert {s["level"] for s in page["spans"]} <= {"model", "layer"}
    _, rest = client("/spans", run="opt", step=1, levels="model,layer", offset=2, limit=1000)
    assert len(rest["spans"]) == page["total"] - 2
    status, top = client("/top", run="opt", level="kernel", k=2)
    assert status == 200 and 1 <= len(top["rows"]) <= 2
    assert set(top["rows"][0]) == {
        "name",
        "type",
        "calls_per_step",
        "raw_ns",
        "corrected_ns",
        "share",
    }
    _, none = client("/top", run="plain", level="kernel")
    assert none["rows"] == []


def test_fusion_groups_and_bench(client: Any) -> None:
    status, body = client("/kernels", run="opt")
    assert status == 200 and body["kernels"]
    k = body["kernels"][0]
    assert k["members"] and k["schedule"] and "ts_run" in k["source"]
    assert client("/kernels", run="plain")[1] == {"kernels": []}
    _, runs = client("/runs")
    status, bench = client("/bench", run=runs["bench"][0])
    assert status == 200
    assert set(bench["workloads"]["lr"]["kernels"]) >= {"tf", "xla_cpu", "tf_stitch_cpu"}


@pytest.mark.parametrize(
    ("route", "params"),
    [
        ("/meta", {"run": "../opt"}),
        ("/meta", {"run": "/etc"}),
        ("/meta", {"run": "a/b"}),
        ("/meta", {"run": "a\\b"}),
        ("/meta", {"run": ".."}),
        ("/meta", {}),
        ("/bench", {"run": "../../x"}),
        ("/spans", {"run": "opt", "step": "abc"}),
        ("/spans", {"run": "opt", "step": "99"}),
        ("/spans", {"run": "opt", "limit": str(10**9)}),
        ("/spans", {"run": "opt", "levels": "model,warp"}),
        ("/top", {"run": "opt", "level": "zzz"}),
        ("/top", {"run": "opt", "k": "0"}),
        ("/meta", {"run": "x" * 5000}),
    ],
)
def test_bad_parameters_get_400(client: Any, route: str, params: dict[str, str]) -> None:
    status, body = client(route, **params)
    assert status == 400 and body["error"]


def test_unknown_runs_get_404_and_corrupt_files_500(client: Any) -> None:
    for route in ("/meta", "/spans", "/top", "/kernels", "/bench"):
        status, body = client(route, run="nope")
        assert status == 404 and "nope" in body["error"]
    status, body = client("/spans", run="broken")
    assert status == 500 and "cannot be read" in body["error"]
    assert client("/meta", run="broken")[0] == 200  # the rest of the run still answers
    assert client("/runs")[0] == 200 and client("/meta", run="opt")[0] == 200


def test_a_100k_span_profile_is_paged(tmp_path: Path) -> None:
    import pandas as pd

    from tf_stitch.profiler.profile import Profile

    n = 100_000
    rows = {
        "step": [0] * n,
        "id": list(range(n)),
        "parent": [-1] + [0] * (n - 1),
        "level": ["model"] + ["op"] * (n - 1),
        "name": ["m"] + [f"op_{i}" for i in range(1, n)],
        "type": ["step"] + ["AddV2"] * (n - 1),
        "start_ns": [0.0] + [float(i) for i in range(1, n)],
        "end_ns": [float(n)] + [float(i) + 0.5 for i in range(1, n)],
        "raw_ns": [float(n)] + [0.5] * (n - 1),
        "attributed_ns": [float(n)] + [0.5] * (n - 1),
        "corrected_ns": [float(n)] + [0.5] * (n - 1),
        "tracing_events": [0] * n,
        "thread": [""] * n,
        "run": ["A"] + ["B"] * (n - 1),
    }
    meta = {"model": "big", "levels": ["model", "op"], "model_latency_ns": float(n)}
    Profile(pd.DataFrame(rows, columns=COLUMNS), meta).save(tmp_path, "big")
    apps = TfStitchPlugin(base_plugin.TBContext(logdir=str(tmp_path))).get_plugin_apps()
    response = Client(apps["/spans"]).get(
        "/spans", query_string={"run": "big", "limit": 500, "offset": 99_800}
    )
    body = json.loads(response.data)
    assert response.status_code == 200 and body["total"] == n
    assert [s["id"] for s in body["spans"]] == list(range(99_800, n))
    top = json.loads(Client(apps["/top"]).get("/top", query_string={"run": "big", "k": 5}).data)
    assert len(top["rows"]) == 5
