"""Helpers and fakes shared by test modules (importable because pytest puts tests/ on sys.path)."""
