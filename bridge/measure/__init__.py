"""Measurements: retrieval vs full-context cost (`compare`), retrieval and answer quality
(`evaluate` metrics, `intervals` that say how sure they are, `runs` that produce them), and the cost
chart (`plot`)."""
