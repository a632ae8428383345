"""Every console action in Textual's command palette (ctrl+p)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.markup import escape

Action = Callable[[], object] | Callable[[], Awaitable[object]]


class SemoCommands(Provider):
    def _commands(self) -> list[tuple[str, str, Action]]:
        from console.screens.main import MainScreen

        screen = self.screen  # the screen the palette was opened on (app.screen is the palette)
        if not isinstance(screen, MainScreen):
            return []
        commands: list[tuple[str, str, Action]] = [
            (
                "Send a prompt to the selected agent",
                "types it when the agent is ready",
                screen.action_prompt,
            ),
            (
                "Cancel the selected agent's turn",
                "Esc for Claude Code, Ctrl+C for others",
                screen.action_cancel,
            ),
            (
                "Terminate the selected session",
                "ends the agent's process",
                screen.terminate_selected,
            ),
            ("Answer questions", "go to the question inbox", screen.action_questions),
            ("Zoom the selected pane", "toggle full size", screen.action_zoom),
            ("Cycle the pane layout", "1, 2, 4 or 6 panes", screen.action_cycle_layout),
            (
                "Start recording the selected pane",
                "asciicast v2 in the state directory",
                screen.start_recording,
            ),
            (
                "Stop recording the selected pane",
                "finish the asciicast file",
                screen.stop_recording,
            ),
        ]
        for role in sorted(screen.engine.agents):
            commands.append(
                (f"New session for {role}", "from the pool", partial(screen.new_session, role))
            )
        return commands

    # Palette prompts and help are markup in Textual: every entry goes through escape(), so a
    # name never becomes markup whatever it holds (roles are [A-Za-z][A-Za-z0-9_-]* today).

    async def discover(self) -> Hits:
        for name, help_text, action in self._commands():
            yield DiscoveryHit(escape(name), action, text=name, help=escape(help_text))

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, help_text, action in self._commands():
            score = matcher.match(name)
            if score > 0:
                prompt = matcher.highlight(escape(name))
                yield Hit(score, prompt, action, text=name, help=escape(help_text))
