from __future__ import annotations

import json
from pathlib import Path

import pytest

from bridge.errors import BridgeError, QuestionsError
from bridge.measure.evaluate import (
    Question,
    QuestionResult,
    Span,
    aggregate,
    load_questions,
    ndcg_at,
    ranked_files,
    recall_at,
    reciprocal_rank,
    span_recall,
)

# 1 / log2(3), the gain of a relevant file at rank 2
RANK_2_GAIN = 0.6309297535714575


def write_lines(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "questions.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def question_line(**fields: object) -> str:
    base: dict[str, object] = {"id": "q1", "query": "where is x?", "gold_files": ["a.py"]}
    base.update(fields)
    return json.dumps(base)


# --- ranked_files --------------------------------------------------------------------------


def test_ranked_files_keeps_the_first_occurrence_of_each_file() -> None:
    assert ranked_files(["b.py", "a.py", "b.py", "c.py", "a.py"]) == ["b.py", "a.py", "c.py"]


def test_ranked_files_of_no_hits_is_empty() -> None:
    assert ranked_files([]) == []


# --- recall@k ------------------------------------------------------------------------------


def test_recall_with_one_gold_file_counts_it_only_inside_the_cutoff() -> None:
    ranked = ["x.py", "gold.py", "y.py"]
    assert recall_at(ranked, {"gold.py"}, 1) == 0.0
    assert recall_at(ranked, {"gold.py"}, 2) == 1.0
    assert recall_at(ranked, {"gold.py"}, 10) == 1.0


def test_recall_with_several_gold_files_is_the_fraction_found() -> None:
    ranked = ["a.py", "b.py", "c.py", "d.py"]
    gold = ("a.py", "c.py", "missing.py")
    assert recall_at(ranked, gold, 1) == pytest.approx(1 / 3)
    assert recall_at(ranked, gold, 2) == pytest.approx(1 / 3)
    assert recall_at(ranked, gold, 3) == pytest.approx(2 / 3)
    assert recall_at(ranked, gold, 10) == pytest.approx(2 / 3)


def test_recall_counts_a_gold_file_listed_twice_once() -> None:
    assert recall_at(["a.py"], ["a.py", "a.py"], 1) == 1.0


def test_recall_refuses_an_empty_gold_set_and_a_cutoff_below_one() -> None:
    with pytest.raises(ValueError, match="gold"):
        recall_at(["a.py"], [], 1)
    with pytest.raises(ValueError, match="k must be"):
        recall_at(["a.py"], ["a.py"], 0)


# --- MRR -----------------------------------------------------------------------------------


def test_reciprocal_rank_is_one_over_the_rank_of_the_first_gold_file() -> None:
    assert reciprocal_rank(["gold.py", "x.py"], {"gold.py"}) == 1.0
    assert reciprocal_rank(["x.py", "y.py", "gold.py"], {"gold.py"}) == pytest.approx(1 / 3)
    assert reciprocal_rank(["x.py", "g2.py", "g1.py"], {"g1.py", "g2.py"}) == 0.5


def test_reciprocal_rank_is_zero_when_no_gold_file_is_ranked() -> None:
    assert reciprocal_rank(["x.py", "y.py"], {"gold.py"}) == 0.0
    assert reciprocal_rank([], {"gold.py"}) == 0.0


# --- nDCG ----------------------------------------------------------------------------------


def test_ndcg_of_a_single_gold_file_at_rank_two_is_one_over_log2_of_three() -> None:
    assert ndcg_at(["x.py", "gold.py"], {"gold.py"}, 10) == pytest.approx(RANK_2_GAIN)


def test_ndcg_of_two_gold_files_at_ranks_one_and_three() -> None:
    # DCG = 1 + 1/log2(4) = 1.5; ideal DCG = 1 + 1/log2(3)
    assert ndcg_at(["a.py", "x.py", "b.py"], {"a.py", "b.py"}, 10) == pytest.approx(
        0.9197207891481876
    )


def test_ndcg_ignores_gold_files_below_the_cutoff() -> None:
    ranked = ["x.py", "y.py", "a.py", "b.py"]
    assert ndcg_at(ranked, {"a.py", "b.py"}, 2) == 0.0
    # DCG = 1/log2(4) = 0.5; ideal keeps both gold files since k = 3 >= 2
    assert ndcg_at(ranked, {"a.py", "b.py"}, 3) == pytest.approx(0.3065735963827292)


def test_ndcg_ideal_is_limited_by_the_cutoff_when_gold_is_larger() -> None:
    assert ndcg_at(["a.py", "x.py"], {"a.py", "b.py", "c.py"}, 1) == 1.0


def test_ndcg_of_a_perfect_ranking_is_one_even_with_a_repeated_file() -> None:
    assert ndcg_at(["a.py", "b.py"], {"a.py", "b.py"}, 10) == pytest.approx(1.0)
    assert ndcg_at(["a.py", "a.py"], {"a.py"}, 10) == pytest.approx(1.0)


# --- span recall ---------------------------------------------------------------------------


def test_span_recall_counts_the_gold_lines_a_hit_overlaps() -> None:
    gold = [Span("f.py", 10, 19)]
    assert span_recall([Span("f.py", 15, 24)], gold) == pytest.approx(0.5)
    assert span_recall([Span("f.py", 1, 100)], gold) == 1.0


def test_span_recall_does_not_count_lines_covered_by_two_hits_twice() -> None:
    hits = [Span("f.py", 10, 14), Span("f.py", 12, 16)]
    assert span_recall(hits, [Span("f.py", 10, 19)]) == pytest.approx(0.7)


def test_span_recall_takes_the_union_of_overlapping_gold_spans() -> None:
    gold = [Span("f.py", 1, 10), Span("f.py", 6, 15)]
    assert span_recall([Span("f.py", 1, 5)], gold) == pytest.approx(5 / 15)


def test_span_recall_only_credits_hits_in_the_same_file() -> None:
    gold = [Span("a.py", 1, 4), Span("b.py", 1, 6)]
    assert span_recall([Span("c.py", 1, 100)], gold) == 0.0
    assert span_recall([Span("a.py", 3, 4), Span("b.py", 1, 1)], gold) == pytest.approx(0.3)


def test_span_recall_refuses_an_empty_gold_set() -> None:
    with pytest.raises(ValueError, match="gold span"):
        span_recall([Span("a.py", 1, 2)], [])


# --- aggregate -----------------------------------------------------------------------------


def result(gold: str, ranked: list[str], latency_ms: float, **fields: object) -> QuestionResult:
    question = Question(id=gold, query="q", gold_files=(gold,), **fields)  # type: ignore[arg-type]
    spans = tuple(Span(path, 1, 10) for path in ranked)
    return QuestionResult(question=question, ranked_files=tuple(ranked), spans=spans,
                          latency_ms=latency_ms)


def test_aggregate_averages_every_metric_over_the_questions() -> None:
    first = result("a.py", ["a.py", "x.py"], 3.0)
    sixth = result("b.py", ["x1", "x2", "x3", "x4", "x5", "b.py"], 5.0)
    metrics = aggregate("lexical", [first, sixth])
    assert metrics.mode == "lexical"
    assert metrics.n == 2
    assert metrics.recall_at_1 == 0.5
    assert metrics.recall_at_5 == 0.5
    assert metrics.recall_at_10 == 1.0
    assert metrics.mrr == pytest.approx((1 + 1 / 6) / 2)
    assert metrics.ndcg_at_10 == pytest.approx(0.6781035935540111)  # (1 + 1/log2(7)) / 2
    assert metrics.span_recall is None
    assert metrics.median_latency_ms == 4.0


def test_aggregate_span_recall_uses_only_questions_with_gold_spans() -> None:
    with_spans = result("a.py", ["a.py"], 1.0, gold_spans=(Span("a.py", 6, 15),))
    without = result("b.py", ["x.py"], 2.0)
    metrics = aggregate("hybrid", [with_spans, without])
    assert metrics.span_recall == pytest.approx(0.5)  # hit a.py:1-10 covers lines 6-10 of 10


def test_aggregate_refuses_an_empty_result_list() -> None:
    with pytest.raises(ValueError, match="hybrid"):
        aggregate("hybrid", [])


def test_question_result_exposes_the_id_of_its_question() -> None:
    assert result("a.py", [], 1.0).question_id == "a.py"


# --- loading -------------------------------------------------------------------------------


def test_load_questions_reads_every_field_and_ignores_extra_keys(tmp_path: Path) -> None:
    line = question_line(
        gold_files=["src/a.py", "src/b.py"],
        gold_spans=[{"path": "src/a.py", "start_line": 3, "end_line": 9}],
        answer_contains=["retry"],
        repo="psf/requests",
        base_commit="abc123",
        difficulty="hard",
    )
    path = write_lines(tmp_path, line, "", question_line(id="q2"))
    first, second = load_questions(path)
    assert first == Question(
        id="q1",
        query="where is x?",
        gold_files=("src/a.py", "src/b.py"),
        gold_spans=(Span("src/a.py", 3, 9),),
        answer_contains=("retry",),
        repo="psf/requests",
        base_commit="abc123",
    )
    assert second == Question(id="q2", query="where is x?", gold_files=("a.py",))


def test_a_line_that_is_not_json_is_reported_with_file_and_line_number(tmp_path: Path) -> None:
    path = write_lines(tmp_path, question_line(), "{not json")
    with pytest.raises(QuestionsError, match=rf"{path.name}:2: not valid JSON"):
        load_questions(path)


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (json.dumps({"id": "q1", "query": "x"}), "'gold_files' is missing"),
        (question_line(gold_files=[]), "'gold_files' is empty"),
        (question_line(gold_files="a.py"), "'gold_files' must be a list"),
        (question_line(gold_files=["a.py", 3]), "'gold_files' must be a list of non-empty"),
        (question_line(id=7), "'id' must be a non-empty string"),
        (question_line(query=""), "'query' must be a non-empty string"),
        (question_line(repo=["x"]), "'repo' must be a non-empty string"),
        (question_line(gold_spans=[{"path": "a.py", "start_line": 5, "end_line": 4}]),
         "start_line <= end_line"),
        (question_line(gold_spans=[{"path": "a.py", "start_line": True, "end_line": 4}]),
         "start_line <= end_line"),
        (question_line(gold_spans=["a.py:1-4"]), "'gold_spans' must be an object"),
        (question_line(answer_contains=[""]), "'answer_contains' must be a list"),
        ("[1, 2]", "expected a JSON object"),
    ],
)
def test_an_invalid_question_names_the_line_and_the_problem(
    tmp_path: Path, line: str, problem: str
) -> None:
    path = write_lines(tmp_path, question_line(id="ok"), line)
    with pytest.raises(QuestionsError) as caught:
        load_questions(path)
    message = str(caught.value)
    assert f"{path}:2: " in message
    assert problem in message
    assert "\n" not in message


