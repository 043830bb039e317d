"""Accelerations of torch / ExecuTorch internals: scopes that patch upstream (`patching`), only on
the versions they were proven on (`versions`), to give the same result faster.

The two entry scopes are `lowering.accelerated_lowering` and
`quantization.accelerated_quantization`; each other module but `replay_engine` (what the replay
accelerations share) is one acceleration and defines one `Patch`, named after the module
(`cheaper_replay`, `fake_cache`, `signature_lookups`, `retrace_skip` over `local_decomposition`
and `lazy_copies`, `cia_scan`, `verified_graphs`, `pattern_skip`, `shared_provenance`,
`settled_heap`, `deferred_recompile`, `deferred_export`, `histogram_search`,
`partition_reachability`, `compiled_code`, `attribute_names`, `dead_code`). `table` lists them: the scopes that
hold each, its stage and the upstream names it replaces (``python -m
lowerkit.pass_infra.accelerations``).

Modules are imported by their own names; this package imports nothing."""
