"""bench/out/reliability.md from the figures bench/reliability.py measured: one table per section."""

from __future__ import annotations

import statistics

__all__ = ["write_report"]


def _md_kill(d: dict) -> list[str]:
    lines = _md_kill_table(d, "single-segment build")
    if "delta" in d:
        lines += ["", *_md_kill_table(d["delta"], "delta re-index (base hard-linked, delta + deletion mask)")]
    return lines


def _md_kill_table(d: dict, path: str) -> list[str]:
    lines = [f"{d['passed']}/{d['total']} kill points of a {path} recovered (stdlib copy, {d['corpus_chunks']} "
             f"chunks, hash embedder; the killed run re-indexes an edit of 2 files on top of the live index, as a "
             f"watcher would); mean re-run to a complete index {d['rerun_s_mean']} s.", "",
             "| kill point | killed after s | left what proves the point | index answering after the kill (expected) "
             "| re-run s | leftovers after it |",
             "|---|---|---|---|---|---|"]
    proof = {True: "yes", False: "NO", None: "-"}
    for r in d["points"]:
        lines.append(f"| {r['point']} | {r['seconds_to_kill'] if r['killed'] else 'NOT KILLED'} | {proof[r['evidence']]} "
                     f"| {r['answers_after_kill']} ({r['expected']}) | {r['rerun_s']} | {len(r['leftovers_after_rerun'])} |")
    return lines


def _md_burst(d: dict) -> list[str]:
    first = d["rounds"][0]
    lines = [f"Each burst is 1,000 concurrent `search_code` calls (10 sessions x 100 at once), so a call's latency "
             f"is mostly its wait in the queue; what counts is errors and the time to answer all. Server alive at "
             f"the end: {d['server_alive']}.", "",
             "| round | clients that hung up mid-body first | errors | all answered in | calls/s | server RSS after (MB) |",
             "|---|---|---|---|---|---|"]
    for n, r in enumerate(d["rounds"]):
        lines.append(f"| {n + 1} | {r['hang_ups_before']} | {r['errors']} | {r['wall_s']} s | {r['throughput_per_s']} "
                     f"| {d['rss_mb'][n + 1]} |")
    lines += ["", f"Server RSS before the first burst: {d['rss_mb'][0]} MB; first burst p99 {first['latency']['p99_ms']} ms."]
    return lines



def _p50_p99(d: dict) -> str:
    return f"{d['p50_ms']} / {d['p99_ms']} ms ({d['n']} searches)"

def _md_inputs(d: dict) -> list[str]:
    t, b = d["tiny_files"], d["file_50mb"]
    return [f"- 100,000 tiny files: first index {t['first_index']['seconds']} s (peak RSS "
            f"{t['first_index']['peak_rss_mb']} MB, {t['first_index']['chunks']} chunks), unchanged re-index "
            f"{t['unchanged_reindex']['seconds']} s; lexical search p50 {t['search']['p50_ms']} ms, p99 {t['search']['p99_ms']} ms "
            f"(the first counts the stale files in line); 40 ms apart for 12 s, as served: p50 / p99 "
            f"{_p50_p99(t['served']['shipped'])}, against {_p50_p99(t['served']['counted_in_line'])} when each search "
            f"older than 2 s counts them in line.",
            f"- one {b['bytes'] / 2**20:.0f} MB file: skipped by the default 1 MiB limit in {b['default_limit']['seconds']} s "
            f"({b['default_limit']['skipped']}); with the limit raised, indexed in {b['limit_raised']['seconds']} s into "
            f"{b['limit_raised']['chunks']} chunks, peak RSS {b['limit_raised']['peak_rss_mb']} MB.",
            f"- the hostile repository of tests/support/hostile.py: {d['hostile_repo']['seconds']} s, "
            f"{d['hostile_repo']['files']} files indexed, skipped {d['hostile_repo']['skipped']}."]


