"""What an operator sees of a running deployment: traces over OTLP."""
