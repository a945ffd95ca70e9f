from internal.cli.main import main

raise SystemExit(main())
