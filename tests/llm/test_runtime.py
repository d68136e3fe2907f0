from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from bridge.chat.lead import lead_text
from bridge.errors import BudgetError, GenerationError, ModelError, RuntimeUnavailable
from bridge.llm.gguf import bundled_model_path
from bridge.llm.llama import LlamaCppRuntime, _import_llama_cpp, default_threads
from bridge.llm.openai import OpenAICompatRuntime
from bridge.llm.runtime import SMALL_MODEL, Message, Runtime, TemplateOverhead, measure_overhead, resolve_gpu_layers
from bridge.llm.tokens import EstimateCounter, LlamaTokenCounter, TokenCounter, estimate_tokens
from index.tokenize import estimate_tokens as index_estimate

CODE = (Path(__file__).resolve().parents[2] / "bridge" / "chat" / "budget.py").read_text(encoding="utf-8")

# --- pure helpers ---------------------------------------------------------------------------


def test_auto_gpu_layers_offloads_everything_when_the_build_supports_it() -> None:
    assert resolve_gpu_layers("auto", 30, supported=True)[:2] == (-1, 30)


def test_auto_gpu_layers_stays_on_cpu_without_gpu_support_and_says_so() -> None:
    n_gpu, offloaded, note = resolve_gpu_layers("auto", 30, supported=False)
    assert (n_gpu, offloaded) == (0, 0)
    assert "no GPU support" in note


def test_explicit_gpu_layers_are_capped_at_the_model_depth() -> None:
    assert resolve_gpu_layers(12, 30, supported=True)[:2] == (12, 12)
    assert resolve_gpu_layers(99, 30, supported=True)[:2] == (99, 30)
    assert resolve_gpu_layers(12, 30, supported=False)[:2] == (0, 0)


def test_llama_cpp_gets_one_thread_per_two_usable_cpus_and_never_none() -> None:
    assert [default_threads(cpus) for cpus in (1, 2, 3, 16)] == [1, 1, 1, 8]
    assert default_threads() >= 1


def test_template_overhead_is_measured_from_rendered_conversations() -> None:
    def count(text: str) -> int:
        return len(text.split())

    def render(messages: Sequence[Message]) -> int:  # 5 tokens per message, 3 fixed
        return 3 + sum(5 + count(m.content) for m in messages)

    assert measure_overhead(render, count) == TemplateOverhead(per_message=5 + 2, fixed=3 + 4, per_join=1)


def test_a_file_that_is_not_gguf_fails_before_llama_cpp_sees_it(tmp_path: Path) -> None:
    path = tmp_path / "model.gguf"
    path.write_text("not a model")
    with pytest.raises(ModelError, match="is not a GGUF model"):
        LlamaCppRuntime(path)


# --- token counting -------------------------------------------------------------------------


def test_the_estimate_counter_counts_as_the_index_packs() -> None:
    counter = EstimateCounter()
    assert isinstance(counter, TokenCounter) and not counter.exact
    assert counter.count(CODE) == index_estimate(CODE) > 0


def vocab_counter() -> LlamaTokenCounter:
    # Through the runtime's import, which closes the /dev/null files llama_cpp opens (no warnings at exit).
    Llama = _import_llama_cpp().Llama

    return LlamaTokenCounter(Llama(model_path=str(bundled_model_path()), vocab_only=True, verbose=False))


def test_the_bundled_vocabulary_counts_special_tokens_as_one() -> None:
    counter = vocab_counter()
    assert counter.exact
    assert counter.count("<|im_start|>") == 1
    assert counter.count("") == 0


def test_the_estimate_over_counts_real_code() -> None:
    assert estimate_tokens(CODE) >= vocab_counter().count(CODE)


# --- a fake OpenAI-compatible server on 127.0.0.1 --------------------------------------------


