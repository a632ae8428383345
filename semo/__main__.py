"""`python -m semo`: the same as the `semo` command."""

from semo.console.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
