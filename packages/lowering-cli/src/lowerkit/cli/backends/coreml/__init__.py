"""The Core ML backend of the CLI (`backend.COREML`): its targets, options, verify (`verify`)
and payload reading (`payload`)."""
