"""Release checks for the built wheels."""
