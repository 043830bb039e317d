"""The pass framework: write a pass that declares its ops (`targeted_pass`), match them in a graph
(`op_matching`, `discovery`), run passes in order with a report and a verify mode (`pipeline`,
`compare`).

Modules are imported by their own names; this package imports nothing."""
