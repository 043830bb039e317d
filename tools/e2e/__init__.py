"""End-to-end sweeps of the lowerkit command over the zoo."""