class FakeLlamaServer(BaseHTTPRequestHandler):
    """llama-server's endpoints, with one token per word."""

    requests: list[str] = []
    bodies: list[dict[str, Any]] = []

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def _json(self, body: object, status: int = 200) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.requests.append(self.path)
        if self.path == "/props":
            self._json({"default_generation_settings": {"n_ctx": 512}})
        else:
            self._json({"error": "not found"}, 404)

    def do_POST(self) -> None:
        self.requests.append(self.path)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.bodies.append(body)
        if self.path == "/tokenize":
            self._json({"tokens": list(range(len(body["content"].split())))})
        elif self.path == "/apply-template":
            prompt = "".join(f"<s> {m['role']} : {m['content']} </s> " for m in body["messages"]) + "<s> assistant :"
            self._json({"prompt": prompt})
        elif self.path == "/v1/chat/completions":
            self._stream(body)
        else:
            self._json({"error": "not found"}, 404)

    def _stream(self, body: dict[str, Any]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        words = ["Paris", " is", " the", " capital", "."][: body["max_tokens"]]
        for word in words:
            self._event({"choices": [{"delta": {"content": word}, "finish_reason": None}]})
        timings = {"prompt_n": 20, "cache_n": 4, "prompt_ms": 40.0, "prompt_per_second": 500.0,
                   "predicted_n": len(words), "predicted_ms": 50.0, "predicted_per_second": 100.0}
        self._event({"choices": [{"delta": {}, "finish_reason": "stop"}], "timings": timings})
        self._event({"choices": [], "usage": {"prompt_tokens": 24, "completion_tokens": len(words)}})
        self.wfile.write(b"data: [DONE]\n\n")

    def _event(self, chunk: dict[str, Any]) -> None:
        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeLlamaServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def remote(server_url: str) -> Iterator[OpenAICompatRuntime]:
    FakeLlamaServer.requests = []
    FakeLlamaServer.bodies = []
    with OpenAICompatRuntime(server_url + "/v1") as runtime:
        yield runtime


QUESTION = [Message("system", "Answer briefly."), Message("user", "What is the capital of France?")]


def test_the_server_runtime_is_a_runtime(remote: OpenAICompatRuntime) -> None:
    runtime: Runtime = remote
    assert runtime.info.kind == "openai-compatible"


def test_the_server_runtime_picks_no_opening_and_refuses_to_continue_one(remote: OpenAICompatRuntime) -> None:
    assert remote.lead(QUESTION, ["parse_config"]) is None  # no portable grammar over the API
    with pytest.raises(ValueError, match="cannot continue a reply begun with a prefix"):
        remote.generate(QUESTION, max_tokens=4, prefix="`parse_config`")
    assert FakeLlamaServer.bodies == []  # refused before anything was sent


def test_the_server_reports_its_context_size(remote: OpenAICompatRuntime) -> None:
    assert remote.n_ctx == 512
    assert remote.info.notes == ()


def test_generation_streams_tokens_and_uses_the_server_timings(remote: OpenAICompatRuntime) -> None:
    pieces: list[str] = []
    g = remote.generate(QUESTION, max_tokens=16, on_token=pieces.append)
    assert pieces == ["Paris", " is", " the", " capital", "."]
    assert g.text == "Paris is the capital."
    assert (g.prompt_tokens, g.completion_tokens, g.cached_tokens) == (24, 5, 4)
    assert (g.prefill_ms, g.prefill_tokens_per_s, g.decode_tokens_per_s) == (40.0, 500.0, 100.0)
    assert g.total_ms > 0
    assert g.finish_reason == "stop"


def test_prompt_tokens_are_counted_with_the_servers_template_and_tokenizer(remote: OpenAICompatRuntime) -> None:
    # "<s> system : Answer briefly. </s> <s> user : What is ... France? </s> <s> assistant :" + BOS
    assert remote.count_messages(QUESTION) == 6 + 10 + 3 + 1
    assert remote.count_tokens("three little words") == 3
    assert remote.info.exact_tokens


def test_template_overhead_is_measured_against_the_server(remote: OpenAICompatRuntime) -> None:
    overhead = remote.template_overhead()
    assert overhead.per_message == 4 + 2  # "<s> role : ... </s>" adds four words per message, plus margin
    assert overhead.fixed == 3 + 1 + 4  # generation prompt, BOS, margin


def test_a_prompt_that_cannot_fit_is_refused_before_it_is_sent(remote: OpenAICompatRuntime) -> None:
    long = [Message("user", "word " * 600)]
    with pytest.raises(BudgetError, match="exceeds n_ctx 512"):
        remote.generate(long, max_tokens=16)
    assert "/v1/chat/completions" not in FakeLlamaServer.requests


def test_prefill_is_measured_with_prompt_caching_off(remote: OpenAICompatRuntime) -> None:
    assert remote.measure_prefill(100) == 40.0
    sent = FakeLlamaServer.bodies[-1]
    assert sent["cache_prompt"] is False and sent["max_tokens"] == 1
    assert 80 <= len(sent["messages"][0]["content"].split()) <= 100


def test_an_unreachable_server_is_one_clear_error() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    client = httpx.Client(transport=httpx.MockTransport(refuse))
    with pytest.raises(RuntimeUnavailable, match="no OpenAI-compatible server answering at http://h:1"):
        OpenAICompatRuntime("http://h:1", client=client)
    client.close()


# --- a server without llama-server's extras (Ollama-like), via MockTransport -----------------


def ollama_like(request: httpx.Request) -> httpx.Response:
    if request.url.path != "/v1/chat/completions":
        return httpx.Response(404, text="404 page not found")
    body = json.loads(request.content)
    if body["model"] == "missing":
        return httpx.Response(404, json={"error": {"message": "model 'missing' not found"}})
    events: list[dict[str, Any]] = [{"choices": [{"delta": {"content": w}}]} for w in ["Hi", " there"]]
    events.append({"choices": [{"delta": {}, "finish_reason": "length"}]})
    text = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    return httpx.Response(200, text=text, headers={"Content-Type": "text/event-stream"})


@pytest.fixture
def plain() -> Iterator[OpenAICompatRuntime]:
    client = httpx.Client(transport=httpx.MockTransport(ollama_like))
    yield OpenAICompatRuntime("http://ollama:11434", model="smollm2", client=client)
    client.close()


def test_without_props_the_context_is_assumed_and_reported(plain: OpenAICompatRuntime) -> None:
    assert plain.n_ctx == 2048
    assert any("assuming 2048" in note for note in plain.info.notes)


def test_without_tokenize_counts_are_conservative_estimates(plain: OpenAICompatRuntime) -> None:
    text = "def main():\n    return run(sys.argv)\n"
    assert plain.count_tokens(text) >= len(text) / 4
    assert plain.template_overhead().fixed >= 32
    assert plain.count_messages(QUESTION) > sum(plain.count_tokens(m.content) for m in QUESTION)
    assert not plain.info.exact_tokens
    assert any("estimates" in note for note in plain.info.notes)


def test_without_server_timings_time_to_first_token_is_the_prefill(plain: OpenAICompatRuntime) -> None:
    g = plain.generate(QUESTION, max_tokens=2)
    assert g.text == "Hi there"
    assert g.completion_tokens == 2
    assert g.finish_reason == "length"
    assert 0 < g.prefill_ms <= g.total_ms


def test_a_server_error_names_the_url_and_what_to_check() -> None:
    client = httpx.Client(transport=httpx.MockTransport(ollama_like))
    runtime = OpenAICompatRuntime("http://ollama:11434", model="missing", n_ctx=4096, client=client)
    with pytest.raises(GenerationError, match=r"http://ollama:11434/v1/chat/completions answered 404.*model name"):
        runtime.generate(QUESTION, max_tokens=4)
    client.close()


# --- the real bundled model -----------------------------------------------------------------


DECODE_PROBE = """
import sys
from llama_cpp import Llama
llama = Llama(model_path=sys.argv[1], n_ctx=64, verbose=False)
llama.eval(llama.tokenize(b"hello world", add_bos=False))
"""


@pytest.fixture(scope="module")
def smollm() -> Iterator[LlamaCppRuntime]:
    # A llama.cpp build that crashes in decode would kill the whole test session; probe it in a
    # child process first so the failure is one readable test error instead.
    command = [sys.executable, "-c", DECODE_PROBE, str(bundled_model_path())]
    probe = subprocess.run(command, capture_output=True, timeout=120, check=False)
    if probe.returncode < 0:
        pytest.fail(
            f"llama.cpp decode died with signal {-probe.returncode} in this llama-cpp-python build "
            f"(seen with GGML_NATIVE builds on AMX CPUs): reinstall it with CMAKE_ARGS=-DGGML_NATIVE=OFF"
        )
    with LlamaCppRuntime(n_ctx=2048) as runtime:
        yield runtime


@pytest.mark.slow
def test_the_bundled_model_generates_with_timings(smollm: LlamaCppRuntime) -> None:
    pieces: list[str] = []
    g = smollm.generate(QUESTION, max_tokens=16, on_token=pieces.append)
    assert g.text and "".join(pieces) == g.text
    assert 0 < g.completion_tokens <= 16
    assert g.prompt_tokens == smollm.count_messages(QUESTION)
    assert g.prefill_ms > 0 and g.prefill_tokens_per_s > 0 and g.decode_tokens_per_s > 0
    assert g.total_ms >= g.prefill_ms
    info = smollm.info
    assert (info.n_ctx, info.trained_context, info.cache_type) == (2048, 8192, "f16")


@pytest.mark.slow
def test_the_bundled_model_prefills_with_as_many_threads_as_it_decodes_with(smollm: LlamaCppRuntime) -> None:
    llama = smollm._llama
    assert llama.context_params.n_threads_batch == llama.context_params.n_threads == smollm.threads == default_threads()


@pytest.mark.slow
def test_a_begun_answer_is_continued_and_only_the_continuation_is_returned(smollm: LlamaCppRuntime) -> None:
    g = smollm.generate(QUESTION, max_tokens=8, prefix="The capital of France is")
    assert g.prompt_tokens == smollm.count_messages(QUESTION) + smollm.count_tokens("The capital of France is")
    assert "paris" in g.text.lower() and not g.text.startswith("The capital")


@pytest.mark.slow
def test_a_citation_picked_after_an_opening_is_one_of_those_offered(smollm: LlamaCppRuntime) -> None:
    offered = ["src/config.py:1-10", "src/server.py:4-7"]
    picked = smollm.pick_citations(QUESTION, "According to `", offered, most=1)
    assert picked in offered


@pytest.mark.slow
def test_the_model_opens_with_one_of_the_names_offered_and_goes_on_from_it(smollm: LlamaCppRuntime) -> None:
    snippet = "[src/shop.py:1-5]\n```python\ndef total_price(items):\n    return sum(i.price for i in items)\n\n" \
        "class Basket:\n    items = []\n```\n"
    ask = [Message("user", snippet + "Question: Which function adds up the prices of the items?")]
    names = ["total_price", "Basket"]
    picked = smollm.lead(ask, names)
    assert picked in names
    opening = lead_text(picked)
    g = smollm.generate(ask, max_tokens=12, prefix=opening)
    assert g.completion_tokens > 0 and g.prompt_tokens == smollm.count_messages(ask) + smollm.count_tokens(opening)


@pytest.mark.slow
def test_without_fences_the_model_cannot_open_a_code_block_even_when_asked_for_one(smollm: LlamaCppRuntime) -> None:
    ask = [Message("user", "Write a Python function that adds two numbers, in a ```python code block.")]
    free = smollm.generate(ask, max_tokens=48, decoding=dataclasses.replace(SMALL_MODEL, fences=True))
    fenceless = smollm.generate(ask, max_tokens=48, decoding=dataclasses.replace(SMALL_MODEL, fences=False))
    assert "```" in free.text  # the request is one the model answers with a block when it may
    assert "``" not in fenceless.text and fenceless.completion_tokens > 0


@pytest.mark.slow
def test_a_follow_up_turn_reuses_the_cached_prefix(smollm: LlamaCppRuntime) -> None:
    first = smollm.generate(QUESTION, max_tokens=8)
    follow = [*QUESTION, Message("assistant", first.text), Message("user", "And of Italy?")]
    g = smollm.generate(follow, max_tokens=8)
    assert g.cached_tokens >= smollm.count_messages(QUESTION) - 4
    assert g.prompt_tokens > g.cached_tokens


@pytest.mark.slow
def test_the_measured_template_overhead_covers_the_real_template(smollm: LlamaCppRuntime) -> None:
    overhead = smollm.template_overhead()
    contents = sum(smollm.count_tokens(m.content) for m in QUESTION)
    assert smollm.count_messages(QUESTION) <= contents + overhead.fixed + 2 * overhead.per_message


@pytest.mark.slow
def test_an_overflowing_prompt_raises_budget_error_not_a_llama_cpp_error(smollm: LlamaCppRuntime) -> None:
    with pytest.raises(BudgetError, match="exceeds n_ctx 2048"):
        smollm.generate([Message("user", "word " * 2100)], max_tokens=16)


@pytest.mark.slow
def test_prefill_is_measured_from_an_empty_cache(smollm: LlamaCppRuntime) -> None:
    assert smollm.measure_prefill(64) > 0
    assert len(smollm.filler_tokens(64)) == 64


def test_a_process_that_imported_llama_cpp_exits_without_resource_warnings() -> None:
    # llama_cpp._utils opens /dev/null twice at import; -X dev shows the warnings Python prints at exit.
    code = "from bridge.llm.llama import _import_llama_cpp; _import_llama_cpp()"
    done = subprocess.run(
        [sys.executable, "-X", "dev", "-c", code], capture_output=True, text=True, timeout=120, check=False,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr
    assert "ResourceWarning" not in done.stderr
