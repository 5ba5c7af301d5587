"""What every stage runs in: the stage shell, typed settings, the benchmark registry, files (io) and errors.

Each stage imports all of it, so dvc.yaml declares it as one dependency (``egoeval/core``). Nothing here names a
benchmark.
"""
