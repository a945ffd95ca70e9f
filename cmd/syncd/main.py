from internal.syncd.server import main

raise SystemExit(main())
