"""bench/answer_questions.jsonl: the questions about this repository point at files it has."""

from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_every_gold_file_of_a_question_about_this_repository_exists() -> None:
    rows = [json.loads(line) for line in (REPO / "bench" / "answer_questions.jsonl").read_text().splitlines() if line]
    gold = [(row["id"], path) for row in rows if row["repo"] == "self" for path in row["gold_files"]]
    assert gold
    assert [(qid, path) for qid, path in gold if not (REPO / path).is_file()] == []
