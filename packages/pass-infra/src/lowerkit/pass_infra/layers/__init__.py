"""Per-layer numerics shared by the backends' `debug` functions: metrics, range diagnostics,
recorded graph values, where the error starts and which layers add it, and the report."""
