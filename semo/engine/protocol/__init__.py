"""The protocol agents speak: typed messages and the marker parser (see docs/PROTOCOL.md).

`semo.engine.protocol.messages` holds one pydantic model per message (`AskUser`, `Invoke`,
`DeliverResult`, `StepComplete`, `Done`, the `ProtocolMessage` union) and `ProtocolError` for a
malformed one; `semo.engine.protocol.parser` holds `MarkerParser`, an incremental line-oriented
parser, and `parse_reply` for one complete reply (e.g. the Stop hook's `last_assistant_message`).
"""
