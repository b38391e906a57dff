"""The local stack: the system on one machine, with a GitHub sandbox and a scripted model."""
