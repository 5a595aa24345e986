"""The harness: the loop that turns a wake into rounds. Pure: no I/O, no clock, no
randomness, no Restate. It imports only `schemas`."""
