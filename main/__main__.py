from main.cli import run

raise SystemExit(run())
