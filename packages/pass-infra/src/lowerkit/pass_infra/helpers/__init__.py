"""Small helpers every lowerkit package shares: `suggest` (did_you_mean) and `files`
(write_bytes_atomically), both without torch; `inputs`, `graph_ops`, `results`.

Modules are imported by their own names; this package imports nothing."""
