"""`tf-stitch characterize`: a model zoo profiled model by model (`campaign.py`, each model in
its own process by `worker.py`), the analyses gathered into tables (`analyse.py`), and the
report (`report.py`, `plots.py`), with the campaign's files in any `tf.io.gfile` logdir
(`storage.py`)."""
