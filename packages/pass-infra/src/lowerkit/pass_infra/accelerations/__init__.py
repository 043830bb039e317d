"""Accelerations of torch / ExecuTorch internals: scopes that patch upstream (`patching`), only on
the versions they were proven on (`versions`), to give the same result faster.

The two entry scopes are `lowering.accelerated_lowering` and
`quantization.accelerated_quantization`; each other module is one acceleration, named after the
`Patch` it defines (`cheaper_replay` over `replay_engine`, `fake_cache`, `retrace_skip` over
`local_decomposition`, `cia_scan`, `verified_graphs`, `pattern_skip`, `shared_provenance`,
`settled_heap`, `deferred_recompile`, `histogram_search`, `partition_reachability`, `compiled_code`,
`attribute_names`).

Modules are imported by their own names; this package imports nothing."""
