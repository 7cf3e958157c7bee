"""The matrix files that ship with msbench (`msbench run` takes any matrix file; these are the suite's own).

A package so that an installed msbench finds them through importlib.resources (msbench.resources), e.g.
`msbench.resources.suite_path("matrices/smoke.toml")`.
"""
