from internal.gateway.server import main

raise SystemExit(main())
