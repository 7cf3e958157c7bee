"""The handlers of the verbs that drive the device model and the real target (`msbench predict`, `measure`,
`calibrate`) and of `msbench list workloads` (summary.py, sized by the device model's FLOP counter):
application code, above `hardware` (they read the CLI's cell options, run the runner or compile graphs)."""
