"""The tab's JSON routes (under /data/plugin/tf_stitch/): WSGI apps over a `Store`.

- `/runs`: the profile and benchmark runs;
- `/meta?run=R`: a profile's metadata (model, device, levels, per-level overheads, ...), and
  whether XProf's trace of it exists;
- `/spans?run=R&step=0&levels=model,layer&offset=0&limit=2000`: one step's span tree, paged;
- `/top?run=R&level=op&k=20`: the top-k names of a level by corrected time per step;
- `/kernels?run=R`: the fusion groups (StitchedKernels) of a profiled optimized graph;
- `/decisions?run=R`: its fusion decisions, each once (explain()'s table);
- `/bench?run=R`: a `tf-stitch bench` run's table (kernels per step and latency per workload).

Bad parameters get 400, unknown runs (or runs with a file linked from outside the logdir) 404,
unreadable files 500, and any other failure a 500 without details (they go to the log); every
answer is JSON, sent through TensorBoard's `http_util.Respond` (nosniff, no caching, gzip when
the browser takes it).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from typing import Any

from tensorboard.backend import http_util
from werkzeug import wrappers

from tb_plugin import metadata
from tb_plugin.store import BadRequest, Corrupt, NotFound, Store

logger = logging.getLogger(__name__)

MAX_LIMIT = 20_000
MAX_K = 1_000
MAX_PARAM = 1_000  # characters of any one query parameter
LEVELS = metadata.LEVELS

Handler = Callable[[Store, Any], Any]


def _json(request: wrappers.Request, status: int, body: Any) -> wrappers.Response:
    text = json.dumps(body, default=_plain, allow_nan=False)
    return http_util.Respond(request, text, "application/json", code=status)


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    return str(value)


def _clean(value: Any) -> Any:
    """JSON has no NaN or infinity: they become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def _int(args: Any, name: str, default: int, lo: int, hi: int) -> int:
    raw = args.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(f"{name} must be a whole number, got {raw[:40]!r}") from None
    if not lo <= value <= hi:
        raise BadRequest(f"{name} must be in [{lo}, {hi}], got {value}")
    return value


def app(store: Store, handler: Handler) -> Callable[..., Any]:
    """A WSGI app calling `handler(store, request.args)` and answering its result as JSON."""

    @wrappers.Request.application
    def serve(request: wrappers.Request) -> wrappers.Response:
        try:
            if any(len(v) > MAX_PARAM for v in request.args.values()):
                raise BadRequest("a parameter is too long")
            return _json(request, 200, _clean(handler(store, request.args)))
        except BadRequest as e:
            return _json(request, 400, {"error": str(e)})
        except NotFound as e:
            return _json(request, 404, {"error": str(e)})
        except Corrupt as e:
            return _json(request, 500, {"error": str(e)})
        except Exception:  # a bug here: logged for TensorBoard's console, never shown
            logger.exception("tf_stitch tab: %s failed", request.path)
            body = {"error": "internal error in the tf_stitch tab (see the log)"}
            return _json(request, 500, body)

    return serve


def runs(store: Store, args: Any) -> Any:
    return store.runs()


def meta(store: Store, args: Any) -> Any:
    run = args.get("run")
    data = store.meta(run)
    data["xprof_trace"] = store.xplane_exists(run)
    return data


def spans(store: Store, args: Any) -> Any:
    profile = store.profile(args.get("run"))
    steps = int(profile.spans.step.max()) + 1 if len(profile.spans) else 0
    step = _int(args, "step", 0, 0, max(steps - 1, 0))
    offset = _int(args, "offset", 0, 0, 10**9)
    limit = _int(args, "limit", 2_000, 1, MAX_LIMIT)
    wanted = [lv for lv in (args.get("levels") or ",".join(LEVELS)).split(",") if lv]
    unknown = [lv for lv in wanted if lv not in LEVELS]
    if unknown:
        raise BadRequest(f"unknown level(s) {unknown}; levels are {list(LEVELS)}")
    rows = profile.spans[(profile.spans.step == step) & profile.spans.level.isin(wanted)]
    page = rows.iloc[offset : offset + limit]
    return {
        "run": args.get("run"),
        "step": step,
        "steps": steps,
        "total": len(rows),
        "offset": offset,
        "levels": list(LEVELS),  # outermost first: the tab draws them in this order
        "spans": page.to_dict("records"),
    }


def top(store: Store, args: Any) -> Any:
    profile = store.profile(args.get("run"))
    level = args.get("level") or "op"
    if level not in LEVELS:
        raise BadRequest(f"unknown level {level!r}; levels are {list(LEVELS)}")
    k = _int(args, "k", 20, 1, MAX_K)
    if not (profile.spans.level == level).any():
        return {"level": level, "rows": []}
    table = profile.table(level).head(k)
    return {"level": level, "rows": table.to_dict("records")}


def kernels(store: Store, args: Any) -> Any:
    profile = store.profile(args.get("run"))
    return {"kernels": profile.kernels}


def decisions(store: Store, args: Any) -> Any:
    profile = store.profile(args.get("run"))
    return {"decisions": profile.decisions}


def bench(store: Store, args: Any) -> Any:
    return store.bench(args.get("run"))


ROUTES: dict[str, Handler] = {
    "/runs": runs,
    "/meta": meta,
    "/spans": spans,
    "/top": top,
    "/kernels": kernels,
    "/decisions": decisions,
    "/bench": bench,
}
