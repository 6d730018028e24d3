"""The command line and what it runs: replay, demo, sweep, soak, bench, figures."""
