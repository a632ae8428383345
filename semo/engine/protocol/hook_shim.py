"""``semo hook EVENT``: the command Claude Code runs for each hook semo installs.

How it works: docs/SESSIONS.md, "The hook shim".
"""

import _signal  # built in, like _socket: `signal` would import enum
import _socket  # the C module: `socket` costs ~10 ms of imports (enum, selectors)
import os
import sys
import time

ENV_SOCKET = "SEMO_HOOK_SOCKET"
ENV_TOKEN = "SEMO_HOOK_TOKEN"
ACK_TIMEOUT = 2.0
DECISION_EVENTS = ("PermissionRequest",)  # semo.engine.protocol.hooks.DECISION_EVENTS
_DECISION_PREFIX = b'{"ok": true, "output": '
MAX_MESSAGE_BYTES = 1024 * 1024  # the engine's limit (semo.engine.protocol.hooks.MAX_MESSAGE_BYTES)
_SHRINK_KEEP = 4096  # in an oversize payload, fields whose JSON is longer than this are dropped


def _warn(text: str) -> None:
    try:
        sys.stderr.write("semo hook: " + text + "\n")
        sys.stderr.flush()
    except Exception:
        pass


def _is_token(value: str) -> bool:
    return all(c.isalnum() or c in "-_" for c in value) and value.isascii()


def _read_stdin() -> bytes:
    stdin = sys.stdin
    if stdin is None or stdin.isatty():
        return b"{}"
    data = stdin.buffer.read().strip()
    # JSON strings cannot hold raw CR/LF, so outside them these are whitespace: a pretty-printed
    # payload becomes one line without being parsed.
    return data.replace(b"\r", b" ").replace(b"\n", b" ") or b"{}"


def _shrink(payload: bytes, budget: int) -> bytes:
    """A smaller payload: the big fields dropped (named in ``semo_dropped_fields``)."""
    import json

    try:
        value = json.loads(payload)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        return b'{"semo_dropped_fields":["*"]}'
    kept: dict[str, object] = {}
    dropped: list[str] = []
    for key, item in value.items():
        text = json.dumps(item, ensure_ascii=False)
        if len(text) > _SHRINK_KEEP:
            dropped.append(key)
        else:
            kept[key] = item
    kept["semo_dropped_fields"] = dropped
    out = json.dumps(kept, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return out if len(out) <= budget else b'{"semo_dropped_fields":["*"]}'


def build_message(event: str, token: str, payload: bytes, sent_at: float | None = None) -> bytes:
    """The request line (with its newline) for the engine."""
    stamp = time.time() if sent_at is None else sent_at
    head = f'{{"token":"{token}","event":"{event}","sent_at":{stamp!r},"payload":'.encode("ascii")
    if len(head) + len(payload) + 1 > MAX_MESSAGE_BYTES:
        payload = _shrink(payload, MAX_MESSAGE_BYTES - len(head) - 1)
    return head + payload + b"}\n"


def _busy(_signum: int, _frame: object) -> None:
    raise TimeoutError("the engine's socket stayed busy")


def _connect(sock: _socket.socket, path: str, deadline: float) -> None:
    """Connect by ``deadline``. While a flood fills the engine's backlog, a connect with a
    timeout fails at once (EAGAIN), and retrying loses to the flood's blocking connects; a
    blocking connect waits in the kernel's queue and gets its turn. SIGALRM bounds that wait
    (in the main thread; elsewhere the connect is retried until the deadline)."""
    try:
        previous = _signal.signal(_signal.SIGALRM, _busy)
    except ValueError:  # not the main thread
        previous = None
    if previous is not None:
        try:
            _signal.setitimer(_signal.ITIMER_REAL, max(deadline - time.monotonic(), 0.001))
            sock.settimeout(None)
            sock.connect(path)
        finally:
            _signal.setitimer(_signal.ITIMER_REAL, 0)
            _signal.signal(_signal.SIGALRM, previous)
        return
    while True:
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        try:
            sock.connect(path)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise TimeoutError("the engine's socket stayed busy") from None
            time.sleep(0.005)


def send(path: str, message: bytes, timeout: float = ACK_TIMEOUT, *, wait: bool = False) -> bytes:
    """Send one request, return the answer line (bytes, without the newline). With ``wait``
    the answer is awaited without a deadline (a decision; connecting still has ``timeout``)."""
    deadline = time.monotonic() + timeout
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        _connect(sock, path, deadline)
        sock.sendall(message)
        answer = b""
        while b"\n" not in answer:
            left = deadline - time.monotonic()
            if wait:
                sock.settimeout(None)
            elif left <= 0:
                raise TimeoutError("no answer from the engine")
            else:
                sock.settimeout(left)
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
        return answer.split(b"\n", 1)[0]
    finally:
        sock.close()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    path = os.environ.get(ENV_SOCKET)
    token = os.environ.get(ENV_TOKEN)
    if not path or not token:
        return 0  # not run by semo: nothing to report to
    if len(args) != 1 or not args[0].isalpha() or not args[0].isascii():
        _warn(f"usage: semo hook EVENT (one event name, e.g. Stop); got {args!r}")
        return 0
    event = args[0]
    if not _is_token(token):
        _warn(f"{ENV_TOKEN} is not a semo token; not reporting {event}")
        return 0
    try:
        payload = _read_stdin()
    except Exception as exc:
        _warn(f"cannot read the hook input for {event}: {exc}")
        payload = b"{}"
    decides = event in DECISION_EVENTS
    try:
        answer = send(path, build_message(event, token, payload), wait=decides)
    except (OSError, TimeoutError) as exc:
        _warn(f"engine not reachable at {path} ({exc}); {event} not reported")
        return 0
    if decides and answer.startswith(_DECISION_PREFIX):
        _print_decision(answer)
    elif not answer.startswith(b'{"ok": true'):
        said = answer.decode("utf-8", "replace")[:200] or "no answer"
        _warn(f"engine refused {event}: {said}")
    return 0


def _print_decision(answer: bytes) -> None:
    """Print the engine's decision for Claude Code (only a well-formed one)."""
    import json

    try:
        output = json.loads(answer)["output"]
    except (ValueError, KeyError, TypeError):
        _warn("the engine's decision is not JSON; Claude Code asks in its own dialog")
        return
    if isinstance(output, dict):
        sys.stdout.write(json.dumps(output) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    try:
        code = main()
    except BaseException as exc:  # never block the agent, whatever happened
        if not isinstance(exc, SystemExit | KeyboardInterrupt):
            _warn(f"unexpected error: {exc!r}")
        code = 0
    sys.exit(code)
