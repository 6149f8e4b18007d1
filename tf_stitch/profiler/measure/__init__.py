"""Running and timing the model: the runs of one profile (`runs.py`, `measure`), the leveled runs
they are made of, untraced and traced in interleaved blocks (`leveled.py`), latency measured
interleaved (`timing.py`), functions instantiated anew so that every op is traced
(`fresh_executor.py`), the traced threads' CPU time beside their wall time (`thread_cpu.py`),
confidence intervals and what the machine did meanwhile (`stability.py`), and the machine's
peaks for the roofline (`peaks.py`). Reading a trace into spans is `profiler/trace/`."""
