"""Pure core: models, events, effects and decisions. Never imports boto3, httpx or anything that does I/O."""
