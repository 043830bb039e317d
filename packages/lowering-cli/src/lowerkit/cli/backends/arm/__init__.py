"""The Arm backend of the CLI: TOSA, Ethos-U and VGF targets (`backend.ARM`), their options,
verify (`verify`), NPU report (`npu`) and Vela payload reading (`vela_stream`)."""