def test_a_duplicate_id_is_an_error(tmp_path: Path) -> None:
    path = write_lines(tmp_path, question_line(), question_line())
    with pytest.raises(QuestionsError, match=r":2: duplicate id 'q1'"):
        load_questions(path)


def test_a_missing_or_empty_questions_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(QuestionsError, match="cannot read questions file"):
        load_questions(tmp_path / "absent.jsonl")
    with pytest.raises(QuestionsError, match="has no questions"):
        load_questions(write_lines(tmp_path, "", "  "))


def test_questions_errors_belong_to_the_bridge_error_tree() -> None:
    assert issubclass(QuestionsError, BridgeError)


# --- running a retriever and checking answers -----------------------------------------------


def test_a_search_is_scored_by_first_hit_per_file_and_spans_up_to_the_cutoff() -> None:
    from bridge.measure.evaluate import score_search

    question = Question("q", "x", ("b.py",))
    hits = [Span("a.py", 1, 5), Span("b.py", 3, 9), Span("a.py", 20, 30)]
    result = score_search(question, hits, 4.5, span_cutoff=2)
    assert result.ranked_files == ("a.py", "b.py")
    assert result.spans == (Span("a.py", 1, 5), Span("b.py", 3, 9))
    assert result.latency_ms == 4.5


