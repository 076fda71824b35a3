"""runner_ref."""
