"""Knowledge documents: the `Knowledge` object (their one writer) and their passages."""
