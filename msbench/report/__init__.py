"""`msbench report`: records (and asv results) read with pandas into knob effects, trade-offs,
best settings, the tuning-tip claims and a commit diff, rendered as Markdown and one HTML file.

Never imports MindSpore: a report reads records, it never runs a cell.
"""
