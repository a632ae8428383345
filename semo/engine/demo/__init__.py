"""The bundled demo: a scripted stand-in agent and the `semo demo` runner (clearly a demo)."""
