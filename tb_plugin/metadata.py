"""Names shared by the plugin and the writers of its data."""

PLUGIN_NAME = "tf_stitch"
# Runs with tf_stitch data keep them under <logdir>/<run>/plugins/tf_stitch/.
PLUGIN_DIR = "plugins/tf_stitch"
