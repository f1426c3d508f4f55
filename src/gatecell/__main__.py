from gatecell.cli import main

raise SystemExit(main())