def _md_load(d: dict) -> list[str]:
    ld = d["load"]
    timeline = ", ".join(f"{t:.0f} s: {m:.0f}" for t, m, *_ in ld["rss_timeline_mb"][::5])
    lines = [f"`{d['command']}`", "",
             f"- {ld['clients']} clients x {ld['duration_s']} s, mix "
             f"{', '.join(f'{k} {v:.0%}' for k, v in ld.get('mix', {}).items())}, {ld['reindexes']} re-indexes "
             f"during the run (mean {ld['reindex_mean_s']} s); corpus {d['index']['files']} files, {d['index']['chunks']} chunks.",
             f"- {ld['calls']} calls, {ld['throughput_per_s']} calls/s, **{ld['errors']} errors**."]
    for kind in ("all", "search_code", "read_file", "list_files"):
        s = ld.get(kind) or {}
        if s.get("n"):
            lines.append(f"- {kind}: p50 {s['p50_ms']} ms, p90 {s['p90_ms']} ms, **p99 {s['p99_ms']} ms**, max {s['max_ms']} ms")
    samples = ld["rss_timeline_mb"]
    third = len(samples) // 3
    middle = statistics.fmean(m for _, m, *_ in samples[third : 2 * third])
    last = statistics.fmean(m for _, m, *_ in samples[2 * third :])
    lines += [f"- server RSS first/last 10 s: {ld['rss_first_10s_mb']} / {ld['rss_last_10s_mb']} MB "
              f"({ld['rss_growth_pct']} %), after {ld.get('warmup_s', 0):.0f} s of the same load not counted "
              f"(RSS {ld.get('rss_warmup_first_mb')} → {ld.get('rss_warmup_last_mb')} MB during it); "
              f"middle third {middle:.1f} MB, last third "
              f"{last:.1f} MB ({(last / middle - 1) * 100:+.1f} %); every 5 s (MB): {timeline}."]
    return lines


def _md_chat(d: dict) -> list[str]:
    rows = d["turns"]
    lines = [f"{d['model']}, n_ctx {d['n_ctx']}, KV budget {d['kv_budget_bytes']:,} bytes "
             f"({d['kv_budget_bytes'] // d['kv_bytes_per_token']} tokens at {d['kv_bytes_per_token']:,} bytes/token): "
             f"**{d['violations']} turns over budget** of {len(rows)}; largest prompt {d['max_prompt_tokens']} tokens, "
             f"largest KV in use {d['max_kv_bytes_used']:,} bytes.", "",
             "| turn | prompt tokens (planned / llama.cpp) | answer | limit | history kept / dropped | KV used / plan (bytes) | ms |",
             "|---|---|---|---|---|---|---|"]
    for r in rows[:3] + rows[9::10]:
        lines.append(f"| {r['turn']} | {r['prompt_tokens_planned']} / {r['prompt_tokens']} | {r['answer_tokens']} | "
                     f"{r['limit']} | {r['history_kept']} / {r['dropped_turns']} | {r['kv_bytes_used']:,} / "
                     f"{r['kv_bytes_plan']:,} | {r['total_ms']:.0f} |")
    return lines


TITLES = {"kill": ("kill -9 at 20 points of indexing", "python bench/reliability.py kill", _md_kill),
          "burst": ("A burst of 1,000 calls, and clients that hang up", "python bench/reliability.py burst", _md_burst),
          "inputs": ("Hostile inputs at scale", "python bench/reliability.py inputs", _md_inputs),
          "load": ("Load: clients over HTTP while re-indexing", "python bench/reliability.py load", _md_load),
          "chat": ("A 50-turn chat under the token and KV budget", "python bench/reliability.py chat", _md_chat)}


def write_report(results: dict) -> str:
    meta = results.get("machine", {})
    lines = ["# Reliability figures", "",
             f"Measured {meta.get('date', '?')} on {meta.get('cpus', '?')} CPUs ({meta.get('platform', '?')}), shared "
             "with other jobs. CI runs the same scenarios at small size: "
             "`pytest -q tests/test_reliability_*.py tests/test_fuzz_*.py` (add `-m 'not slow'` to skip the 100k-file "
             "and 50 MB cases).", ""]
    for name, (title, command, render) in TITLES.items():
        if name in results:
            lines += [f"## {title}", "", f"`{command}`", "", *render(results[name]), ""]
    return "\n".join(lines)
