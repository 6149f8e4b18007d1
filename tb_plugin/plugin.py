"""The tf_stitch TensorBoard tab: its page (`static/index.js`) and its JSON routes
(`routes.py`) over the logdir's profiles and benchmark runs (`store.py`)."""

from __future__ import annotations

import os
from importlib import resources
from typing import Any

from tensorboard.backend import http_util
from tensorboard.plugins import base_plugin
from werkzeug import wrappers

from tb_plugin import metadata, routes
from tb_plugin.store import Store


class TfStitchPlugin(base_plugin.TBPlugin):
    plugin_name = metadata.PLUGIN_NAME

    def __init__(self, context: base_plugin.TBContext) -> None:
        self._logdir = context.logdir or ""
        self._store = Store(self._logdir)

    def get_plugin_apps(self) -> dict[str, Any]:
        apps: dict[str, Any] = {"/index.js": self._serve_index}
        apps.update({path: routes.app(self._store, h) for path, h in routes.ROUTES.items()})
        return apps

    def is_active(self) -> bool:
        """Cheap: looks for a `plugins/tf_stitch` folder in the logdir (profiles) or one level
        below it (benchmark runs)."""
        if not self._logdir or not os.path.isdir(self._logdir):
            return False
        if os.path.isdir(os.path.join(self._logdir, metadata.PLUGIN_DIR)):
            return True
        with os.scandir(self._logdir) as runs:
            for run in runs:
                if run.is_dir() and os.path.isdir(os.path.join(run.path, metadata.PLUGIN_DIR)):
                    return True
        return False

    def frontend_metadata(self) -> base_plugin.FrontendMetadata:
        return base_plugin.FrontendMetadata(es_module_path="/index.js", tab_name="tf_stitch")

    def _serve_index(self, environ: dict[str, Any], start_response: Any) -> Any:
        """WSGI app serving the tab's ES module."""
        request = wrappers.Request(environ)
        body = (resources.files("tb_plugin") / "static" / "index.js").read_bytes()
        response = http_util.Respond(request, body, "application/javascript")
        return response(environ, start_response)
