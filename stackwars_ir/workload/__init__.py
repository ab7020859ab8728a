"""Workload: a model made real (the typed request, its file names, weights, inputs, argument values)."""
from ..common.routes import EXPORTERS, ROUTES, STEPS, Step  # noqa: F401 (workload's API)
from .prepared import (  # noqa: F401
    Argument, Exact, Workload, argument_values, float64_output, keep_prepared, perturb, prepare, prepare_values,
)
from .request import (  # noqa: F401
    CAPTURE_REVISION, DTYPES, FRAMEWORKS, Request, batch_list, model_named, stem, target_paths,
)
from .values import FLOAT64_BYTES, as_float64, float64_copy, jax_inputs, leaf_name  # noqa: F401
