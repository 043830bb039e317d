"""The CLI's backends, one sub-package each, registered in `lowerkit.cli.targets`."""
