"""Squadron: a GitHub App that turns issues into merged pull requests with a team of LLM agents."""

__version__ = "0.1.0"
