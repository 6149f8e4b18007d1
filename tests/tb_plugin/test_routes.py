"""The tab's JSON routes, through TensorBoard's test client (werkzeug), against a logdir that
`tf_stitch.profile` and `tf-stitch bench` wrote: shapes of the answers, paging, and the bad
input the routes refuse (path tricks 400, unknown runs 404, a corrupt span file 500)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from tensorboard.plugins import base_plugin
from werkzeug.test import Client

from tb_plugin.plugin import TfStitchPlugin
from tf_stitch.profiler.store.profile import COLUMNS, STORE_DIR


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
    status, body = client("/decisions", run="opt")
    assert status == 200 and body["decisions"]
    assert set(body["decisions"][0]) == {"kind", "subject", "verdict", "reason"}
    assert {d["verdict"] for d in body["decisions"]} <= {"allow", "forbid"}
    assert client("/decisions", run="plain")[1] == {"decisions": []}
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
    for route in ("/meta", "/spans", "/top", "/kernels", "/decisions", "/bench"):
        status, body = client(route, run="nope")
        assert status == 404 and "nope" in body["error"]
    status, body = client("/spans", run="broken")
    assert status == 500 and "cannot be read" in body["error"]
    assert client("/meta", run="broken")[0] == 200  # the rest of the run still answers
    assert client("/runs")[0] == 200 and client("/meta", run="opt")[0] == 200


def test_a_100k_span_profile_is_paged(tmp_path: Path) -> None:
    import pandas as pd

    from tf_stitch.profiler.store.profile import Profile

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


@pytest.fixture(scope="module")
def raw_get(tab_logdir: Path) -> Any:
    apps = TfStitchPlugin(base_plugin.TBContext(logdir=str(tab_logdir))).get_plugin_apps()

    def get(route: str, query: str) -> tuple[int, Any]:
        response = Client(apps[route]).get(f"{route}?{query}")
        assert response.content_type == "application/json"
        text = response.data.decode("utf-8")
        assert "Traceback" not in text and "/site-packages/" not in text
        return response.status_code, json.loads(text)

    return get


@pytest.mark.parametrize(
    ("route", "query"),
    [
        ("/meta", "run=..%2Fopt"),
        ("/meta", "run=%2Fetc%2Fpasswd"),
        ("/meta", "run=%2e%2e"),
        ("/meta", "run=%ff%fe%00"),
        ("/meta", "run=opt%00.json"),
        ("/spans", "run=..%2F..%2Fopt&step=0"),
        ("/spans", "run=opt&step=1e9"),
        ("/spans", "run=opt&offset=99999999999999999999999"),
        ("/spans", "run=opt&limit=-1"),
        ("/spans", "run=opt&levels=" + "%2C" * 2000),
        ("/top", "run=opt&k=%20"),
        ("/top", "run=%5C%5Cserver%5Cshare"),
        ("/kernels", "run=..%5Copt"),
        ("/kernels", "run="),
        ("/bench", "run=..%2F..%2F..%2Fetc"),
        ("/meta", "run=opt&run=..%2Fx&run=%2Fetc"),
        ("/meta", "%%%=&&&run"),
    ],
)
def test_malformed_queries_get_4xx_and_no_stack_trace(raw_get: Any, route: str, query: str) -> None:
    status, body = raw_get(route, query)
    assert 400 <= status < 500 or (status == 200 and route == "/meta"), (status, body)
    if status != 200:
        assert body["error"]


def test_a_run_linked_from_outside_the_logdir_is_not_served(
    tab_logdir: Path, tmp_path: Path, raw_get: Any
) -> None:
    outside = tmp_path / "outside"
    shutil.copytree(tab_logdir / STORE_DIR / "opt", outside)
    link = tab_logdir / STORE_DIR / "linked"
    link.symlink_to(outside, target_is_directory=True)
    try:
        status, body = raw_get("/meta", "run=linked")
        assert status == 404 and "no tf_stitch profile" in body["error"]
        assert "linked" not in raw_get("/runs", "")[1]["profiles"]
    finally:
        link.unlink()


def test_an_unexpected_failure_is_a_500_without_details(
    raw_get: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tb_plugin.store import Store

    def broken(self: Any, run: Any) -> Any:
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr(Store, "meta", broken)
    status, body = raw_get("/meta", "run=opt")
    assert status == 500 and "secret" not in body["error"] and "internal error" in body["error"]


def _linked_run(logdir: Path, name: str, links: dict[str, Path]) -> Path:
    """A profile run in the logdir whose files named in `links` are links to those paths."""
    run = logdir / STORE_DIR / name
    shutil.copytree(logdir / STORE_DIR / "opt", run)
    for file, target in links.items():
        (run / file).unlink(missing_ok=True)
        (run / file).symlink_to(target)
    return run


@pytest.mark.parametrize(
    "file", ["meta.json", "kernels.json", "spans.jsonl.gz", "ops.json.gz", "decisions.json"]
)
def test_a_file_linked_from_outside_the_logdir_is_not_served(
    tab_logdir: Path, tmp_path: Path, raw_get: Any, file: str
) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"model": "SECRET", "kernels": ["SECRET"]}))
    run = _linked_run(tab_logdir, "file_link", {file: secret})
    try:
        for route in ("/meta", "/kernels", "/decisions", "/spans", "/top"):
            status, body = raw_get(route, "run=file_link")
            assert status == 404 and "SECRET" not in json.dumps(body), (route, body)
        assert "file_link" not in raw_get("/runs", "")[1]["profiles"]
    finally:
        shutil.rmtree(run)


@pytest.mark.parametrize("target", ["/etc/passwd", "/dev/zero", "/dev/null"])
def test_links_to_system_and_device_files_are_not_opened(
    tab_logdir: Path, raw_get: Any, target: str
) -> None:
    run = _linked_run(tab_logdir, "device_link", {"meta.json": Path(target)})
    try:
        status, body = raw_get("/meta", "run=device_link")
        assert status == 404 and "root:" not in json.dumps(body)
    finally:
        shutil.rmtree(run)


def test_a_link_inside_the_logdir_is_served(tab_logdir: Path, raw_get: Any) -> None:
    inside = tab_logdir / STORE_DIR / "opt" / "kernels.json"
    run = _linked_run(tab_logdir, "inner_link", {"kernels.json": inside})
    try:
        status, body = raw_get("/kernels", "run=inner_link")
        assert status == 200 and body["kernels"]
    finally:
        shutil.rmtree(run)


def test_a_bench_file_linked_from_outside_is_not_served(
    tab_logdir: Path, tmp_path: Path, raw_get: Any
) -> None:
    secret = tmp_path / "bench_secret.json"
    secret.write_text(json.dumps({"SECRET": 1}))
    folder = tab_logdir / "bench_linked" / "plugins" / "tf_stitch"
    folder.mkdir(parents=True)
    (folder / "bench.json").symlink_to(secret)
    try:
        status, body = raw_get("/bench", "run=bench_linked")
        assert status == 404 and "SECRET" not in json.dumps(body)
        assert "bench_linked" not in raw_get("/runs", "")[1]["bench"]
    finally:
        shutil.rmtree(tab_logdir / "bench_linked")


@pytest.mark.parametrize(
    ("route", "query"),
    [
        ("/runs", ""),
        ("/meta", "run=opt"),
        ("/spans", "run=opt"),
        ("/top", "run=opt"),
        ("/kernels", "run=opt"),
        ("/decisions", "run=opt"),
        ("/bench", "run=nope"),
        ("/meta", "run=.."),
        ("/spans", "run=broken"),
        ("/index.js", ""),
    ],
)
def test_every_route_sends_nosniff_and_no_caching(tab_logdir: Path, route: str, query: str) -> None:
    apps = TfStitchPlugin(base_plugin.TBContext(logdir=str(tab_logdir))).get_plugin_apps()
    response = Client(apps[route]).get(f"{route}?{query}")
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert "no-cache" in response.headers["Cache-Control"]
    gzipped = Client(apps[route]).get(f"{route}?{query}", headers={"Accept-Encoding": "gzip"})
    assert gzipped.status_code == response.status_code


def test_the_store_keeps_a_bounded_number_of_profiles(tab_logdir: Path) -> None:
    from tb_plugin.store import Store

    store = Store(str(tab_logdir), max_cached=1)
    store.profile("opt")
    store.profile("plain")
    assert store.cached_runs() == ["plain"]
    again = store.profile("plain")
    assert store.profile("plain") is again  # a hit while its files are unchanged
