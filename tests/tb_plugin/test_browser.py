"""The tab in a real browser: a real `tensorboard` on 127.0.0.1, headless Chromium (Debian's,
driven by Playwright; never a browser download), a profile picked, the timeline, the tables
and the launch-count chart checked against the data, a fusion group opened, a screenshot
saved (also to $TF_STITCH_SCREENSHOT, which is how docs/tf_stitch_tab.png is made)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tf_stitch.profiler.store.profile import Profile

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM), reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)"
)


@pytest.fixture
def tensorboard(tab_logdir: Path) -> Iterator[str]:
    with _tensorboard(tab_logdir) as url:
        yield url


@contextlib.contextmanager
def _tensorboard(logdir: Path) -> Iterator[str]:
    """A real `tensorboard` on 127.0.0.1 and a free port; yields its URL."""
    command = [
        sys.executable,
        "-m",
        "tensorboard.main",
        "--logdir",
        str(logdir),
        "--host",
        "127.0.0.1",
        "--port",
        "0",
    ]
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        deadline = time.monotonic() + 120
        url = None
        assert proc.stderr is not None
        while url is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line and proc.poll() is not None:
                break
            found = re.search(r"(http://127\.0\.0\.1:\d+)/", line)
            url = found.group(1) if found else None
        assert url, "tensorboard did not start"
        # Keep reading its log, so that a full pipe never blocks it.
        threading.Thread(target=proc.stderr.read, daemon=True).start()
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_tab_renders_a_profile_and_launch_counts(
    tensorboard: str, tab_logdir: Path, tmp_path: Path
) -> None:
    playwright = pytest.importorskip("playwright.sync_api")
    (bench_run,) = [p for p in tab_logdir.iterdir() if p.name.startswith("bench_")]
    bench = json.loads((bench_run / "plugins" / "tf_stitch" / "bench.json").read_text())
    with playwright.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path / "profile"),
            executable_path=CHROMIUM,
            headless=True,
            args=FLAGS,
            viewport={"width": 1400, "height": 1800},
        )
        try:
            page = context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"{tensorboard}/#tf_stitch", wait_until="networkidle")
            tab = page.frame_locator("iframe").first
            tab.locator("#profile-picker").select_option("opt")
            spans = tab.locator("#timeline-svg rect.span")
            spans.first.wait_for(timeout=30_000)
            levels = {spans.nth(i).get_attribute("data-level") for i in range(spans.count())}
            assert {"model", "layer", "op", "kernel"} <= levels
            profile = Profile.load(tab_logdir, "opt")
            # the verdict on the profile's intervals, as print(p) gives it
            stability = tab.locator("#stability")
            assert stability.inner_text() == profile.meta["stability"]["message"]
            step0 = profile.spans[profile.spans.step == 0]
            assert spans.count() == len(step0)  # every span of the step is drawn
            tab.locator("#top-op tr").nth(1).wait_for()
            top_op = tab.locator("#top-op").inner_text()
            expected = profile.table("op").iloc[0]
            assert expected["name"] in top_op and f"{expected.corrected_ns / 1e6:.3f}" in top_op
            for column in ("tf", "xla_cpu", "tf_stitch_cpu"):
                bar = tab.locator(f'#bench-chart rect[data-workload="lr"][data-column="{column}"]')
                assert bar.get_attribute("data-value") == str(
                    bench["workloads"]["lr"]["kernels"][column]
                )
            tab.locator("#kernel-list li").first.click()
            assert "ts_run" in tab.locator("#kernel-source").inner_text()
            first = profile.kernels[0]
            assert first["members"][0] in tab.locator("#kernel-members").inner_text()
            # the decisions in explain()'s order, the first one first
            decisions = tab.locator("#fusion-decisions tr")
            assert decisions.count() == len(profile.decisions) + 1  # and the header
            assert profile.decisions[0]["subject"] in decisions.nth(1).inner_text()
            shot = tmp_path / "tf_stitch_tab.png"
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 10_000
            assert errors == []  # the corrupt run is an error message, not a script error

            dark = context.new_page()
            dark.emulate_media(color_scheme="dark")
            dark.goto(f"{tensorboard}/#tf_stitch", wait_until="networkidle")
            body = dark.frame_locator("iframe").first.locator("body")
            body.locator("#controls").wait_for()
            background = body.evaluate("b => getComputedStyle(b).backgroundColor")
            assert background == "rgb(32, 33, 36)"  # the dark theme's background
            if os.environ.get("TF_STITCH_SCREENSHOT"):
                shutil.copy(shot, os.environ["TF_STITCH_SCREENSHOT"])
        finally:
            context.close()


def test_an_empty_logdir_says_what_to_run(tmp_path: Path) -> None:
    playwright = pytest.importorskip("playwright.sync_api")
    with _tensorboard(tmp_path / "empty") as url, playwright.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=CHROMIUM, headless=True, args=FLAGS
        )
        try:
            page = context.new_page()
            page.goto(f"{url}/data/plugin_entry.html?name=tf_stitch", wait_until="networkidle")
            text = page.locator("#empty-state").inner_text()
            assert "No tf_stitch data in this logdir" in text and "tf-stitch profile" in text
        finally:
            context.close()
