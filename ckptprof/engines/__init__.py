"""Engines and their releases as data: what each SGLang release line loads by default, which flags it accepts,
how a release is recognised, and what each engine writes in its boot logs (sglang_log, vllm_log: one row per line
a release writes; log_rules says what a row means; log_bars the progress bars). Pure data and small pure
functions; imports nothing else from ckptprof, so the replay, the analysis, the CLI and the boot-log reader can all
read it."""
