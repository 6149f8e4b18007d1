"""A trace read into spans: the TF profiler's xplane files as events (`xplane.py`), the events
that record an op's run (`op_events.py`), the spans of a traced step (`spans.py`; layers from
name scopes, `layers.py`; GPU kernels joined to their ops, `gpu_kernels.py`), spans of
different runs merged into one tree (`merge.py`), interval arithmetic (`intervals.py`) and the
traced graph's ops with their shapes (`op_table.py`). Nothing here imports `tf_stitch.launches`,
which counts the op runs (`launches/op_launches.py`)."""
