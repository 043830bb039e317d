"""Per-layer numerics of an Arm lowering: float eager vs the fake-quantized torch program vs the
TOSA reference model's intermediate tensors (`debug_arm`), and which pass of the Arm pipeline
first changes the outputs (`bisect_passes`)."""
