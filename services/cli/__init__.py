"""The `teaspill` command line."""
