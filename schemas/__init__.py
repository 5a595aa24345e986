"""Plain, versioned data that crosses every durable boundary. Imports nothing of ours."""
