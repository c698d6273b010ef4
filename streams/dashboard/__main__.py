"""`python -m streams.dashboard` runs the status page (same options as `tidemark dashboard`)."""

from streams.dashboard.cli import main

raise SystemExit(main())
