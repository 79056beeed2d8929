"""A picture of a run: every send as a point (time, producer) coloured by outcome, every fault
as a shaded span, every unavailability window (no acknowledgement for a second or more) as a
red bar above the producers. Optional: without matplotlib there is no picture, and the run
says so."""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Final

from ledgermq.testing.chaos.checker import unavailability_windows
from ledgermq.testing.chaos.history import Outcome

if TYPE_CHECKING:
    from pathlib import Path

    from ledgermq.testing.chaos.history import History

__all__ = ["MATPLOTLIB_EXTRA", "NO_MATPLOTLIB", "write_timeline"]

MATPLOTLIB_EXTRA: Final = "bench"
"""The extra of the ``ledgermq`` package that brings matplotlib."""
NO_MATPLOTLIB: Final = (
    "no timeline.png: matplotlib is not installed "
    f"(pip install 'ledgermq[{MATPLOTLIB_EXTRA}]', or -e '.[{MATPLOTLIB_EXTRA}]' in a clone)"
)
"""What a run says when it cannot draw: which extra to install, not only what is missing."""

_COLOURS: Final = {Outcome.OK: "tab:green", Outcome.FAILED: "tab:red", Outcome.UNKNOWN: "orange"}
_FAULT_COLOURS: Final = ("tab:blue", "tab:purple", "tab:brown", "tab:gray", "tab:olive")


def write_timeline(history: History, path: Path) -> Path | None:
    """Write the PNG to ``path``; None (and nothing written) without matplotlib."""
    if importlib.util.find_spec("matplotlib") is None:
        return None
    import matplotlib as mpl  # noqa: PLC0415 - optional, and heavy

    mpl.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    figure, axes = plt.subplots(figsize=(12, 4))
    try:
        kinds = sorted({fault.kind for fault in history.faults})
        for fault in history.faults:
            colour = _FAULT_COLOURS[kinds.index(fault.kind) % len(_FAULT_COLOURS)]
            axes.axvspan(fault.start_ms / 1000, fault.end_ms / 1000, color=colour, alpha=0.15)
            axes.text(fault.start_ms / 1000, -0.6, f"{fault.kind} {','.join(fault.nodes)}",
                      fontsize=6, rotation=20)  # fmt: skip
        for outcome, colour in _COLOURS.items():
            ops = [op for op in history.sends if op.outcome is outcome]
            axes.scatter(
                [op.complete_ms / 1000 for op in ops],
                [op.producer for op in ops],
                s=4, c=colour, label=f"{outcome.value} ({len(ops)})",
            )  # fmt: skip
        top = max((op.producer for op in history.sends), default=0) + 0.5
        for number, (start, end) in enumerate(unavailability_windows(history.sends)):
            label = "no acknowledgement" if number == 0 else "_nolegend_"
            axes.hlines(top, start / 1000, end / 1000, colors="tab:red", linewidth=4, label=label)
        axes.set_xlabel("seconds since the start of the run (completion of each send)")
        axes.set_ylabel("producer")
        axes.set_yticks(sorted({op.producer for op in history.sends}))
        axes.set_title(f"chaos run, seed {history.seed}")
        axes.legend(loc="upper right", fontsize=7)
        figure.tight_layout()
        figure.savefig(path, dpi=110)
    finally:
        plt.close(figure)
    return path
