"""Model sources behind `model_source.load`: one module per MODEL prefix (et:, hf:, tv:), and what they build (`model`)."""
