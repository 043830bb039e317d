"""Side-by-side benchmarks: lowerkit against upstream, in one run."""
