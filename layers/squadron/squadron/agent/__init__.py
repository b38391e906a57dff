"""The agent host: one ECS task hosts one agent's Copilot session (sleep, wake, breakers, tools)."""
