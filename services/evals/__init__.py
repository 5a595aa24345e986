"""Evals: eval files run through the stack, graded on the recorded timeline."""
