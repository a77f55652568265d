from zoforge.cli import main

raise SystemExit(main())
