"""``ckptprof watch``: observe a real server's boot from outside - its rank processes' counters in /proc, the page
cache of its checkpoint's shards, its log - and keep what was seen as a session (docs/watch.md).

Imports neither the loader nor the command line: it reads a server, it never replays one.
"""
