"""The handlers of the verbs that drive the device model and the real target (`msbench predict`, `measure`,
`calibrate`): application code, above `hardware` (they read the CLI's cell options and run the runner)."""
