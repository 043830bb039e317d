"""Per-layer numerics shared by the backends' `debug` functions: `sqnr` (sqnr_db, no torch),
metrics, range diagnostics, recorded graph values, where the error starts and which layers add
it, and the report.

Modules are imported by their own names; this package imports nothing."""
