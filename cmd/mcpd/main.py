from internal.mcpd.server import main

raise SystemExit(main())
