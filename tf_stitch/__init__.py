"""tf_stitch: deep kernel fusion (FusionStitching / AStitch) and across-stack profiling for
TensorFlow. The public API, nothing else."""

from tf_stitch.convert import ConversionError, Converter, convert_saved_model
from tf_stitch.graph.freeze import VariableWriteError
from tf_stitch.keras_switch import stitch, unstitch
from tf_stitch.launches import LaunchReport, count_launches
from tf_stitch.optimize import OptimizedFunction, explain, function, generated_code, optimize
from tf_stitch.profiler.api import ProfileError, profile
from tf_stitch.profiler.profile import Profile
from tf_stitch.runtime import op_library as _op_library

# The StitchedKernel op is registered on import, so that `tf.saved_model.load` can read
# stitched SavedModels; without a packaged op library or a compiler, it is done (with a clear
# error) when first needed instead.
_op_library.load_if_possible()

__version__ = "0.1.0"

__all__ = [
    "ConversionError",
    "Converter",
    "LaunchReport",
    "OptimizedFunction",
    "Profile",
    "ProfileError",
    "VariableWriteError",
    "convert_saved_model",
    "count_launches",
    "explain",
    "function",
    "generated_code",
    "optimize",
    "profile",
    "stitch",
    "unstitch",
]
