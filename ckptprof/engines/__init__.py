"""Engines and their releases as data: what each SGLang release line loads by default, which flags it accepts,
and how a release is recognised. Pure data and small pure functions; imports nothing else from ckptprof, so the
replay, the analysis and the CLI can all read it."""
