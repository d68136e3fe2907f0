"""Hybrid code index: discover → chunk → lexical + dense → store → search. Never imports `bridge`."""
