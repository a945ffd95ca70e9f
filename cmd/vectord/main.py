from internal.vectord.server import main

raise SystemExit(main())
