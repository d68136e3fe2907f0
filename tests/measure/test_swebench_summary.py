from __future__ import annotations

from bench.swebench import MODES, Record, markdown, summarize
from bridge.measure.evaluate import Question


def record(number: int, hybrid_first: bool) -> Record:
    """A question every mode ranks the same way, except hybrid, which finds the gold file first or second."""
    question = Question(f"q{number}", "x " * number, ("gold.py",), repo="owner/repo")
    ranked: dict[str, tuple[str, ...]] = {mode: ("other.py", "gold.py") for mode in MODES}
    ranked["hybrid"] = ("gold.py", "other.py") if hybrid_first else ("other.py", "gold.py")
    return Record(question, "repo@abc", ranked, {mode: 1.0 for mode in MODES}, gold_named=False)


def test_the_summary_gives_each_main_mode_an_interval_and_hybrid_its_paired_gains() -> None:
    records = [record(i, hybrid_first=i < 30) for i in range(40)]
    summary = summarize(records)
    value, low, high = summary["intervals"]["hybrid"]["recall_at_1"]
    assert value == summary["overall"]["hybrid"]["recall_at_1"] == 0.75
    assert low < value < high
    assert summary["intervals"]["lexical"]["recall_at_1"] == [0.0, 0.0, 0.0]
    gain, gain_low, _ = summary["differences"]["hybrid - lexical"]["recall_at_1"]
    assert gain == 0.75 and gain_low > 0.5
    assert summary["differences"]["hybrid - lexical"]["recall_at_5"] == [0.0, 0.0, 0.0]


def test_the_markdown_shows_the_intervals_and_the_differences() -> None:
    records = [record(i, hybrid_first=i % 2 == 0) for i in range(10)]
    meta = {"questions": 10, "trees": 1, "embedder": "static", "seconds": 1.0, "index_seconds": 0.0,
            "trees_built": 0, "command": "python -m bench.swebench"}
    text = markdown(summarize(records), meta)
    assert "### 95 % intervals" in text
    assert "| hybrid − lexical | +0.500 [+" in text
