"""tf_stitch's version, in one place: the package exports it, profiles record it, converted
SavedModels name it."""

__version__ = "0.1.0"
