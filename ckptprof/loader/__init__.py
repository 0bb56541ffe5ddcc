"""The replay's machinery: options, plan, rank processes, the recorder and the loading strategies.

The Python API is :func:`ckptprof.replay` (``ckptprof/api.py``); this package holds the stages it runs.
"""
