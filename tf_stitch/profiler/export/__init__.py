"""A profile written out for other tools: Chrome trace JSON (`chrome.py`), OTLP traces
(`otlp.py`), and its levels added to the TF profiler's own xplane.pb (`xplane_levels.py`).
Reading xplane files is `profiler/trace/xplane.py`."""
