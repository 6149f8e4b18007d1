"""SavedModel conversion (`tf_stitch.Converter`, `tf_stitch.convert_saved_model`)."""

from tf_stitch.convert.converter import Converter, convert_saved_model
from tf_stitch.convert.inputs import ConversionError

__all__ = ["ConversionError", "Converter", "convert_saved_model"]
