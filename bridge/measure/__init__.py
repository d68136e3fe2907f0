"""Measurements: retrieval vs full-context cost (`compare`), retrieval and answer quality
(`evaluate` metrics, `runs` that produce them), and the cost chart (`plot`)."""
