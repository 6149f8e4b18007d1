"""A profile's tables and their store in a logdir: `Profile` (`profile.py`: the spans and ops
tables and `meta`, the tables per level, the summary) and its files under
`<logdir>/plugins/tf_stitch/<run>/`, which the TensorBoard tab (`tb_plugin/`) reads."""