def test_answer_contains_ignores_case_per_expected_string() -> None:
    from bridge.measure.evaluate import answer_contains

    assert answer_contains("It uses an SQLite cache.", ["sqlite", "faiss"]) == (True, False)


def test_answers_are_only_asked_for_questions_that_expect_strings_and_summarized_honestly() -> None:
    from bridge.measure.evaluate import check_answers, summarize_answers

    questions = [
        Question("a", "where?", ("a.py",), answer_contains=("alpha", "beta")),
        Question("b", "what?", ("b.py",)),
        Question("c", "how?", ("c.py",), answer_contains=("gamma",)),
    ]
    replies = {"where?": ("alpha only", 100, 10.0), "how?": ("Gamma!", 300, 30.0)}
    checks = check_answers("retrieval", questions, lambda q: replies[q])
    assert [c.question_id for c in checks] == ["a", "c"]
    summary = summarize_answers("retrieval", checks)
    assert summary.contains_rate == pytest.approx(2 / 3)
    assert summary.all_contained_rate == pytest.approx(0.5)
    assert (summary.mean_prompt_tokens, summary.median_total_ms) == (200.0, 20.0)


def test_gold_spans_named_per_file_as_shared_bench_writes_them_load_without_lines(tmp_path: Path) -> None:
    named = {"id": "a", "query": "q", "gold_files": ["m.py"], "gold_spans": {"m.py": ["Store.save", "imports"]},
             "edit_lines": {"m.py": [3, 4]}}
    (question,) = load_questions(write_lines(tmp_path, json.dumps(named)))
    assert question.gold_files == ("m.py",) and question.gold_spans == ()
    named["gold_spans"] = {"m.py": "Store.save"}
    with pytest.raises(QuestionsError, match="maps each path to a list of definition names"):
        load_questions(write_lines(tmp_path, json.dumps(named)))
