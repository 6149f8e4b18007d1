"""The TensorBoard plugin skeleton: registered, cheap is_active, serves its page."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

from tensorboard.plugins import base_plugin
from werkzeug.test import Client

from tb_plugin.plugin import TfStitchPlugin


def _plugin(logdir: Path) -> TfStitchPlugin:
    return TfStitchPlugin(base_plugin.TBContext(logdir=str(logdir)))


def test_entry_point_is_registered() -> None:
    names = {ep.name: ep.value for ep in metadata.entry_points(group="tensorboard_plugins")}
    assert names.get("tf_stitch") == "tb_plugin.plugin:TfStitchPlugin"


def test_inactive_without_data_and_active_with_it(tmp_path: Path) -> None:
    assert not _plugin(tmp_path).is_active()
    assert not _plugin(tmp_path / "missing").is_active()
    (tmp_path / "run1" / "plugins" / "tf_stitch").mkdir(parents=True)
    assert _plugin(tmp_path).is_active()
    profiles = tmp_path / "profiles"
    (profiles / "plugins" / "tf_stitch" / "run").mkdir(parents=True)
    assert _plugin(profiles).is_active()


def test_serves_the_es_module(tmp_path: Path) -> None:
    plugin = _plugin(tmp_path)
    assert plugin.frontend_metadata().es_module_path == "/index.js"
    app = plugin.get_plugin_apps()["/index.js"]
    response = Client(app).get("/index.js")
    assert response.status_code == 200
    assert response.content_type.startswith("application/javascript")
    assert b"export async function render" in response.data
