"""Every console action in Textual's command palette (ctrl+p)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.markup import escape

Action = Callable[[], object] | Callable[[], Awaitable[object]]


class SemoCommands(Provider):
    def _commands(self) -> list[tuple[str, str, Action]]:
        from semo.console.screens.main import MainScreen

        screen = self.screen  # the screen the palette was opened on (app.screen is the palette)
        if not isinstance(screen, MainScreen):
            return []
        app = screen.app
        commands: list[tuple[str, str, Action]] = [
            (
                "Send a prompt to the selected session",
                "types it when the agent is ready (F6)",
                screen.action_prompt,
            ),
            (
                "Cancel the selected session's turn",
                "Esc for Claude Code, Ctrl+C for others; asks first (F8)",
                screen.action_cancel,
            ),
            (
                "Terminate the selected session",
                "ends the agent's process (asks first)",
                screen.terminate_selected,
            ),
            ("Answer the oldest question", "the question inbox (F4)", screen.answer_oldest),
            ("Jobs", "the office's jobs and their timelines (F5)", screen.action_jobs),
            (
                "Create job",
                "a task for an agent's role (c in the jobs view)",
                partial(screen.action_jobs, "create_job"),
            ),
            (
                "Cancel job",
                "the newest job, or pick one in the jobs view (x); asks first",
                partial(screen.action_jobs, "cancel_job"),
            ),
            (
                "Job diff",
                "the newest job's changes, file by file, or pick one in the jobs view (d)",
                partial(screen.action_jobs, "diff"),
            ),
            (
                "Shell in the job's worktree",
                "the newest job's, or pick one in the jobs view (s); a tmux window inside tmux",
                partial(screen.action_jobs, "shell"),
            ),
            (
                "Pool",
                "sessions warm/cold, leased/idle; roles without one; breakers; waiting (F9)",
                screen.action_pool,
            ),
            (
                "Zoom the selected pane",
                f"the whole terminal (F3); {screen.prefix_display} then z leaves (the zoomed "
                "pane's keys go to its agent)",
                screen.action_zoom,
            ),
            (
                "Cycle the pane layout",
                "one large pane, or 2, 4 or 6 (F2)",
                screen.action_cycle_layout,
            ),
            ("Next session", "select the next session (n)", lambda: screen.action_next_session(1)),
            (
                "Previous session",
                "select the previous session (p)",
                lambda: screen.action_next_session(-1),
            ),
            (
                "Start recording the selected session",
                "asciicast v2 in the state directory",
                screen.start_recording,
            ),
            (
                "Stop recording the selected session",
                "finish the asciicast file",
                screen.stop_recording,
            ),
            ("Keys", "what every key does (F1)", screen.action_keys_help),
            # SemoApp's actions: `self.app` is typed as textual's App
            ("Detach", "leave the console; the agents keep running", app.action_detach),  # type: ignore[attr-defined]
            (
                "Stop the office",
                "stop the engine and every agent (asks first)",
                app.action_stop_office,  # type: ignore[attr-defined]  # as action_detach
            ),
        ]
        for role in sorted(screen.engine.agents):
            commands.append(
                (
                    f"New session for {role}",
                    "from the pool: an idle one, else a new one",
                    partial(screen.new_session, role),
                )
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
