"""The `bridge compare --plot` chart: prefill time and KV memory against context length."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["write_plot"]

GIB = 1 << 30


def write_plot(report: dict[str, Any], path: Path) -> None:
    """Prefill time (top) and KV memory (bottom) against context length, with the key sizes marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    m, full, ret, pre = report["model"], report["full_context"], report["retrieval"], report["prefill"]
    marks: dict[int, str] = {}  # one line per length; coinciding marks share it (n_ctx = trained context)
    for label, x in (("retrieval", ret["tokens"]), ("n_ctx", m["n_ctx"]), ("trained context", m["trained_context"]),
                     ("full repository", full["tokens"])):
        marks[x] = f"{marks[x]} = {label}" if x in marks else label
    n = np.geomspace(max(16, min(marks) / 2), max(marks) * 1.5, 200)
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(8, 7))
    if pre["fit"] is not None:
        fit = pre["fit"]
        largest = pre["measured"][-1]["tokens"]
        curve = fit["a"] + fit["b"] * n + fit["c"] * n * n
        top.plot(n[n <= largest], curve[n <= largest] / 1000, color="C0", label="fit a + b·n + c·n²")
        top.plot(n[n >= largest], curve[n >= largest] / 1000, color="C0", linestyle="--", label="extrapolation")
        top.scatter([p["tokens"] for p in pre["measured"]], [p["ms"] / 1000 for p in pre["measured"]],
                    color="C1", zorder=3, label="measured")
        top.scatter([ret["tokens"]], [pre["retrieval_ms"] / 1000], marker="s", color="C4", zorder=3,
                    label="retrieval prompt (measured)")
        top.scatter([full["tokens"]], [pre["full_context_predicted_ms"] / 1000], marker="x", color="C3", zorder=3,
                    label="full repository (predicted)")
        top.set_yscale("log")
        top.legend(fontsize=7, loc="upper left")
    else:
        top.text(0.5, 0.5, "prefill time needs a real model (--model FILE.gguf)", ha="center", va="center",
                 transform=top.transAxes)
        top.set_yticks([])
    top.set_ylabel("prefill time (s)")
    top.set_title(f"{Path(m['label']).name}: retrieval vs whole repository in context")
    for t, style in (("f16", "-"), ("q8_0", "--"), ("q4_0", ":")):
        per_token = m["kv_bytes_per_token_by_type"][t]
        bottom.plot(n, n * per_token / GIB, linestyle=style, color="C2", label=f"KV cache {t}")
    bottom.set_yscale("log")
    bottom.set_xscale("log")
    bottom.set_ylabel("KV cache (GiB)")
    bottom.set_xlabel("context length (tokens)")
    for (x, label), color in zip(sorted(marks.items()), ("C4", "C5", "C6", "C3")):
        for axis in (top, bottom):
            axis.axvline(x, color=color, linewidth=1, alpha=0.7)
        bottom.annotate(f"{label}\n{x:,}", (x, 0.02), xycoords=("data", "axes fraction"), rotation=90,
                        fontsize=7, ha="right", va="bottom", color=color)
    bottom.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
