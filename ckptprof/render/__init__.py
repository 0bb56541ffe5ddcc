"""Renderers: one module per output format, each reading only a Session."""
