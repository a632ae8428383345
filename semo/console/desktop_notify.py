"""A notification on the operator's own terminal: OSC 9 / OSC 777 and a bell.

Each `Notification` event of the engine (semo.engine.notify's console sink) is written once
(semo.engine.notify.osc)."""

from __future__ import annotations

import os
from collections import deque
from typing import Any

from semo.engine.notify.osc import notification_sequences


class DesktopNotifier:
    """Writes each `Notification` event once to the app's terminal (a notice seen twice, e.g.
    an engine death this console saw and the next engine reported, is shown once)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.tmux = bool(os.environ.get("TMUX"))
        self._shown: deque[str] = deque(maxlen=500)

    def show(self, kind: str, headline: str, body: str, ref: str = "") -> bool:
        """Write the sequences; False when this notice was shown already or there is no
        terminal (a headless app)."""
        key = f"{kind}:{ref}" if ref else ""
        if key and key in self._shown:
            return False
        # a question rang already (the main screen's own bell for it)
        sequences = notification_sequences(headline, body, tmux=self.tmux, bell=kind != "question")
        if not self.app.write_terminal(sequences):
            return False
        if key:
            self._shown.append(key)
        return True
