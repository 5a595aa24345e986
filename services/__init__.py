"""teaspill services: one package per role."""
