from internal.embedd.server import main

raise SystemExit(main())
