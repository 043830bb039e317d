"""Per-layer numerics of an Arm lowering: float eager vs the fake-quantized torch program vs the
TOSA reference model's intermediate tensors (`debug_arm`)."""
