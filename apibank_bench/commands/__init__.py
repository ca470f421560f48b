"""The `apibank-bench` subcommands, one module per concept; each has `register(subparsers)`."""
