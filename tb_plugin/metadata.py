"""Names shared by the plugin and the writers of its data."""

PLUGIN_NAME = "tf_stitch"
# Benchmark runs keep their data under <logdir>/<run>/plugins/tf_stitch/; profiles under
# <logdir>/plugins/tf_stitch/<run>/ (next to XProf's <logdir>/plugins/profile/<run>/).
PLUGIN_DIR = "plugins/tf_stitch"
PROFILES_DIR = PLUGIN_DIR  # below the logdir itself, one folder per profile run
