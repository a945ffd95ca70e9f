from internal.matrixd.server import main

raise SystemExit(main())
