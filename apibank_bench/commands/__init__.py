"""The `apibank-bench` subcommands, one module per concept; each has `register(subparsers)` and imports
what it uses when it runs. Their settings come from the table (`core.settings.add_command_flags`)."""
