"""Targets: real MindSpore runs (`hardware.mindspore`) and the deterministic device model (`hardware.model`)."""
