"""tf_stitch: deep kernel fusion (FusionStitching / AStitch) and across-stack profiling for
TensorFlow. The public API, nothing else."""

from tf_stitch.launches import LaunchReport, count_launches
from tf_stitch.optimize import OptimizedFunction, explain, function, generated_code, optimize
from tf_stitch.profiler.api import ProfileError, profile
from tf_stitch.profiler.profile import Profile

__version__ = "0.1.0"

__all__ = [
    "LaunchReport",
    "OptimizedFunction",
    "Profile",
    "ProfileError",
    "count_launches",
    "explain",
    "function",
    "generated_code",
    "optimize",
    "profile",
]
